// The keep-alive pool on its own: real loopback TCP connections (connected synchronously, port
// 0), time from a manual clock, so idle timeouts are tested without sleeping.

#include "delivery/connection_pool.hpp"
#include "tests/support/manual_clock.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <doctest/doctest.h>

#include <poll.h>

#include <memory>
#include <vector>

using namespace walhook::delivery;
using namespace std::chrono_literals;
using walhook::test::manual_clock;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

const origin_key origin_a{false, "127.0.0.1", "8080"};
const origin_key origin_b{false, "127.0.0.1", "8081"};

/// Opens plain connections to a local listener and keeps the accepted (server) ends.
struct loopback {
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc, tcp::endpoint{asio::ip::address_v4::loopback(), 0}};
  std::vector<tcp::socket> server_ends;

  std::unique_ptr<connection> open(const origin_key& origin = origin_a) {
    auto c = std::make_unique<connection>();
    c->origin = origin;
    c->plain.emplace(ioc);
    c->plain->socket().connect(acceptor.local_endpoint());
    server_ends.push_back(acceptor.accept());
    return c;
  }
};

/// Waits (at most 5 s, no sleeping) until `socket` has input or EOF to read.
bool wait_readable(tcp::socket& socket) {
  pollfd p{socket.native_handle(), POLLIN, 0};
  return ::poll(&p, 1, 5000) == 1;
}

}  // namespace

TEST_CASE("connection_pool: an idle connection at or past idle_timeout by the injected clock is not reused") {
  loopback net;
  manual_clock clock;
  connection_pool pool{clock, 8, 30s};
  auto c = net.open();
  const connection* raw = c.get();

  pool.release("ep_1", std::move(c));
  CHECK(pool.idle_count("ep_1") == 1);
  clock.advance(30s - 1ns);
  auto young = pool.take_idle("ep_1", origin_a);
  REQUIRE(young != nullptr);
  CHECK(young.get() == raw);
  CHECK(young->idle_since == clock.steady_now() - (30s - 1ns));

  pool.release("ep_1", std::move(young));  // idle again from now
  clock.advance(30s);
  CHECK(pool.take_idle("ep_1", origin_a) == nullptr);
  CHECK(pool.idle_count("ep_1") == 0);  // pruned, not kept for later
}

TEST_CASE("connection_pool: the freshest idle connection is taken first") {
  loopback net;
  manual_clock clock;
  connection_pool pool{clock, 8, 30s};
  auto a = net.open();
  auto b = net.open();
  const connection* raw_a = a.get();
  const connection* raw_b = b.get();
  pool.release("ep_1", std::move(a));
  clock.advance(1s);
  pool.release("ep_1", std::move(b));

  auto first = pool.take_idle("ep_1", origin_a);
  CHECK(first.get() == raw_b);
  CHECK(pool.idle_count("ep_1") == 1);
  auto second = pool.take_idle("ep_1", origin_a);
  CHECK(second.get() == raw_a);
  CHECK(pool.take_idle("ep_1", origin_a) == nullptr);
}

TEST_CASE("connection_pool: at most max_idle_per_key stay idle, the oldest is closed") {
  loopback net;
  manual_clock clock;
  connection_pool pool{clock, 2, 30s};
  std::vector<const connection*> raw;
  for (int i = 0; i < 3; ++i) {
    auto c = net.open();
    raw.push_back(c.get());
    pool.release("ep_1", std::move(c));
    clock.advance(1s);
  }
  CHECK(pool.idle_count("ep_1") == 2);
  CHECK(wait_readable(net.server_ends[0]));  // the oldest was closed: EOF at the server end
  CHECK(pool.take_idle("ep_1", origin_a).get() == raw[2]);
  CHECK(pool.take_idle("ep_1", origin_a).get() == raw[1]);
  CHECK(pool.take_idle("ep_1", origin_a) == nullptr);
}

TEST_CASE("connection_pool: a connection to another origin is not reused") {
  loopback net;
  manual_clock clock;
  connection_pool pool{clock, 8, 30s};
  pool.release("ep_1", net.open(origin_a));
  CHECK(pool.take_idle("ep_1", origin_b) == nullptr);
  CHECK(pool.idle_count("ep_1") == 0);  // closed on the way
}

TEST_CASE("connection_pool: a connection the server closed while idle is not reused") {
  loopback net;
  manual_clock clock;
  connection_pool pool{clock, 8, 30s};
  auto c = net.open();
  net.server_ends[0].close();
  REQUIRE(wait_readable(c->plain->socket()));  // the FIN has arrived
  pool.release("ep_1", std::move(c));
  CHECK(pool.take_idle("ep_1", origin_a) == nullptr);
}

TEST_CASE("connection_pool: keys are separate; forget() drops one, close_all() every one") {
  loopback net;
  manual_clock clock;
  connection_pool pool{clock, 8, 30s};
  pool.release("ep_1", net.open());
  pool.release("ep_2", net.open());
  pool.release("ep_3", net.open());
  CHECK(pool.take_idle("ep_4", origin_a) == nullptr);

  pool.forget("ep_1");
  CHECK(pool.idle_count("ep_1") == 0);
  CHECK(pool.idle_count("ep_2") == 1);
  CHECK(wait_readable(net.server_ends[0]));

  pool.close_all();
  CHECK(pool.idle_count("ep_2") == 0);
  CHECK(pool.idle_count("ep_3") == 0);
  CHECK(wait_readable(net.server_ends[1]));
  CHECK(wait_readable(net.server_ends[2]));
}

TEST_CASE("connection_pool: with max_idle_per_key or idle_timeout at 0, release() closes") {
  loopback net;
  manual_clock clock;
  connection_pool no_slots{clock, 0, 30s};
  no_slots.release("ep_1", net.open());
  CHECK(no_slots.idle_count("ep_1") == 0);
  connection_pool no_time{clock, 8, 0s};
  no_time.release("ep_1", net.open());
  CHECK(no_time.idle_count("ep_1") == 0);
  CHECK(wait_readable(net.server_ends[0]));
  CHECK(wait_readable(net.server_ends[1]));
}
