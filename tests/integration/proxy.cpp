// The egress proxy (walhook run --proxy; delivery/proxy.hpp) against a real HTTP proxy, Debian's
// tinyproxy on loopback: http and https endpoints reached through a CONNECT tunnel to the address
// walhook resolved and checked (the proxy's log names the address, not the host; TLS still
// verifies the host), a proxy that refuses (407) or is down is a clear error, the SSRF guard
// refuses before the proxy is asked, --no-proxy goes direct — and `walhook run --proxy` delivers
// an event through it end to end.

#include "delivery/http_client.hpp"
#include "relay/demo/embedded_postgres.hpp"
#include "tests/harness/harness.hpp"
#include "tests/support/scripted_http_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address_v4.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace walhook;
using namespace walhook::delivery;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using walhook::test::scripted_http_server;

namespace {

bool accepts(unsigned short port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

/// tinyproxy in the foreground on a free loopback port, in its own temporary directory; with
/// `basic_auth` ("user pass") it answers 407 to a client without those credentials.
class tinyproxy {
 public:
  explicit tinyproxy(const std::string& basic_auth = "") {
    char tmpl[] = "/tmp/walhook-tinyproxy-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    port_ = relay::free_tcp_port();
    std::ofstream(dir_ + "/tinyproxy.conf") << fmt::format(
        "Port {}\nListen 127.0.0.1\nTimeout 30\nMaxClients 20\nAllow 127.0.0.1\nLogLevel Info\n"
        "LogFile \"{}/tinyproxy.log\"\nPidFile \"{}/tinyproxy.pid\"\n{}",
        port_, dir_, dir_, basic_auth.empty() ? "" : "BasicAuth " + basic_auth + "\n");
    const char* binary = ::access("/usr/bin/tinyproxy", X_OK) == 0 ? "/usr/bin/tinyproxy" : "/usr/sbin/tinyproxy";
    if (::access(binary, X_OK) != 0) throw std::runtime_error("tinyproxy is not installed (scripts/bootstrap installs it)");
    pid_ = relay::spawn_process({binary, "-d", "-c", dir_ + "/tinyproxy.conf"}, dir_ + "/stderr.log");
    for (int i = 0; i < 200 && !accepts(port_); ++i) std::this_thread::sleep_for(25ms);
    if (!accepts(port_)) throw std::runtime_error("tinyproxy did not start; see " + dir_);
  }
  ~tinyproxy() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  tinyproxy(const tinyproxy&) = delete;
  tinyproxy& operator=(const tinyproxy&) = delete;

  unsigned short port() const { return port_; }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }
  http_proxy proxy() const { return {"127.0.0.1", std::to_string(port_)}; }
  /// Its log so far (each request line it took: "CONNECT 127.0.0.1:PORT HTTP/1.1").
  std::string log() const {
    std::ifstream in(dir_ + "/tinyproxy.log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  std::string dir_;
  unsigned short port_ = 0;
  pid_t pid_ = 0;
};

http_request json_request() {
  http_request r;
  r.body = R"({"id":"evt_1"})";
  r.headers = {{"webhook-id", "evt_1"}};
  return r;
}

/// Runs one post on a fresh client with `options`; returns its result.
post_result post_once(http_client_options options, const http_target& target) {
  asio::io_context ioc;
  std::optional<post_result> out;
  {
    http_client client(ioc.get_executor(), std::move(options));
    asio::co_spawn(
        ioc, [&]() -> asio::awaitable<void> { out = co_await client.async_post("ep", target, json_request()); },
        [&](std::exception_ptr) { ioc.stop(); });
    ioc.run_for(30s);
  }
  REQUIRE(out.has_value());
  return *out;
}

std::string text_of(const post_result& r) { return r ? std::to_string(r->status) : r.error().text(); }

}  // namespace

TEST_CASE("proxy: http and https endpoints go through a CONNECT tunnel to the checked address; TLS still verifies the host") {
  tinyproxy proxy;
  asio::io_context server_ioc;
  scripted_http_server plain(server_ioc, asio::ip::address_v4::loopback());
  const auto identity = test::make_test_certificate("DNS:localhost");
  scripted_http_server secure(server_ioc, asio::ip::address_v4::loopback(), identity);
  std::thread serving([&] { server_ioc.run_for(60s); });

  http_client_options o;
  o.allow_private_networks = true;  // the endpoints live on loopback
  o.total_deadline = 10s;
  o.proxy = proxy.proxy();
  o.extra_ca_pem = identity.certificate_pem;

  auto http_target = parse_url(fmt::format("http://localhost:{}/hook", plain.port())).value();
  const auto r1 = post_once(o, http_target);
  CHECK_MESSAGE(r1.has_value(), text_of(r1));
  auto https_target = parse_url(fmt::format("https://localhost:{}/hook", secure.port())).value();
  const auto r2 = post_once(o, https_target);
  CHECK_MESSAGE(r2.has_value(), text_of(r2));
  server_ioc.stop();
  serving.join();

  REQUIRE(plain.requests().size() == 1);
  CHECK(plain.requests()[0].header("Host") == fmt::format("localhost:{}", plain.port()));  // the URL's, end to end
  CHECK(plain.requests()[0].target == "/hook");
  REQUIRE(secure.requests().size() == 1);
  CHECK(secure.requests()[0].tls_server_name == "localhost");
  // The proxy was asked for the address walhook resolved and checked, never for the name.
  const auto log = proxy.log();
  INFO(log);
  CHECK(log.find(fmt::format("CONNECT 127.0.0.1:{}", plain.port())) != std::string::npos);
  CHECK(log.find(fmt::format("CONNECT 127.0.0.1:{}", secure.port())) != std::string::npos);
  CHECK(log.find("localhost") == std::string::npos);
}

TEST_CASE("proxy: a refusing proxy (407), a proxy that is down, the SSRF guard and --no-proxy") {
  tinyproxy guarded("walhook secret");
  asio::io_context server_ioc;
  scripted_http_server plain(server_ioc, asio::ip::address_v4::loopback());
  std::thread serving([&] { server_ioc.run_for(60s); });
  http_client_options o;
  o.allow_private_networks = true;
  o.total_deadline = 10s;
  const auto target = parse_url(fmt::format("http://127.0.0.1:{}/hook", plain.port())).value();

  // 407 Proxy Authentication Required: the proxy's answer, not the endpoint's.
  o.proxy = guarded.proxy();
  const auto refused = post_once(o, target);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error() == transport_errc::proxy_failed);
  CHECK(refused.error().text().find("407") != std::string::npos);

  // A proxy that is down: connect_failed, naming the proxy.
  o.proxy = http_proxy{"127.0.0.1", std::to_string(relay::free_tcp_port())};
  const auto down = post_once(o, target);
  REQUIRE_FALSE(down.has_value());
  CHECK(down.error() == transport_errc::connect_failed);
  CHECK(down.error().text().find("proxy 127.0.0.1:" + o.proxy->port) != std::string::npos);

  // A proxy name that does not resolve is the proxy's failure, not the endpoint's DNS.
  o.proxy = http_proxy{"nosuchproxy.invalid", "3128"};
  const auto unnamed = post_once(o, target);
  REQUIRE_FALSE(unnamed.has_value());
  CHECK(unnamed.error().text().find("cannot resolve the proxy host nosuchproxy.invalid") != std::string::npos);

  // The SSRF guard decides before the proxy is asked: loopback is refused, the proxy never hears of it.
  tinyproxy open;
  o.proxy = open.proxy();
  o.allow_private_networks = false;
  const auto blocked = post_once(o, target);
  REQUIRE_FALSE(blocked.has_value());
  CHECK(blocked.error() == transport_errc::address_blocked);
  const std::string asked = fmt::format("CONNECT 127.0.0.1:{}", plain.port());  // a request line it took
  CHECK(open.log().find(asked) == std::string::npos);

  // --no-proxy: this host goes direct.
  o.allow_private_networks = true;
  o.no_proxy = {"example.com", "127.0.0.1"};
  const auto direct = post_once(o, target);
  CHECK_MESSAGE(direct.has_value(), text_of(direct));
  CHECK(open.log().find(asked) == std::string::npos);
  server_ioc.stop();
  serving.join();
  CHECK(plain.requests().size() == 1);  // only the direct one reached it
}

TEST_CASE("proxy: walhook run --proxy delivers through it") {
  tinyproxy proxy;
  test::scenario s("proxy_run");
  auto walhook = s.start_walhook({"--proxy", proxy.url()});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  std::string out;
  REQUIRE(test::run_walhook({"endpoint", "add", "--tenant", "acme", "--url", s.rcv->url("/via"), "--database-url", s.url},
                            out) == 0);
  s.publish("acme", "order.paid", R"({"n": 1})");
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/via").size() == 1; }, 20s), walhook.log_tail());
  CHECK(proxy.log().find("CONNECT 127.0.0.1:" + std::to_string(s.rcv->port())) != std::string::npos);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("proxy: an endpoint's own --proxy wins over walhook run --proxy: direct, or a proxy of its own") {
  tinyproxy own;
  const std::string dead = fmt::format("http://127.0.0.1:{}", relay::free_tcp_port());  // walhook run's: down
  test::scenario s("proxy_endpoint");
  auto walhook = s.start_walhook({"--proxy", dead});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  std::string out;
  auto add = [&](const std::string& path, std::vector<std::string> flags) {
    std::vector<std::string> args{"endpoint", "add", "--tenant", "acme", "--url", s.rcv->url(path), "--database-url", s.url};
    args.insert(args.end(), flags.begin(), flags.end());
    REQUIRE(test::run_walhook(args, out) == 0);
    return s.value("SELECT max(id) FROM walhook.endpoints");
  };
  add("/direct", {"--proxy", "direct"});
  add("/own", {"--proxy", own.url()});
  const auto usual = add("/usual", {});
  s.publish("acme", "order.paid", R"({"n": 1})");
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/direct").size() == 1 && s.received("/own").size() == 1; }, 20s),
                  walhook.log_tail());
  CHECK(own.log().find("CONNECT 127.0.0.1:" + std::to_string(s.rcv->port())) != std::string::npos);
  // The one without its own goes the way walhook run says — through the proxy that is down.
  const std::string failed = "SELECT last_error FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'pending'";
  REQUIRE(test::eventually([&] { return !s.value(failed, {usual}).empty(); }, 20s));
  CHECK(s.value(failed, {usual}).find("proxy 127.0.0.1:") != std::string::npos);
  CHECK(s.received("/usual", 0).empty());
  // Sent direct from now on: the change reaches walhook through the stream, the retry goes.
  REQUIRE(test::run_walhook({"endpoint", "update", usual, "--proxy", "direct", "--database-url", s.url}, out) == 0);
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/usual").size() == 1; }, 30s), walhook.log_tail());
  CHECK(walhook.stop() == 0);
}
