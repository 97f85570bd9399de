// The admin listener under connection floods and file-descriptor exhaustion (issue 9 #10):
// at most 64 admin connections at once (more wait in the kernel's backlog, unaccepted), so
// deliveries keep their file descriptors; when accept(2) fails for want of descriptors the loop
// backs off instead of spinning; /healthz is answered again once a slot frees up.
//
// walhook runs as a child process; its RLIMIT_NOFILE is lowered with prlimit(2) while it runs.
// The CPU figure is measured over one real second from /proc/<pid>/stat: that is the quantity
// under test, so this is the one place a test waits on the wall clock.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t admin_cap = 64;  // relay/admin/server.hpp: max_admin_connections

/// A TCP connection to 127.0.0.1:port that the test holds open; closed on destruction.
class client_socket {
 public:
  explicit client_socket(unsigned short port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // Completes from the kernel's backlog even when walhook does not accept.
    REQUIRE(::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
  }
  ~client_socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  client_socket(client_socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  client_socket(const client_socket&) = delete;
  client_socket& operator=(const client_socket&) = delete;

  /// The start of a request, never finished (a client busy sending, or a slowloris).
  void send_partial() {
    const std::string req = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    REQUIRE(::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()));
  }
  void send_get(const std::string& path) {
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    REQUIRE(::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()));
  }
  /// The response's first bytes, or "" if nothing arrived within `timeout`.
  std::string read_some(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return {};
    char buf[512];
    const auto n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string{};
  }

 private:
  int fd_;
};

std::vector<client_socket> open_idle(unsigned short port, std::size_t n) {
  std::vector<client_socket> v;
  v.reserve(n);
  for (std::size_t i = 0; i < n; ++i) v.emplace_back(port);
  return v;
}

std::size_t open_fds(pid_t pid) {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(fmt::format("/proc/{}/fd", pid), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

/// utime + stime of the process, in clock ticks (proc(5)).
long cpu_ticks(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) "
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; rest >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::stol(field);
    if (i == 15) {
      stime = std::stol(field);
      break;
    }
  }
  return utime + stime;
}

void set_nofile(pid_t pid, rlim_t soft) {
  rlimit now{};
  REQUIRE(::prlimit(pid, RLIMIT_NOFILE, nullptr, &now) == 0);
  rlimit want{soft, now.rlim_max};
  REQUIRE(::prlimit(pid, RLIMIT_NOFILE, &want, nullptr) == 0);
}

}  // namespace

TEST_CASE("admin listener: a connection cap, backoff when descriptors run out, deliveries keep theirs") {
  test::scenario s("admin_limits");
  auto& db = s.db;
  auto& rcv = s.rcv;
  // One endpoint per tenant: a delivery to a tenant whose endpoint has not been used yet needs a
  // new connection, i.e. a new file descriptor (pooled ones would hide the fault).
  for (const std::string tenant : {"a", "b", "c"})
    test::add_endpoint(db, tenant, rcv->url("/" + tenant), delivery::generate_secret());
  auto walhook = s.start_walhook({"--admin-listen", "127.0.0.1:0"});
  REQUIRE(test::eventually([&] { return walhook.count_in_log("\"replication.streaming\"") == 1; }, 20s));
  const auto port = walhook.admin_port();
  REQUIRE(port != 0);
  const pid_t pid = walhook.pid();
  rlimit original{};
  REQUIRE(::prlimit(pid, RLIMIT_NOFILE, nullptr, &original) == 0);
  const auto publish = [&](const std::string& tenant) {
    pg::params p{tenant, "order.paid", "{}"};
    test::query_value(db, "SELECT walhook.publish($1, $2, $3::jsonb)", p);
  };
  publish("a");
  REQUIRE(test::eventually([&] { return rcv->count("/a") == 1; }, 10s));

  const auto base = open_fds(pid);
  // Every admin session has ended (a few descriptors of walhook's own may come and go).
  const auto settled = [&] { return test::eventually([&] { return open_fds(pid) <= base + 4; }, 15s); };
  MESSAGE("descriptors walhook has open at rest: " << base);

  // (a) At the cap, idle connections make room: a probe is served at once, and walhook still
  // holds no more than the cap.
  {
    auto idle = open_idle(port, admin_cap);
    CHECK(test::eventually([&] { return open_fds(pid) >= base + admin_cap; }, 5s));
    for (int i = 0; i < 3; ++i) {
      client_socket probe(port);
      probe.send_get("/healthz");
      CHECK(probe.read_some(2s).starts_with("HTTP/1.1 200"));
    }
    CHECK(open_fds(pid) <= base + admin_cap + 2);
  }
  CHECK(settled());

  // (a') When every slot is busy with a request, a connection waits unaccepted and is served once
  // a slot frees up.
  {
    auto busy = open_idle(port, admin_cap);
    for (auto& b : busy) b.send_partial();
    CHECK(test::eventually([&] { return open_fds(pid) >= base + admin_cap; }, 5s));
    client_socket probe(port);
    probe.send_get("/healthz");
    // Not served while every slot is held (before issue 9 it was: there was no cap).
    CHECK(probe.read_some(500ms).empty());
    busy.pop_back();  // one session ends
    CHECK(probe.read_some(5s).starts_with("HTTP/1.1 200"));
  }
  CHECK(settled());

  // (b) With descriptors for the cap and a few more, 200 admin connections leave deliveries
  // theirs (before: walhook accepted until EMFILE, and the delivery's connect failed).
  {
    const auto here = open_fds(pid);
    set_nofile(pid, here + admin_cap + 16);
    auto idle = open_idle(port, 200);
    CHECK(test::eventually([&] { return open_fds(pid) >= here + admin_cap; }, 5s));
    const auto held = open_fds(pid) - here;
    MESSAGE("admin connections walhook holds: " << held << " of 200 opened (descriptor limit " << here + admin_cap + 16
                                                << ", " << here << " in use before)");
    CHECK(held <= admin_cap + 2);
    publish("b");  // a new connection
    CHECK(test::eventually([&] { return rcv->count("/b") == 1; }, 10s));
    set_nofile(pid, original.rlim_cur);
  }
  CHECK(settled());

  // (c) When accept(2) fails for want of descriptors the loop backs off instead of spinning,
  // and serves again once descriptors are back.
  {
    const auto here = open_fds(pid);
    set_nofile(pid, here + 4);
    auto idle = open_idle(port, 32);  // fewer than the cap: accept(2) itself fails with EMFILE
    CHECK(test::eventually([&] { return open_fds(pid) >= here + 4; }, 5s));
    std::this_thread::sleep_for(200ms);  // let the loop reach its steady state
    const long before = cpu_ticks(pid);
    std::this_thread::sleep_for(1s);
    const long ticks = cpu_ticks(pid) - before;
    const long hz = ::sysconf(_SC_CLK_TCK);
    MESSAGE("walhook CPU time over 1 s while accept(2) fails with EMFILE: " << ticks * 1000 / hz << " ms");
    CHECK(ticks * 1000 / hz < 150);  // a spinning loop takes most of a core
    CHECK(walhook.count_in_log("\"admin.accept_failed\"") >= 1);

    set_nofile(pid, original.rlim_cur);
    idle.clear();
    client_socket probe(port);
    probe.send_get("/healthz");
    CHECK(probe.read_some(5s).starts_with("HTTP/1.1 200"));
    publish("c");  // a new connection
    CHECK(test::eventually([&] { return rcv->count("/c") == 1; }, 10s));
  }

  CHECK(walhook.stop() == 0);
}
