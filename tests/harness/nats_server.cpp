#include "tests/harness/nats_server.hpp"

#include "relay/demo/embedded_postgres.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace walhook::test {
namespace {

bool accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

/// Debian installs it in /usr/sbin, which is not on every user's PATH.
std::string server_binary() {
  for (const char* p : {"/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"})
    if (::access(p, X_OK) == 0) return p;
  throw std::runtime_error("nats-server is not installed (scripts/bootstrap installs it)");
}

std::string reader() { return std::string(WALHOOK_SOURCE_DIR) + "/tests/support/nats_read_stream.py"; }

}  // namespace

nats_server::nats_server() : nats_server("", "") {}

nats_server::nats_server(std::string tls_cert_file, std::string tls_key_file)
    : tls_cert_(std::move(tls_cert_file)), tls_key_(std::move(tls_key_file)) {
  char tmpl[] = "/tmp/walhook-nats-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  port_ = relay::free_tcp_port();
  start();
}

nats_server::~nats_server() {
  kill9();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string nats_server::url() const { return fmt::format("nats://127.0.0.1:{}", port_); }

void nats_server::start() {
  std::vector<std::string> argv{server_binary(), "-js", "-a", "127.0.0.1", "-p", std::to_string(port_), "-sd",
                                dir_ + "/store"};
  if (!tls_cert_.empty()) argv.insert(argv.end(), {"--tls", "--tlscert", tls_cert_, "--tlskey", tls_key_});
  pid_ = relay::spawn_process(argv, dir_ + "/nats.log");
  for (int i = 0; i < 200; ++i) {
    // JetStream answers once the server has recovered its store.
    if (accepts(port_) && api("$JS.API.INFO", "").find("\"memory\"") != std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  throw std::runtime_error("nats-server did not start; see " + dir_ + "/nats.log");
}

void nats_server::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = 0;
}

void nats_server::restart() {
  kill9();
  start();
}

std::string nats_server::api(const std::string& subject, const std::string& body) const {
  std::string out;
  const int rc = relay::run_process({"env", "NATS_CA_FILE=" + tls_cert_, "python3", reader(), std::to_string(port_),
                                     "api", subject, body},
                                    "", out);
  if (rc != 0) return "";
  return out;
}

void nats_server::create_stream(const std::string& name, const std::vector<std::string>& subjects, long max_msgs,
                                std::chrono::seconds duplicate_window) {
  std::string subj;
  for (const auto& s : subjects) subj += (subj.empty() ? "\"" : ",\"") + s + "\"";
  const auto config = fmt::format(
      R"({{"name":"{}","subjects":[{}],"storage":"file","retention":"limits","max_msgs":{},"discard":"{}",)"
      R"("duplicate_window":{},"num_replicas":1}})",
      name, subj, max_msgs, max_msgs >= 0 ? "new" : "old", duplicate_window.count() * 1'000'000'000LL);
  const auto answer = api("$JS.API.STREAM.CREATE." + name, config);
  if (answer.find("\"config\"") == std::string::npos) throw std::runtime_error("stream create failed: " + answer);
}

void nats_server::delete_stream(const std::string& name) { api("$JS.API.STREAM.DELETE." + name, ""); }

std::vector<nats_server::stored_message> nats_server::read_stream(const std::string& name) const {
  std::string out;
  const int rc = relay::run_process(
      {"env", "NATS_CA_FILE=" + tls_cert_, "python3", reader(), std::to_string(port_), "read", name}, "", out);
  if (rc != 0) throw std::runtime_error("nats_read_stream.py failed: " + out);
  std::vector<stored_message> messages;
  std::istringstream lines(out);
  std::string line;
  simdjson::dom::parser parser;
  while (std::getline(lines, line)) {
    if (line.empty() || line.front() != '{') continue;
    auto doc = parser.parse(line);
    stored_message m;
    m.seq = doc["seq"].get_int64().value();
    m.subject = std::string(doc["subject"].get_string().value());
    m.data = std::string(doc["data"].get_string().value());
    for (auto h : doc["headers"].get_array()) {
      auto name_ = std::string(h.at(0).get_string().value());
      auto value = std::string(h.at(1).get_string().value());
      if (name_ == "Nats-Msg-Id") m.msg_id = value;
      m.headers.emplace_back(std::move(name_), std::move(value));
    }
    messages.push_back(std::move(m));
  }
  return messages;
}

}  // namespace walhook::test
