#include "bench/amqp_receiver.hpp"

#include "bench/proc_stats.hpp"
#include "relay/demo/embedded_postgres.hpp"

#include <fmt/format.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace walhook::bench {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* server_bin = "/usr/lib/rabbitmq/bin/rabbitmq-server";
constexpr const char* exchange_name = "bench";
constexpr amqp_channel_t channel = 1;

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// "/ep/12" → "ep12": the routing-key token and queue name part of an endpoint path.
std::string token_of(const std::string& path) {
  std::string t;
  for (char c : path)
    if (std::isalnum(static_cast<unsigned char>(c))) t += c;
  if (t.empty()) throw std::invalid_argument("endpoint path without a name: " + path);
  return t;
}

/// True if 127.0.0.1:port accepts TCP and, with `amqp`, answers the AMQP 0-9-1 protocol header
/// with a method frame (connection.start).
bool answers(int port, bool amqp) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (ok && amqp) {
    const char header[] = {'A', 'M', 'Q', 'P', 0, 0, 9, 1};
    char reply = 0;
    ok = ::write(fd, header, sizeof header) == sizeof header && ::read(fd, &reply, 1) == 1 && reply == 1;
  }
  ::close(fd);
  return ok;
}

/// The broker runs as `rabbitmq` when the bench is root; otherwise as ourselves.
const passwd* broker_user() { return ::geteuid() == 0 ? ::getpwnam("rabbitmq") : nullptr; }

/// fork + exec in a process group of its own, as the broker's user, output appended to `log`.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& dir,
            const std::string& log) {
  const passwd* pw = broker_user();
  const uid_t uid = pw ? pw->pw_uid : 0;
  const gid_t gid = pw ? pw->pw_gid : 0;
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  args.push_back(nullptr);
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid != 0) return pid;
  ::setpgid(0, 0);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  if (pw && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) ::_exit(126);
  if (::chdir(dir.c_str()) != 0) ::_exit(126);
  ::execve(args[0], args.data(), envp.data());
  ::_exit(127);
}

void kill_group(pid_t& pid) {
  if (pid <= 0) return;
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  pid = 0;
}

std::string bytes_text(amqp_bytes_t b) { return std::string(static_cast<const char*>(b.bytes), b.len); }

/// A readable error of an RPC reply, "" if it is a normal one.
std::string reply_error(const amqp_rpc_reply_t& r) {
  switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL: return "";
    case AMQP_RESPONSE_NONE: return "no reply";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION: return amqp_error_string2(r.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        const auto* m = static_cast<amqp_channel_close_t*>(r.reply.decoded);
        return fmt::format("channel closed: {} {}", m->reply_code, bytes_text(m->reply_text));
      }
      if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        const auto* m = static_cast<amqp_connection_close_t*>(r.reply.decoded);
        return fmt::format("connection closed: {} {}", m->reply_code, bytes_text(m->reply_text));
      }
      return fmt::format("server method {:#x}", r.reply.id);
  }
  return "unknown reply";
}

}  // namespace

// ------------------------------------------------------------------ the server

rabbitmq_process::rabbitmq_process() {
  char tmpl[] = "/tmp/walhook-bench-rabbitmq-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  if (::access(server_bin, X_OK) != 0)
    throw std::runtime_error("rabbitmq-server is not installed (scripts/bootstrap installs it)");
  node_ = fmt::format("walhook-bench-{}@localhost", ::getpid());
  port_ = relay::free_tcp_port();
  dist_port_ = relay::free_tcp_port();
  epmd_port_ = relay::free_tcp_port();
  std::ofstream(dir_ + "/rabbitmq.conf") << fmt::format(
      "listeners.tcp.1 = 127.0.0.1:{}\n"
      "loopback_users = none\n"
      "disk_free_limit.absolute = 1MB\n"
      "log.console = false\n",
      port_);
  std::ofstream(dir_ + "/rabbitmq-env.conf");           // not /etc/rabbitmq's
  std::ofstream(dir_ + "/enabled_plugins") << "[].\n";  // no management plugin: faster start
  if (const passwd* pw = broker_user()) {
    for (const auto& e : fs::recursive_directory_iterator(dir_)) (void)::chown(e.path().c_str(), pw->pw_uid, pw->pw_gid);
    (void)::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid);
  }
  const auto t0 = std::chrono::steady_clock::now();
  epmd_pid_ = spawn({"/usr/bin/epmd", "-port", std::to_string(epmd_port_)}, env(), dir_, dir_ + "/epmd.log");
  for (int i = 0; i < 100 && !answers(epmd_port_, false); ++i) std::this_thread::sleep_for(50ms);
  pid_ = spawn({server_bin}, env(), dir_, log_path());
  while (!answers(port_, true)) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      kill_group(epmd_pid_);
      throw std::runtime_error("rabbitmq-server exited while starting; see " + log_path());
    }
    if (std::chrono::steady_clock::now() - t0 > 120s) {
      kill_group(pid_);
      kill_group(epmd_pid_);
      throw std::runtime_error("rabbitmq-server did not answer within 120 s; see " + log_path());
    }
    std::this_thread::sleep_for(100ms);
  }
  startup_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
}

