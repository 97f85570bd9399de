#include "tests/harness/harness.hpp"

#include <regex>

#include <boost/asio/executor_work_guard.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace walhook::test {

relay::embedded_postgres& cluster() {
  static std::unique_ptr<relay::embedded_postgres> pg;
  static std::once_flag once;
  std::call_once(once, [] { pg = std::make_unique<relay::embedded_postgres>(); });
  return *pg;
}

std::string walhook_binary() { return WALHOOK_BINARY; }

int run_walhook(const std::vector<std::string>& args, std::string& output) {
  std::vector<std::string> argv{walhook_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return relay::run_process(argv, "", output);
}

std::string fresh_database(const std::string& name) {
  auto& pg = cluster();
  pg.psql("CREATE DATABASE " + name);
  std::string url = pg.url(name);
  std::string out;
  if (run_walhook({"migrate", "--database-url", url, "--slot", name}, out) != 0)
    throw std::runtime_error("walhook migrate failed: " + out);
  return url;
}

walhook_process::walhook_process(std::vector<std::string> args, std::string name)
    : args_(std::move(args)), name_(std::move(name)) {
  char tmpl[] = "/tmp/walhook-it-log-XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd >= 0) ::close(fd);
  log_path_ = tmpl;
}

walhook_process::walhook_process(walhook_process&& other) noexcept
    : args_(std::move(other.args_)),
      name_(std::move(other.name_)),
      log_path_(std::exchange(other.log_path_, {})),
      pid_(std::exchange(other.pid_, 0)),
      exit_code_(other.exit_code_),
      sigterm_sent_(other.sigterm_sent_) {}

walhook_process& walhook_process::operator=(walhook_process&& other) noexcept {
  if (this != &other) {
    release();
    args_ = std::move(other.args_);
    name_ = std::move(other.name_);
    log_path_ = std::exchange(other.log_path_, {});
    pid_ = std::exchange(other.pid_, 0);
    exit_code_ = other.exit_code_;
    sigterm_sent_ = other.sigterm_sent_;
  }
  return *this;
}

unsigned short walhook_process::admin_port() const {
  std::smatch m;
  const auto text = log();
  if (!std::regex_search(text, m, std::regex(R"("admin.listening".*"port":(\d+))"))) return 0;
  return static_cast<unsigned short>(std::stoi(m[1]));
}

unsigned short walhook_process::api_port() const {
  std::smatch m;
  const auto text = log();
  if (!std::regex_search(text, m, std::regex(R"("api.listening".*"port":(\d+))"))) return 0;
  return static_cast<unsigned short>(std::stoi(m[1]));
}

walhook_process::~walhook_process() { release(); }

void walhook_process::release() {
  if (pid_) kill9();
  if (!log_path_.empty()) ::unlink(log_path_.c_str());
}

void walhook_process::start() {
  std::vector<std::string> argv{walhook_binary()};
  argv.insert(argv.end(), args_.begin(), args_.end());
  exit_code_ = -1;
  sigterm_sent_ = false;
  pid_ = relay::spawn_process(argv, log_path_);  // dies with the test
}

void walhook_process::reaped(int status) {
  pid_ = 0;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

bool walhook_process::running() {
  if (!pid_) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped(status);
    return false;
  }
  return true;
}

void walhook_process::signal(int sig) {
  if (!pid_) return;
  ::kill(pid_, sig);
  if (sig == SIGTERM) sigterm_sent_ = true;
}

int walhook_process::wait(std::chrono::milliseconds timeout) {
  if (!pid_) return -1;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped(status);
      return exit_code_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    ::usleep(10 * 1000);
  }
}

int walhook_process::stop(std::chrono::milliseconds timeout) {
  const pid_t pid = pid_;
  if (!sigterm_sent_) signal(SIGTERM);
  const int code = wait(timeout);
  if (code != 0) {
    const auto result = pid == 0      ? fmt::format("it was not running (exit code {})", exit_code_)
                        : code == -1 ? fmt::format("still running after {} ms", timeout.count())
                                     : fmt::format("exit code {}", code);
    MESSAGE(fmt::format("{} (pid {}) after SIGTERM: {}; the end of its log:\n{}", name_, pid, result,
                        log_tail(16 * 1024)));
  }
  return code;
}

