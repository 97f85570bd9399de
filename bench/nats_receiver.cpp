#include "bench/nats_receiver.hpp"

#include "bench/proc_stats.hpp"
#include "relay/demo/embedded_postgres.hpp"

#include <fmt/format.h>
#include <nats/nats.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

namespace walhook::bench {
namespace {

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Debian installs it in /usr/sbin, which is not on every user's PATH.
std::string server_binary() {
  for (const char* p : {"/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"})
    if (::access(p, X_OK) == 0) return p;
  throw std::runtime_error("nats-server is not installed (scripts/bootstrap installs it)");
}

std::string status_text(natsStatus s) {
  const char* last = nats_GetLastError(nullptr);
  return last != nullptr && *last != '\0' ? fmt::format("{} ({})", natsStatus_GetText(s), last) : natsStatus_GetText(s);
}

void check(natsStatus s, const std::string& what) {
  if (s != NATS_OK) throw std::runtime_error(fmt::format("{}: {}", what, status_text(s)));
}

/// "/ep/12" → "ep12": the subject token and stream name part of an endpoint path.
std::string token_of(const std::string& path) {
  std::string t;
  for (char c : path)
    if (std::isalnum(static_cast<unsigned char>(c))) t += c;
  if (t.empty()) throw std::invalid_argument("endpoint path without a name: " + path);
  return t;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// ------------------------------------------------------------------ the server

nats_server_process::nats_server_process() {
  // Next to the throwaway PostgreSQL (/tmp): the same disk.
  char tmpl[] = "/tmp/walhook-bench-nats-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  port_ = relay::free_tcp_port();
  pid_ = relay::spawn_process({server_binary(), "-js", "-a", "127.0.0.1", "-p", std::to_string(port_), "-sd",
                               dir_ + "/store"},
                              log_path());
  // Ready when JetStream answers an account info request (it has recovered its store).
  for (int i = 0; i < 200; ++i) {
    natsConnection* nc = nullptr;
    if (natsConnection_ConnectTo(&nc, url().c_str()) == NATS_OK) {
      jsCtx* js = nullptr;
      jsAccountInfo* ai = nullptr;
      bool ready = natsConnection_JetStream(&js, nc, nullptr) == NATS_OK && js_GetAccountInfo(&ai, js, nullptr, nullptr) == NATS_OK;
      if (ai != nullptr) jsAccountInfo_Destroy(ai);
      if (js != nullptr) jsCtx_Destroy(js);
      natsConnection_Destroy(nc);
      if (ready) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("nats-server did not start; see " + log_path());
}

nats_server_process::~nats_server_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string nats_server_process::url() const { return fmt::format("nats://127.0.0.1:{}", port_); }

// ------------------------------------------------------------------ the subscriber

struct nats_receiver::connection {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
};

struct nats_receiver::route {
  nats_receiver* owner = nullptr;
  std::string path, token, stream;
  natsSubscription* sub = nullptr;
  std::atomic<std::int64_t> ok{0};
};

namespace {

/// nats.c, on the subscription's delivery thread: one stored message.
void on_message(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
  const std::int64_t at = now_us();
  auto* r = static_cast<nats_receiver::route*>(closure);
  const char* id = nullptr;
  std::string msg_id;
  if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK && id != nullptr) msg_id = id;
  natsMsg_Destroy(msg);
  r->owner->record(*r, at, std::move(msg_id));
}

}  // namespace

nats_receiver::nats_receiver() : server_(std::make_unique<nats_server_process>()), conn_(std::make_unique<connection>()) {
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) s = natsOptions_SetURL(opts, server_->url().c_str());
  if (s == NATS_OK) s = natsConnection_Connect(&conn_->nc, opts);
  natsOptions_Destroy(opts);
  check(s, "bench subscriber: connect to nats-server");
  check(natsConnection_JetStream(&conn_->js, conn_->nc, nullptr), "bench subscriber: JetStream context");
}

nats_receiver::~nats_receiver() { stop(); }

void nats_receiver::configure(const endpoint_spec& spec) {
  if (by_path_.contains(spec.path)) return;
  auto r = std::make_unique<route>();
  r->owner = this;
  r->path = spec.path;
  r->token = token_of(spec.path);
  r->stream = "BENCH_" + upper(r->token);
  const std::string filter = "bench." + r->token + ".>";

  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = r->stream.c_str();
  const char* subjects[] = {filter.c_str()};
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  cfg.Retention = js_LimitsPolicy;
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  check(js_AddStream(&si, conn_->js, &cfg, nullptr, &jerr), fmt::format("create stream {} (JetStream error {})", r->stream, static_cast<int>(jerr)));
  jsStreamInfo_Destroy(si);

  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = r->stream.c_str();
  so.Config.AckPolicy = js_AckNone;
  so.Config.DeliverPolicy = js_DeliverNew;
  check(js_Subscribe(&r->sub, conn_->js, filter.c_str(), on_message, r.get(), nullptr, &so, &jerr),
        fmt::format("subscribe to {} (JetStream error {})", r->stream, static_cast<int>(jerr)));
  check(natsSubscription_SetPendingLimits(r->sub, -1, -1), "subscription limits");  // never a slow consumer
  by_path_[r->path] = r.get();
  routes_.push_back(std::move(r));
}

void nats_receiver::record(route& r, std::int64_t received_at_us, std::string msg_id) {
  seen_.fetch_add(1, std::memory_order_relaxed);
  relay::received_request q;
  q.path = r.path;
  q.received_at_us = received_at_us;
  q.status = 200;
  std::string key = msg_id + " " + r.path;
  q.webhook_id = std::move(msg_id);
  std::lock_guard lock(mutex_);
  const pthread_t self = ::pthread_self();
  if (std::none_of(threads_.begin(), threads_.end(), [&](pthread_t t) { return ::pthread_equal(t, self); }))
    threads_.push_back(self);
  if (answered_.insert(std::move(key)).second) {
    ok_.fetch_add(1, std::memory_order_relaxed);
    r.ok.fetch_add(1, std::memory_order_relaxed);
  } else {
    duplicates_.fetch_add(1, std::memory_order_relaxed);
  }
  received_.push_back(std::move(q));
}

void nats_receiver::set_status(const std::string&, unsigned) {
  throw std::logic_error("a NATS destination has no status to answer");
}

std::string nats_receiver::url(const std::string& path) const {
  return fmt::format("{}/bench.{}.{{event_type}}", server_->url(), token_of(path));
}

std::int64_t nats_receiver::answered_ok(const std::string& path) const {
  auto it = by_path_.find(path);
  return it == by_path_.end() ? 0 : it->second->ok.load(std::memory_order_relaxed);
}

std::vector<relay::received_request> nats_receiver::requests() const {
  std::lock_guard lock(mutex_);
  return received_;
}

double nats_receiver::cpu_seconds() const {
  if (stopped_) return std::max(final_cpu_, 0.0);
  std::lock_guard lock(mutex_);
  double s = 0;
  for (auto t : threads_) s += thread_cpu_seconds(t);
  return s;
}

double nats_receiver::broker_cpu_seconds() const {
  if (stopped_) return final_broker_cpu_;
  return process_cpu_seconds(server_->pid());
}

std::string nats_receiver::notes() const {
  if (stopped_) return final_notes_;
  std::uint64_t stored = 0;
  for (const auto& r : routes_) {
    jsStreamInfo* si = nullptr;
    if (js_GetStreamInfo(&si, conn_->js, r->stream.c_str(), nullptr, nullptr) == NATS_OK && si != nullptr) {
      stored += si->State.Msgs;
      jsStreamInfo_Destroy(si);
    }
  }
  return fmt::format("nats: {} messages stored in {} streams, {} received by the consumer ({} distinct)", stored,
                     routes_.size(), seen_.load(), ok_.load());
}

void nats_receiver::stop() {
  if (stopped_) return;
  final_cpu_ = cpu_seconds();
  final_broker_cpu_ = broker_cpu_seconds();
  final_notes_ = notes();
  stopped_ = true;
  for (auto& r : routes_)
    if (r->sub != nullptr) {
      // Drained: every callback has returned before the route (its closure) can go.
      if (natsSubscription_Drain(r->sub) == NATS_OK) natsSubscription_WaitForDrainCompletion(r->sub, 5000);
      natsSubscription_Destroy(r->sub);
      r->sub = nullptr;
    }
  if (conn_->js != nullptr) jsCtx_Destroy(conn_->js);
  conn_->js = nullptr;
  if (conn_->nc != nullptr) {
    natsConnection_Close(conn_->nc);
    natsConnection_Destroy(conn_->nc);
  }
  conn_->nc = nullptr;
  server_.reset();
}

}  // namespace walhook::bench
