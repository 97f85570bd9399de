#include "tests/support/rabbitmq_server.hpp"

#include "delivery/signing.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <thread>

namespace walhook::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* server_bin = "/usr/lib/rabbitmq/bin/rabbitmq-server";
constexpr const char* ctl_bin = "/usr/lib/rabbitmq/bin/rabbitmqctl";

/// A port the kernel picked for 127.0.0.1 (bound, then released).
unsigned short free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("rabbitmq_server: no free port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

/// True if 127.0.0.1:port accepts TCP and, with `amqp`, answers the AMQP 0-9-1 protocol header
/// with a frame (connection.start).
bool answers(unsigned short port, bool amqp) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
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

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// Runs a shell command line; returns its exit code and its stdout+stderr.
int run(const std::string& command, std::string& output) {
  output.clear();
  FILE* p = ::popen(("(" + command + ") 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) output.append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// The user the broker runs as: `rabbitmq` when we are root (Erlang refuses nothing, but the
/// issue asks for a non-root broker), else ourselves.
const passwd* broker_user() { return ::geteuid() == 0 ? ::getpwnam("rabbitmq") : nullptr; }

/// fork + exec `argv` with `env` in a process group of its own, as the broker's user, output to `log`.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& dir,
            const std::string& log) {
  const passwd* pw = broker_user();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setpgid(0, 0);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  ::close(::open("/dev/null", O_RDONLY));
  if (pw && (::setgroups(0, nullptr) != 0 || ::setgid(pw->pw_gid) != 0 || ::setuid(pw->pw_uid) != 0)) ::_exit(126);
  if (::chdir(dir.c_str()) != 0) ::_exit(126);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  args.push_back(nullptr);
  envp.push_back(nullptr);
  ::execve(args[0], args.data(), envp.data());
  ::_exit(127);
}

}  // namespace

std::string amqp_received::header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return "";
}

rabbitmq_server::rabbitmq_server() {
  char tmpl[] = "/tmp/walhook-rabbitmq-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("rabbitmq_server: mkdtemp failed");
  dir_ = tmpl;
  node_ = fmt::format("walhook-test-{}@localhost", ::getpid());
  port_ = free_port();
  dist_port_ = free_port();
  epmd_port_ = free_port();
  tls_port_ = free_port();
  make_certificates();
  std::ofstream(dir_ + "/rabbitmq.conf") << fmt::format(
      "listeners.tcp.1 = 127.0.0.1:{}\n"
      "listeners.ssl.1 = 127.0.0.1:{}\n"
      "ssl_options.cacertfile = {}/ca.pem\n"
      "ssl_options.certfile = {}/server.pem\n"
      "ssl_options.keyfile = {}/server.key\n"
      "ssl_options.verify = verify_none\n"
      "ssl_options.fail_if_no_peer_cert = false\n"
      "loopback_users = none\n"
      "disk_free_limit.absolute = 1MB\n"
      "vm_memory_high_watermark.relative = 0.8\n"
      "log.console = false\n",
      port_, tls_port_, dir_, dir_, dir_);
  std::ofstream(dir_ + "/rabbitmq-env.conf");       // not /etc/rabbitmq's
  std::ofstream(dir_ + "/enabled_plugins") << "[].\n";  // no management plugin: faster start
  if (const passwd* pw = broker_user()) {
    for (const auto& e : fs::recursive_directory_iterator(dir_)) (void)::chown(e.path().c_str(), pw->pw_uid, pw->pw_gid);
    (void)::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid);
  }
  epmd_pid_ = spawn({"/usr/bin/epmd", "-port", std::to_string(epmd_port_)}, env(), dir_, dir_ + "/epmd.log");
  for (int i = 0; i < 100 && !answers(epmd_port_, false); ++i) std::this_thread::sleep_for(50ms);
  start();
}

void rabbitmq_server::make_certificates() {
  // A CA made now, and a server certificate it signs for DNS:localhost only (so connecting by
  // 127.0.0.1 is a host mismatch). EC keys: quick to make.
  const std::string d = quote(dir_);
  const std::string cmd = fmt::format(
      "cd {0} && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key "
      "-out ca.pem -days 2 -subj /CN=walhook-test-ca && "
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr "
      "-subj /CN=localhost && printf 'subjectAltName=DNS:localhost\\n' > san.ext && "
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 "
      "-extfile san.ext && chmod 644 server.key",
      d);
  std::string out;
  if (run(cmd, out) != 0) throw std::runtime_error("rabbitmq_server: openssl failed: " + out);
  std::ifstream in(dir_ + "/ca.pem");
  ca_pem_.assign(std::istreambuf_iterator<char>(in), {});
}