void walhook_process::kill9() {
  if (!pid_) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  reaped(status);
}

std::string walhook_process::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string walhook_process::log_tail(std::size_t bytes) const {
  auto text = log();
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

std::size_t walhook_process::count_in_log(const std::string& needle) const {
  std::istringstream in(log());
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line))
    if (line.find(needle) != std::string::npos) ++n;
  return n;
}

long walhook_process::peak_rss_kib() const {
  if (!pid_) return 0;
  std::ifstream status(fmt::format("/proc/{}/status", pid_));
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

receiver_thread::receiver_thread() : receiver_(std::make_unique<relay::receiver>(ioc_.get_executor())) {
  thread_ = std::thread([this] {
    auto guard = boost::asio::make_work_guard(ioc_);
    ioc_.run();
  });
}

receiver_thread::~receiver_thread() {
  receiver_->stop();
  ioc_.stop();
  thread_.join();
  receiver_.reset();
}

void never_answer(receiver_thread& rcv, const std::string& path) {
  relay::receiver_behaviour never;
  never.never_answer = true;
  rcv->set_behaviour(path, never);
}

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout, std::chrono::milliseconds every) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    ::usleep(static_cast<useconds_t>(every.count() * 1000));
  }
}

std::string query_value(relay::blocking_db& db, const std::string& sql, const pg::params& params) {
  auto r = db.exec(sql, params);
  if (r.rows() == 0 || r.columns() == 0) return "";
  return std::string(r.value(0, 0));
}

long long add_endpoint(relay::blocking_db& db, const std::string& tenant, const std::string& url,
                       const std::string& secret, const std::vector<std::string>& event_types, int max_concurrency,
                       const std::string& ordering) {
  std::optional<std::string> types;
  if (!event_types.empty()) {
    std::string t = "{";
    for (std::size_t i = 0; i < event_types.size(); ++i) t += (i ? "," : "") + event_types[i];
    types = t + "}";
  }
  pg::params p{tenant, url, secret, types, std::to_string(max_concurrency), ordering};
  return std::stoll(query_value(db,
                                "INSERT INTO walhook.endpoints (tenant_id, url, secret, event_types, max_concurrency, ordering) "
                                "VALUES ($1, $2, $3, $4::text[], $5::int, $6) RETURNING id",
                                p));
}