rabbitmq_process::~rabbitmq_process() {
  kill_group(pid_);
  kill_group(epmd_pid_);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::vector<std::string> rabbitmq_process::env() const {
  return {"PATH=/usr/bin:/bin:/usr/sbin:/sbin",
          "HOME=" + dir_,  // the Erlang cookie lives here
          "LANG=C.UTF-8",
          "LC_ALL=C.UTF-8",
          "RABBITMQ_CONF_ENV_FILE=" + dir_ + "/rabbitmq-env.conf",
          "RABBITMQ_CONFIG_FILE=" + dir_ + "/rabbitmq.conf",
          "RABBITMQ_ADVANCED_CONFIG_FILE=" + dir_ + "/advanced.config",
          "RABBITMQ_ENABLED_PLUGINS_FILE=" + dir_ + "/enabled_plugins",
          "RABBITMQ_MNESIA_BASE=" + dir_ + "/mnesia",
          "RABBITMQ_LOG_BASE=" + dir_ + "/log",
          "RABBITMQ_PID_FILE=" + dir_ + "/rabbitmq.pid",
          "RABBITMQ_NODENAME=" + node_,
          "RABBITMQ_NODE_PORT=" + std::to_string(port_),
          "RABBITMQ_DIST_PORT=" + std::to_string(dist_port_),
          "ERL_EPMD_PORT=" + std::to_string(epmd_port_)};
}

// ------------------------------------------------------------------ the consumer

struct amqp_receiver::connection {
  amqp_connection_state_t state = nullptr;
  ~connection() {
    if (state != nullptr) amqp_destroy_connection(state);
  }
  void check(const std::string& what) const {
    if (auto e = reply_error(amqp_get_rpc_reply(state)); !e.empty()) throw std::runtime_error(what + ": " + e);
  }
};

amqp_receiver::amqp_receiver() : server_(std::make_unique<rabbitmq_process>()), conn_(std::make_unique<connection>()) {
  auto& c = *conn_;
  c.state = amqp_new_connection();
  amqp_socket_t* socket = amqp_tcp_socket_new(c.state);
  if (socket == nullptr) throw std::runtime_error("bench consumer: no socket");
  if (int s = amqp_socket_open(socket, "127.0.0.1", server_->port()); s != AMQP_STATUS_OK)
    throw std::runtime_error(fmt::format("bench consumer: connect to rabbitmq-server: {}", amqp_error_string2(s)));
  if (auto e = reply_error(amqp_login(c.state, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest")); !e.empty())
    throw std::runtime_error("bench consumer: login: " + e);
  amqp_channel_open(c.state, channel);
  c.check("bench consumer: channel.open");
  amqp_exchange_declare(c.state, channel, amqp_cstring_bytes(exchange_name), amqp_cstring_bytes("topic"), 0, 1, 0, 0,
                        amqp_empty_table);
  c.check("bench consumer: exchange.declare bench");
  thread_ = std::thread([this] { run(); });
  thread_handle_ = thread_.native_handle();
}

amqp_receiver::~amqp_receiver() { stop(); }

void amqp_receiver::configure(const endpoint_spec& spec) {
  if (by_path_.contains(spec.path)) return;
  auto r = std::make_unique<route>();
  r->path = spec.path;
  r->token = token_of(spec.path);
  r->queue = "bench." + r->token;
  request q;
  q.r = r.get();
  {
    std::unique_lock lock(requests_mutex_);
    if (stopping_) throw std::logic_error("amqp_receiver::configure after stop");
    requests_.push_back(&q);
    requests_cv_.wait(lock, [&] { return q.done; });
  }
  if (!q.error.empty()) throw std::runtime_error(fmt::format("queue {}: {}", r->queue, q.error));
  by_path_[r->path] = r.get();
  routes_.push_back(std::move(r));
}

void amqp_receiver::run() {
  auto* c = conn_->state;
  auto serve_requests = [&] {
    std::lock_guard lock(requests_mutex_);
    while (!requests_.empty()) {
      request* q = requests_.front();
      requests_.pop_front();
      route& r = *q->r;
      const amqp_bytes_t queue = amqp_cstring_bytes(r.queue.c_str());
      const std::string key = r.token + ".#";
      amqp_queue_declare(c, channel, queue, 0, 1, 0, 0, amqp_empty_table);
      q->error = reply_error(amqp_get_rpc_reply(c));
      if (q->error.empty()) {
        amqp_queue_bind(c, channel, queue, amqp_cstring_bytes(exchange_name), amqp_cstring_bytes(key.c_str()),
                        amqp_empty_table);
        q->error = reply_error(amqp_get_rpc_reply(c));
      }
      if (q->error.empty()) {
        // no-ack: the broker pushes without a prefetch window and forgets the message.
        amqp_basic_consume(c, channel, queue, amqp_cstring_bytes(r.token.c_str()), 0, 1, 0, amqp_empty_table);
        q->error = reply_error(amqp_get_rpc_reply(c));
      }
      if (q->error.empty()) by_tag_[r.token] = &r;
      q->done = true;
    }
    requests_cv_.notify_all();
  };
  auto fail = [&](std::string e) {
    std::lock_guard lock(mutex_);
    if (consumer_error_.empty()) consumer_error_ = std::move(e);
  };
  while (!stopping_.load(std::memory_order_relaxed)) {
    serve_requests();
    amqp_maybe_release_buffers(c);
    amqp_envelope_t env;
    timeval timeout{0, 50'000};
    const amqp_rpc_reply_t res = amqp_consume_message(c, &env, &timeout, 0);
    const std::int64_t at = now_us();
    if (res.reply_type == AMQP_RESPONSE_NORMAL) {
      std::string id;
      if ((env.message.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG) != 0) id = bytes_text(env.message.properties.message_id);
      auto it = by_tag_.find(bytes_text(env.consumer_tag));
      if (it != by_tag_.end()) record(*it->second, at, std::move(id), env.redelivered != 0);
      amqp_destroy_envelope(&env);
      continue;
    }
    if (res.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && res.library_error == AMQP_STATUS_TIMEOUT) continue;
    if (res.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && res.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
      // Not a basic.deliver: read the frame; a close ends the consumer.
      amqp_frame_t frame;
      if (amqp_simple_wait_frame(c, &frame) != AMQP_STATUS_OK) {
        fail("consumer: reading a frame failed");
        break;
      }
      if (frame.frame_type == AMQP_FRAME_METHOD &&
          (frame.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD || frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)) {
        fail(fmt::format("consumer: broker closed the {}", frame.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ? "channel" : "connection"));
        break;
      }
      continue;
    }
    fail("consumer: " + reply_error(res));
    break;
  }
  // Pending configure() calls must not wait for ever.
  std::lock_guard lock(requests_mutex_);
  for (auto* q : requests_) {
    q->error = "the consumer has stopped";
    q->done = true;
  }
  requests_.clear();
  requests_cv_.notify_all();
}

void amqp_receiver::record(route& r, std::int64_t received_at_us, std::string msg_id, bool redelivered) {
  seen_.fetch_add(1, std::memory_order_relaxed);
  if (redelivered) redelivered_.fetch_add(1, std::memory_order_relaxed);
  relay::received_request q;
  q.path = r.path;
  q.received_at_us = received_at_us;
  q.status = 200;
  std::string key = msg_id + " " + r.path;
  q.webhook_id = std::move(msg_id);
  std::lock_guard lock(mutex_);
  if (answered_.insert(std::move(key)).second) {
    ok_.fetch_add(1, std::memory_order_relaxed);
    r.ok.fetch_add(1, std::memory_order_relaxed);
  } else {
    duplicates_.fetch_add(1, std::memory_order_relaxed);
  }
  received_.push_back(std::move(q));
}

void amqp_receiver::set_status(const std::string&, unsigned) {
  throw std::logic_error("an AMQP destination has no status to answer");
}

std::string amqp_receiver::url(const std::string& path) const {
  return fmt::format("amqp://guest:guest@127.0.0.1:{}/%2F?exchange={}&routing_key={}.{{event_type}}", server_->port(),
                     exchange_name, token_of(path));
}

std::int64_t amqp_receiver::answered_ok(const std::string& path) const {
  auto it = by_path_.find(path);
  return it == by_path_.end() ? 0 : it->second->ok.load(std::memory_order_relaxed);
}

std::vector<relay::received_request> amqp_receiver::requests() const {
  std::lock_guard lock(mutex_);
  return received_;
}

double amqp_receiver::cpu_seconds() const {
  if (stopped_) return std::max(final_cpu_, 0.0);
  return thread_cpu_seconds(thread_handle_);
}

double amqp_receiver::broker_cpu_seconds() const {
  if (stopped_) return final_broker_cpu_;
  return tree_cpu_seconds(server_->pid());
}

std::string amqp_receiver::notes() const {
  if (stopped_) return final_notes_;
  std::lock_guard lock(mutex_);
  return fmt::format("amqp: {} messages received by the consumer from {} queues ({} distinct, {} redelivered); "
                     "rabbitmq-server started in {:.1f} s{}",
                     seen_.load(), routes_.size(), ok_.load(), redelivered_.load(), server_->startup_ms() / 1000.0,
                     consumer_error_.empty() ? "" : "; " + consumer_error_);
}

void amqp_receiver::stop() {
  if (stopped_) return;
  final_cpu_ = cpu_seconds();
  final_broker_cpu_ = broker_cpu_seconds();
  final_notes_ = notes();
  stopped_ = true;
  {
    std::lock_guard lock(requests_mutex_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  conn_.reset();  // no graceful close: deliveries may still be arriving, and the broker goes next
  server_.reset();
}

}  // namespace walhook::bench