rabbitmq_server::~rabbitmq_server() {
  kill9();
  if (epmd_pid_ > 0) {
    ::kill(epmd_pid_, SIGKILL);
    ::waitpid(epmd_pid_, nullptr, 0);
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::vector<std::string> rabbitmq_server::env() const {
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

void rabbitmq_server::start() {
  if (pid_ > 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  pid_ = spawn({server_bin}, env(), dir_, dir_ + "/server.log");
  while (!answers(port_, true)) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      throw std::runtime_error("rabbitmq-server exited while starting; see " + dir_ + "/server.log");
    }
    if (std::chrono::steady_clock::now() - t0 > 120s) throw std::runtime_error("rabbitmq-server did not start in 120 s");
    std::this_thread::sleep_for(100ms);
  }
  startup_time_ = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
}

void rabbitmq_server::kill9() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = 0;
  // The beam process may outlive the group leader's reaping by a moment; wait until the port is free.
  for (int i = 0; i < 100 && answers(port_, false); ++i) std::this_thread::sleep_for(50ms);
}

std::string rabbitmq_server::url(const std::string& exchange, const std::string& routing_key) const {
  return fmt::format("amqp://guest:guest@127.0.0.1:{}/%2F?exchange={}&routing_key={}", port_, exchange, routing_key);
}

std::string rabbitmq_server::as_broker_user(const std::string& command) const {
  std::string line = broker_user() ? "runuser -u rabbitmq -- env -i" : "env -i";
  for (const auto& e : env()) line += " " + quote(e);
  return "cd " + quote(dir_) + " && " + line + " " + command;
}

int rabbitmq_server::ctl(const std::vector<std::string>& args, std::string& output) const {
  std::string command = std::string(ctl_bin) + " -n " + quote(node_);
  for (const auto& a : args) command += " " + quote(a);
  return run(as_broker_user(command), output);
}

void rabbitmq_server::memory_alarm(bool on) const {
  std::string out;
  if (ctl({"set_vm_memory_high_watermark", on ? "0.0000001" : "0.8"}, out) != 0)
    throw std::runtime_error("rabbitmqctl set_vm_memory_high_watermark failed: " + out);
}

namespace {
std::string tool() { return std::string("/usr/bin/python3 ") + WALHOOK_SOURCE_DIR + "/tests/support/amqp_tool.py"; }
}  // namespace

void rabbitmq_server::declare(const std::string& exchange, const std::string& queue, const std::string& key,
                              const std::string& type, int max_length) const {
  std::string out;
  const auto cmd = fmt::format("{} declare --port {} --exchange {} --type {} --queue {} --key {} --max-length {}",
                               tool(), port_, quote(exchange), quote(type), quote(queue), quote(key), max_length);
  if (run(cmd, out) != 0) throw std::runtime_error("amqp_tool.py declare failed: " + out);
}

void rabbitmq_server::remove(const std::string& exchange, const std::string& queue) const {
  std::string out;
  const auto cmd =
      fmt::format("{} delete --port {} --exchange {} --queue {}", tool(), port_, quote(exchange), quote(queue));
  if (run(cmd, out) != 0) throw std::runtime_error("amqp_tool.py delete failed: " + out);
}

std::vector<amqp_received> rabbitmq_server::drain(const std::string& queue, std::size_t max,
                                                  std::chrono::milliseconds idle) const {
  std::string out;
  const auto cmd = fmt::format("{} drain --port {} --queue {} --max {} --idle {} 2>/dev/null", tool(), port_,
                               quote(queue), max, idle.count() / 1000.0);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run amqp_tool.py");
  char buf[65536];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  if (::pclose(p) != 0) throw std::runtime_error("amqp_tool.py drain failed: " + out);
  std::vector<amqp_received> got;
  simdjson::dom::parser parser;
  std::size_t at = 0;
  while (at < out.size()) {
    auto nl = out.find('\n', at);
    if (nl == std::string::npos) nl = out.size();
    const std::string line = out.substr(at, nl - at);
    at = nl + 1;
    if (line.empty()) continue;
    simdjson::dom::element e = parser.parse(line);
    amqp_received m;
    auto str = [&](const char* k) {
      auto v = e[k];
      return v.is_string() ? std::string(std::string_view(v)) : std::string();
    };
    m.message_id = str("message_id");
    m.routing_key = str("routing_key");
    m.exchange = str("exchange");
    m.content_type = str("content_type");
    if (e["delivery_mode"].is_int64()) m.delivery_mode = static_cast<int>(int64_t(e["delivery_mode"]));
    if (e["timestamp"].is_int64()) m.timestamp = int64_t(e["timestamp"]);
    m.redelivered = bool(e["redelivered"]);
    for (auto [k, v] : simdjson::dom::object(e["headers"]))
      m.headers.emplace_back(std::string(k), std::string(std::string_view(v)));
    auto body = delivery::base64_decode(str("body_b64"));
    if (!body) throw std::runtime_error("amqp_tool.py drain: bad base64 in " + line);
    m.body = std::move(*body);
    got.push_back(std::move(m));
  }
  return got;
}

rabbitmq_server& rabbitmq() {
  static rabbitmq_server server;
  return server;
}

}  // namespace walhook::test