std::vector<std::string> run_args(const std::string& url, const std::string& slot, std::vector<std::string> extra) {
  std::vector<std::string> args{"run", "--database-url", url, "--slot", slot, "--allow-private-networks"};
  // Test defaults, unless the test sets them itself.
  for (auto [flag, value] : {std::pair{"--backoff-base-ms", "200"}, std::pair{"--status-interval-ms", "1000"}})
    if (std::find(extra.begin(), extra.end(), flag) == extra.end()) {
      args.push_back(flag);
      args.push_back(value);
    }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace walhook::test

#include <algorithm>
#include <atomic>
#include <cmath>

namespace walhook::test {

struct publisher::impl {
  options opt;
  std::thread thread;
  std::atomic<bool> stop{false};
  std::atomic<bool> done{false};
  std::atomic<long> committed{0};
  std::atomic<long> failures{0};
  mutable std::mutex mutex;
  std::vector<published_event> events;

  void run() {
    std::unique_ptr<relay::blocking_db> db;
    auto start = std::chrono::steady_clock::now();
    long n = 0;
    const double interval_us = 1e6 / opt.rate_per_second;
    while (n < opt.total && !stop) {
      // Open loop: the k-th transaction is due at start + k·interval, whatever happened before.
      auto due = start + std::chrono::microseconds(static_cast<long long>(interval_us * static_cast<double>(n)));
      auto now = std::chrono::steady_clock::now();
      if (due > now) ::usleep(static_cast<useconds_t>(std::chrono::duration_cast<std::chrono::microseconds>(due - now).count()));
      try {
        if (!db) db = std::make_unique<relay::blocking_db>(opt.url, "walhook-test-publisher");
        int batch = static_cast<int>(std::min<long>(opt.events_per_transaction, opt.total - n));
        std::vector<published_event> mine;
        db->exec("BEGIN");
        for (int i = 0; i < batch; ++i) {
          long k = n + i;
          published_event e;
          e.tenant = opt.tenants[static_cast<std::size_t>(k) % opt.tenants.size()];
          e.type = opt.types[static_cast<std::size_t>(k / static_cast<long>(opt.tenants.size())) % opt.types.size()];
          pg::params p{e.tenant, e.type, fmt::format(R"({{"n": {}}})", k)};
          auto r = db->exec("SELECT walhook.publish($1, $2, $3::jsonb)", p);
          e.id = std::string(r.value(0, 0));
          mine.push_back(std::move(e));
        }
        db->exec("COMMIT");
        auto at = std::chrono::system_clock::now();
        std::string lsn(db->exec("SELECT pg_current_wal_lsn()").value(0, 0));
        for (auto& e : mine) {
          e.committed_at = at;
          e.lsn_after_commit = lsn;
        }
        {
          std::lock_guard lock(mutex);
          for (auto& e : mine) events.push_back(std::move(e));
        }
        n += batch;
        committed += batch;
      } catch (const std::exception&) {
        // Server restarting or connection lost: the transaction did not commit (or its outcome
        // is unknown; the outbox table is the truth at the end). Reconnect and carry on.
        ++failures;
        db.reset();
        ::usleep(50 * 1000);
      }
    }
    done = true;
  }
};

publisher::publisher(options o) : impl_(std::make_unique<impl>()) { impl_->opt = std::move(o); }
publisher::~publisher() { stop(); }
void publisher::start() {
  impl_->thread = std::thread([this] { impl_->run(); });
}
bool publisher::join(std::chrono::milliseconds timeout) {
  bool ok = eventually([&] { return impl_->done.load(); }, timeout, std::chrono::milliseconds{20});
  if (ok && impl_->thread.joinable()) impl_->thread.join();
  return ok;
}
void publisher::stop() {
  impl_->stop = true;
  if (impl_->thread.joinable()) impl_->thread.join();
}
std::vector<published_event> publisher::events() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->events;
}
long publisher::committed() const { return impl_->committed; }
long publisher::failures() const { return impl_->failures; }

latency_summary summarize(std::vector<double> ms) {
  latency_summary s;
  s.n = ms.size();
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<std::size_t>(q * static_cast<double>(ms.size())))]; };
  s.p50 = at(0.5);
  s.p90 = at(0.9);
  s.p99 = at(0.99);
  s.max = ms.back();
  return s;
}

}  // namespace walhook::test

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

namespace walhook::test {

std::pair<unsigned, std::string> http_get(unsigned short port, const std::string& path) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(std::chrono::seconds(5));
  boost::system::error_code ec;
  stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port), ec);
  if (ec) return {0, ec.message()};
  http::request<http::empty_body> req{http::verb::get, path, 11};
  req.set(http::field::host, "127.0.0.1");
  http::write(stream, req, ec);
  if (ec) return {0, ec.message()};
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res, ec);
  if (ec) return {0, ec.message()};
  return {res.result_int(), res.body()};
}

}  // namespace walhook::test

namespace walhook::test {

scenario::scenario(const std::string& slot_name) : slot(slot_name), url(fresh_database(slot_name)), db(url) {}

std::string scenario::value(const std::string& sql, const pg::params& p) { return query_value(db, sql, p); }

std::string scenario::publish(const std::string& tenant, const std::string& type, const std::string& data,
                              const std::optional<std::string>& merge_key, const std::optional<std::string>& aggregate) {
  pg::params p{tenant, type, data, merge_key, aggregate};
  return value("SELECT walhook.publish($1, $2, $3::jsonb, merge_key => $4, aggregate_id => $5)", p);
}

bool scenario::streaming() {
  pg::params p{slot};
  return value("SELECT active FROM pg_replication_slots WHERE slot_name = $1", p) == "t";
}

bool scenario::acknowledged(const std::string& lsn) {
  pg::params p{slot, lsn};
  return value("SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1", p) == "t";
}

walhook_process scenario::start_walhook(std::vector<std::string> extra, std::string name) {
  walhook_process w(run_args(url, slot, std::move(extra)), std::move(name));
  w.start();
  return w;
}

std::vector<relay::received_request> scenario::received(const std::string& path, unsigned status) {
  std::vector<relay::received_request> out;
  for (auto& r : rcv->requests())
    if (r.path == path && (status == 0 || r.status == status)) out.push_back(r);
  return out;
}

}  // namespace walhook::test
