// Transport tests against tests/support/scripted_http_server (loopback, port 0). Success paths
// use generous deadlines; only tests whose expected outcome is a timeout use short ones. The
// io_context's run_for() is the guard that bounds how long a test may take.

#include "delivery/http_client.hpp"
#include "delivery/policy.hpp"
#include "delivery/signing.hpp"
#include "tests/support/manual_clock.hpp"
#include "tests/support/scripted_http_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>

#include <unistd.h>

using namespace walhook::delivery;
using namespace std::chrono_literals;
using walhook::test::scripted_action;
using walhook::test::scripted_http_server;
namespace asio = boost::asio;
using result_type = post_result;

namespace {

http_client_options test_options() {
  http_client_options o;
  o.allow_private_networks = true;  // the scripted server lives on loopback
  o.total_deadline = 20s;           // success paths never get near it
  return o;
}

http_request json_request(std::string body = R"({"id":"evt_1","type":"order.paid","data":{}})") {
  http_request r;
  r.body = std::move(body);
  r.headers = {{"webhook-id", "evt_1"}, {"webhook-timestamp", "1700000000"}};
  return r;
}

/// One io_context, one scripted server, one client; the client is destroyed first.
struct fixture {
  explicit fixture(http_client_options o = test_options(), std::optional<walhook::test::tls_identity> tls = {})
      : server(ioc, asio::ip::address_v4::loopback(), std::move(tls)), client(ioc.get_executor(), std::move(o)) {}

  http_target target(std::string_view path = "/hook") const {
    auto t = parse_url(server.url(path));
    REQUIRE(t.has_value());
    return *t;
  }

  asio::awaitable<result_type> post(std::string_view pool = "ep_1", std::string_view path = "/hook") {
    co_return co_await client.async_post(std::string(pool), target(path), json_request());
  }

  /// Runs `body` on the io_context until it finishes; fails if that takes longer than `guard`.
  template <class F>
  void run(F&& body, std::chrono::milliseconds guard = 30s) {
    bool done = false;
    std::exception_ptr error;
    asio::co_spawn(ioc, std::forward<F>(body)(), [&](std::exception_ptr e) {
      done = true;
      error = e;
      ioc.stop();
    });
    ioc.run_for(guard);
    REQUIRE_MESSAGE(done, "the test coroutine did not finish within its guard");
    if (error) std::rethrow_exception(error);
    if (server.failure()) std::rethrow_exception(server.failure());
  }

  asio::io_context ioc;
  scripted_http_server server;
  http_client client;
};

std::string status_of(const result_type& r) {
  return r ? std::to_string(r->status) : r.error().message();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Error category (pure)

TEST_CASE("http_client: transport errors have their own category and distinct messages") {
  std::set<std::string> messages;
  for (int e = static_cast<int>(transport_errc::invalid_url); e <= static_cast<int>(transport_errc::tls_unknown_ca);
       ++e) {
    const boost::system::error_code ec = static_cast<transport_errc>(e);
    CHECK(ec.category() == transport_category());
    CHECK(std::string_view(ec.category().name()) == "walhook.transport");
    CHECK_FALSE(ec.message().empty());
    messages.insert(ec.message());
  }
  CHECK(messages.size() == 15);
}

// ---------------------------------------------------------------------------------------------
// Requests and keep-alive

TEST_CASE("http_client: a 2xx is returned, its small body discarded and the connection reused") {
  fixture f;
  const auto key = parse_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").value();
  const std::array keys{key};
  f.server.push(scripted_action::respond(200, {"Content-Type: text/plain"}, "thanks, got it"));
  f.server.push(scripted_action::respond(204));
  f.run([&]() -> asio::awaitable<void> {
    http_request req = json_request();
    req.headers.emplace_back("webhook-signature", signature_header(keys, "evt_1", 1700000000, req.body));
    const auto first = co_await f.client.async_post("ep_1", f.target("/hook?tenant=t1"), req);
    REQUIRE(first.has_value());
    CHECK(first->status == 200);
    CHECK_FALSE(first->reused_connection);
    CHECK(first->elapsed > 0us);
    CHECK(first->retry_after.empty());
    CHECK(first->location.empty());

    const auto second = co_await f.post();
    REQUIRE(second.has_value());
    CHECK(second->status == 204);
    CHECK(second->reused_connection);
  });

  REQUIRE(f.server.requests().size() == 2);
  CHECK(f.server.accepted_connections() == 1);
  const auto& rec = f.server.requests()[0];
  CHECK(rec.method == "POST");
  CHECK(rec.target == "/hook?tenant=t1");
  CHECK(rec.header("Host") == "127.0.0.1:" + std::to_string(f.server.port()));
  CHECK(rec.header("User-Agent") == "walhook/0.1");
  CHECK(rec.header("Content-Type") == "application/json");
  CHECK(rec.header("Content-Length") == std::to_string(rec.body.size()));
  CHECK(rec.header("webhook-id") == "evt_1");
  CHECK(rec.body == json_request().body);
  // The bytes on the wire verify with the endpoint's secret.
  CHECK(verify(keys, rec.header("webhook-id"), rec.header("webhook-timestamp"), rec.body,
               rec.header("webhook-signature")));
  CHECK(f.server.requests()[1].connection == rec.connection);
  CHECK(f.server.requests()[1].sequence == 2);
}

TEST_CASE("http_client: caller headers cannot override framing; bad header bytes are refused unsent") {
  fixture f;
  f.run([&]() -> asio::awaitable<void> {
    http_request req = json_request("{}");
    req.headers = {{"Content-Length", "999"}, {"Host", "evil.example"}, {"Transfer-Encoding", "chunked"},
                   {"User-Agent", "custom/1"}, {"X-Custom", "1"}};
    const auto ok = co_await f.client.async_post("ep_1", f.target(), req);
    REQUIRE(ok.has_value());
    CHECK(ok->status == 200);

    for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
             {"X-Inject", "a\r\nEvil: 1"}, {"Bad Name", "v"}, {"", "v"}, {"X-Nul", std::string("a\0b", 3)}}) {
      http_request bad = json_request();
      bad.headers = {{name, value}};
      const auto r = co_await f.client.async_post("ep_1", f.target(), bad);
      REQUIRE(r.has_error());
      CHECK(r.error() == std::errc::invalid_argument);
    }
  });
  REQUIRE(f.server.requests().size() == 1);
  const auto& rec = f.server.requests()[0];
  CHECK(rec.header("Content-Length") == "2");
  CHECK(rec.header("Host") == "127.0.0.1:" + std::to_string(f.server.port()));
  CHECK(rec.header("Transfer-Encoding").empty());
  CHECK(rec.header("User-Agent") == "custom/1");
  CHECK(rec.header("X-Custom") == "1");
  CHECK(rec.body == "{}");
}

TEST_CASE("http_client: interim 1xx responses are skipped") {
  fixture f;
  // 100 and 102 in one write, then (separately, after a pause) the final response.
  f.server.push(scripted_action::respond(204)
                    .with_interim("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n")
                    .with_delay(20ms));
  f.server.push(scripted_action::raw_bytes(
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nLocation: /x/1\r\nContent-Length: 0\r\n\r\n"));
  f.run([&]() -> asio::awaitable<void> {
    const auto first = co_await f.post();
    REQUIRE(first.has_value());
    CHECK(first->status == 204);
    const auto second = co_await f.post();
    REQUIRE(second.has_value());
    CHECK(second->status == 201);
    CHECK(second->reused_connection);  // the interim responses left the connection in sync
    CHECK(second->location.empty());   // Location is kept for 3xx only
  });
  CHECK(f.server.accepted_connections() == 1);
}

TEST_CASE("http_client: Connection: close and HTTP/1.0 responses work and are not reused") {
  fixture f;
  f.server.push(scripted_action::respond(200, {"Connection: close"}, "bye"));
  f.server.push(scripted_action::raw_bytes("HTTP/1.0 202 Accepted\r\nContent-Length: 2\r\n\r\nok"));
  f.server.push(scripted_action::respond(200));
  f.run([&]() -> asio::awaitable<void> {
    for (unsigned want : {200u, 202u, 200u}) {
      const auto r = co_await f.post();
      REQUIRE(r.has_value());
      CHECK(r->status == want);
      CHECK_FALSE(r->reused_connection);
    }
    // The client, not the server, closed the first two connections.
    CHECK(co_await f.server.wait_until([&] { return f.server.closed_by_peer() == 2; }, 10s));
  });
  CHECK(f.server.accepted_connections() == 3);
  CHECK(f.server.requests().size() == 3);
}

TEST_CASE("http_client: a body that is huge, endless, chunked or unframed is judged by the status line") {
  using kind = scripted_action::endless_body;
  struct row {
    std::string name;
    scripted_action action;
    unsigned status;
  };
  std::vector<row> rows;
  rows.push_back({"huge Content-Length, endless body",
                  scripted_action::endless_response("HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n",
                                                    kind::identity),
                  200});
  rows.push_back({"endless chunked body",
                  scripted_action::endless_response("HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n",
                                                    kind::chunked),
                  500});
  rows.push_back({"finite body over the cap", scripted_action::respond(200, {}, std::string(64 * 1024, 'b')), 200});
  rows.push_back({"small chunked body", scripted_action::raw_bytes(
                                            "HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nno\r\n0\r\n\r\n"),
                  503});
  rows.push_back({"body delimited by EOF",
                  scripted_action::raw_bytes("HTTP/1.1 200 OK\r\n\r\nuntil the connection closes").then(
                      scripted_action::after_write::hang),
                  200});
  for (auto& r : rows) {
    CAPTURE(r.name);
    fixture f;
    f.server.push(std::move(r.action));
    f.run([&]() -> asio::awaitable<void> {
      const auto first = co_await f.post();
      REQUIRE_MESSAGE(first.has_value(), status_of(first));
      CHECK(first->status == r.status);
      // The connection was dropped rather than read to the end...
      CHECK(co_await f.server.wait_until([&] { return f.server.closed_by_peer() == 1; }, 10s));
      // ...so the next call needs a new one.
      const auto second = co_await f.post();
      REQUIRE(second.has_value());
      CHECK_FALSE(second->reused_connection);
    });
    CHECK(f.server.accepted_connections() == 2);
  }
}

TEST_CASE("http_client: a kept body (an OAuth2 token answer) is read whole up to the cap; a larger one is refused unread") {
  using kind = scripted_action::endless_body;
  auto kept = [](fixture& f) -> asio::awaitable<result_type> {
    http_request r = json_request();
    r.keep_body = true;
    // Named, not temporaries in the co_await: GCC 12 destroys such a temporary twice.
    const std::string pool = "ep_1";
    const http_target to = f.target("/token");
    co_return co_await f.client.async_post(pool, to, r);
  };
  fixture f;
  f.server.push(scripted_action::respond(200, {"Content-Type: application/json"}, R"({"access_token":"t"})"));
  f.server.push(scripted_action::raw_bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"));
  // A Content-Length of 100 GB (Beast would reserve it all: std::bad_alloc), and an endless chunked body.
  f.server.push(scripted_action::endless_response("HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n", kind::identity));
  f.server.push(scripted_action::endless_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", kind::chunked));
  f.run([&]() -> asio::awaitable<void> {
    auto a = co_await kept(f);
    REQUIRE(a.has_value());
    CHECK(a->body == R"({"access_token":"t"})");
    auto b = co_await kept(f);
    REQUIRE(b.has_value());
    CHECK(b->body == "abc");
    CHECK(b->reused_connection);
    auto c = co_await kept(f);
    REQUIRE_FALSE(c.has_value());
    CHECK(c.error() == transport_errc::protocol_error);
    auto d = co_await kept(f);
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error() == transport_errc::protocol_error);
  });
}

TEST_CASE("http_client: 3xx is a status, never followed, with Location captured") {
  fixture f;
  f.server.push(scripted_action::respond(302, {"Location: https://elsewhere.example/hook"}));
  f.server.push(scripted_action::respond(307, {"Location: /moved"}, "see /moved"));
  f.run([&]() -> asio::awaitable<void> {
    const auto r = co_await f.post();
    REQUIRE(r.has_value());
    CHECK(r->status == 302);
    CHECK(r->location == "https://elsewhere.example/hook");
    const auto again = co_await f.post();
    REQUIRE(again.has_value());
    CHECK(again->status == 307);
    CHECK(again->location == "/moved");
  });
  CHECK(f.server.requests().size() == 2);
  CHECK(f.server.requests()[1].target == "/hook");
}

TEST_CASE("http_client: Retry-After is captured raw") {
  fixture f;
  f.server.push(scripted_action::respond(429, {"Retry-After: 120"}));
  f.server.push(scripted_action::respond(503, {"Retry-After: Wed, 21 Oct 2015 07:28:00 GMT"}));
  f.run([&]() -> asio::awaitable<void> {
    const auto seconds = co_await f.post();
    REQUIRE(seconds.has_value());
    CHECK(seconds->status == 429);
    CHECK(seconds->retry_after == "120");
    const auto date = co_await f.post();
    REQUIRE(date.has_value());
    CHECK(date->status == 503);
    CHECK(date->retry_after == "Wed, 21 Oct 2015 07:28:00 GMT");
    CHECK(date->reused_connection);
  });
}

TEST_CASE("http_client: a response that is not HTTP is a protocol_error") {
  fixture f;
  f.server.push(scripted_action::raw_bytes("SSH-2.0-OpenSSH_9.2\r\n\r\n"));
  f.server.push(scripted_action::raw_bytes("HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n"));
  f.run([&]() -> asio::awaitable<void> {
    for (int i = 0; i < 2; ++i) {
      const auto r = co_await f.post();
      REQUIRE(r.has_error());
      CHECK(r.error() == transport_errc::protocol_error);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Deadlines

TEST_CASE("http_client: a server that never answers times out at the deadline") {
  auto options = test_options();
  options.total_deadline = 250ms;
  fixture f{options};
  f.server.push(scripted_action::never_answer());
  f.run(
      [&]() -> asio::awaitable<void> {
        const auto r = co_await f.post();
        REQUIRE(r.has_error());
        CHECK(r.error() == transport_errc::timeout);
        CHECK(f.server.requests().size() == 1);  // it was waiting for the response, not connecting
        CHECK(co_await f.server.wait_until([&] { return f.server.closed_by_peer() == 1; }, 10s));
      },
      10s);  // the guard: far less than a retry or a hang would take
}

TEST_CASE("http_client: a server dripping its response byte by byte times out") {
  auto options = test_options();
  options.total_deadline = 300ms;
  fixture f{options};
  // ~45 bytes at 40 ms each would take ~1.8 s; every byte resets no per-read timer.
  f.server.push(scripted_action::drip("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Slow: yes\r\n\r\n", 40ms));
  f.run(
      [&]() -> asio::awaitable<void> {
        const auto r = co_await f.post();
        REQUIRE(r.has_error());
        CHECK(r.error() == transport_errc::timeout);
      },
      10s);
}

TEST_CASE("http_client: an endless stream of 1xx interim responses ends at the deadline") {
  // Issue 9 #3: every read completes at once, so Beast's per-read expiry never fires; the
  // call's own deadline timer must end it. With the manual clock (which never moves) only that
  // timer can: no reading of the clock would ever say the deadline has passed.
  for (const bool manual : {false, true}) {
    CAPTURE(manual);
    walhook::test::manual_clock clock;
    auto options = test_options();
    options.total_deadline = 300ms;
    if (manual) options.clock = &clock;
    fixture f{options};
    f.server.push(scripted_action::repeat_forever(
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"));
    const auto& real = walhook::real_clock::instance();
    const auto started = real.steady_now();
    f.run(
        [&]() -> asio::awaitable<void> {
          const auto r = co_await f.post();
          REQUIRE(r.has_error());
          CHECK(r.error() == transport_errc::timeout);
          CHECK(co_await f.server.wait_until([&] { return f.server.closed_by_peer() == 1; }, 1s));
        },
        1s);  // the guard: deadline + 700 ms of slack; without a deadline timer the call never ends
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(real.steady_now() - started);
    MESSAGE("1xx flood, total_deadline 300 ms: the call ended after " << took.count() << " ms");
    CHECK(took >= 300ms);
  }
}

TEST_CASE("http_client: an answer that comes late but within the deadline succeeds") {
  fixture f;
  f.server.push(scripted_action::respond(200).with_delay(100ms));
  f.run([&]() -> asio::awaitable<void> {
    const auto r = co_await f.post();
    REQUIRE(r.has_value());
    CHECK(r->status == 200);
    CHECK(r->elapsed >= 100ms);
  });
}

// ---------------------------------------------------------------------------------------------
// Stale pooled connections

TEST_CASE("http_client: a pooled connection closed under the request is retried once, transparently") {
  fixture f;
  f.server.push(scripted_action::respond(200));
  f.server.push(scripted_action::close_without_answer());  // the keep-alive race: closes as the request lands
  f.server.push(scripted_action::respond(202));
  f.run([&]() -> asio::awaitable<void> {
    const auto first = co_await f.post();
    REQUIRE(first.has_value());
    const auto second = co_await f.post();
    REQUIRE(second.has_value());
    CHECK(second->status == 202);
    CHECK_FALSE(second->reused_connection);  // the answer came on the fresh connection
  });
  REQUIRE(f.server.requests().size() == 3);
  CHECK(f.server.accepted_connections() == 2);
  CHECK(f.server.requests()[1].connection == 1);
  CHECK(f.server.requests()[2].connection == 2);
}

TEST_CASE("http_client: the stale-connection retry happens only once") {
  fixture f;
  f.server.push(scripted_action::respond(200));
  f.server.push(scripted_action::close_without_answer());
  f.server.push(scripted_action::close_without_answer());
  f.server.push(scripted_action::respond(200));
  f.run([&]() -> asio::awaitable<void> {
    REQUIRE((co_await f.post()).has_value());
    const auto r = co_await f.post();
    REQUIRE(r.has_error());
    CHECK(r.error() == transport_errc::read_failed);
  });
  CHECK(f.server.requests().size() == 3);
  CHECK(f.server.accepted_connections() == 2);
}

TEST_CASE("http_client: a fresh connection closed without an answer is not retried") {
  fixture f;
  f.server.push(scripted_action::close_without_answer());
  f.run([&]() -> asio::awaitable<void> {
    const auto r = co_await f.post();
    REQUIRE(r.has_error());
    CHECK(r.error() == transport_errc::read_failed);
  });
  CHECK(f.server.requests().size() == 1);
}

TEST_CASE("http_client: a keep-alive connection the server closed while idle is not a failure") {
  fixture f;
  f.server.push(scripted_action::respond(200).then(scripted_action::after_write::close));
  f.server.push(scripted_action::respond(200));
  f.run([&]() -> asio::awaitable<void> {
    REQUIRE((co_await f.post()).has_value());
    CHECK(co_await f.server.wait_until([&] { return f.server.open_connections() == 0; }, 10s));
    const auto r = co_await f.post();
    REQUIRE(r.has_value());
    CHECK(r->status == 200);
    CHECK_FALSE(r->reused_connection);
  });
  CHECK(f.server.accepted_connections() == 2);
  CHECK(f.server.requests().size() == 2);
}

// ---------------------------------------------------------------------------------------------
// Pools

TEST_CASE("http_client: pools are per key; forget() drops a pool") {
  fixture f;
  f.run([&]() -> asio::awaitable<void> {
    REQUIRE((co_await f.post("ep_a")).has_value());
    const auto other = co_await f.post("ep_b");  // same URL, another endpoint: its own connection
    REQUIRE(other.has_value());
    CHECK_FALSE(other->reused_connection);
    const auto again = co_await f.post("ep_a");
    REQUIRE(again.has_value());
    CHECK(again->reused_connection);

    f.client.forget("ep_a");
    const auto after = co_await f.post("ep_a");
    REQUIRE(after.has_value());
    CHECK_FALSE(after->reused_connection);
  });
  CHECK(f.server.accepted_connections() == 3);
}

TEST_CASE("http_client: at most max_idle_per_pool connections are kept") {
  auto options = test_options();
  options.max_idle_per_pool = 1;
  fixture f{options};
  f.run([&]() -> asio::awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    // Three concurrent calls find an empty pool and open three connections.
    const auto [a, b, c] = co_await (f.post() && f.post() && f.post());
    CHECK(a.has_value());
    CHECK(b.has_value());
    CHECK(c.has_value());
    CHECK(f.server.accepted_connections() == 3);
    // Only one goes back to the pool; the client closes the other two.
    CHECK(co_await f.server.wait_until([&] { return f.server.closed_by_peer() == 2; }, 10s));
    const auto d = co_await f.post();
    REQUIRE(d.has_value());
    CHECK(d->reused_connection);
  });
  CHECK(f.server.accepted_connections() == 3);
}

TEST_CASE("http_client: idle connections at or past idle_timeout are not reused") {
  auto options = test_options();
  options.idle_timeout = 0s;
  fixture f{options};
  f.run([&]() -> asio::awaitable<void> {
    REQUIRE((co_await f.post()).has_value());
    const auto r = co_await f.post();
    REQUIRE(r.has_value());
    CHECK_FALSE(r->reused_connection);
  });
  CHECK(f.server.accepted_connections() == 2);
}

TEST_CASE("http_client: idle_timeout and elapsed are measured by the injected clock") {
  walhook::test::manual_clock clock;
  auto options = test_options();
  options.idle_timeout = 30s;
  options.clock = &clock;
  fixture f{options};
  f.run([&]() -> asio::awaitable<void> {
    const auto first = co_await f.post();
    REQUIRE(first.has_value());
    CHECK(first->elapsed == 0us);  // the injected clock did not move during the call
    clock.advance(29s);
    const auto young = co_await f.post();
    REQUIRE(young.has_value());
    CHECK(young->reused_connection);
    clock.advance(30s);  // idle exactly idle_timeout since the second call
    const auto old = co_await f.post();
    REQUIRE(old.has_value());
    CHECK_FALSE(old->reused_connection);
  });
  CHECK(f.server.accepted_connections() == 2);
}

TEST_CASE("http_client: with an injected clock, socket timers are armed with the time left") {
  // The manual clock reads years past steady_clock::now(). Arming Asio's timers with the
  // absolute deadline would make them fire years from now (the guard would catch the hang);
  // armed with what is left, the call times out after total_deadline of real time.
  walhook::test::manual_clock clock;
  clock.advance(24h * 365 * 100);
  auto options = test_options();
  options.total_deadline = 250ms;
  options.clock = &clock;
  fixture f{options};
  f.server.push(scripted_action::never_answer());
  f.run(
      [&]() -> asio::awaitable<void> {
        const auto r = co_await f.post();
        REQUIRE(r.has_error());
        CHECK(r.error() == transport_errc::timeout);
      },
      10s);
}

TEST_CASE("http_client: a null clock is fatal setup") {
  asio::io_context ioc;
  auto options = test_options();
  options.clock = nullptr;
  CHECK_THROWS_AS(http_client(ioc.get_executor(), options), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Addresses, SSRF, TLS, connect failures

TEST_CASE("http_client: an IPv6 literal endpoint works") {
  if (!walhook::test::ipv6_loopback_available()) {
    MESSAGE("no [::1] on this machine; skipped");
    return;
  }
  asio::io_context ioc;
  scripted_http_server server{ioc, asio::ip::address_v6::loopback()};
  http_client client{ioc.get_executor(), test_options()};
  const auto target = parse_url(server.url("/v6"));
  REQUIRE(target.has_value());
  CHECK(target->host == "::1");
  std::optional<result_type> outcome;
  asio::co_spawn(
      ioc, [&]() -> asio::awaitable<void> { outcome = co_await client.async_post("ep_6", *target, json_request()); },
      [&](std::exception_ptr) { ioc.stop(); });
  ioc.run_for(30s);
  REQUIRE(outcome.has_value());
  REQUIRE_MESSAGE(outcome->has_value(), status_of(*outcome));
  CHECK((*outcome)->status == 200);
  REQUIRE(server.requests().size() == 1);
  CHECK(server.requests()[0].header("Host") == "[::1]:" + std::to_string(server.port()));
}

TEST_CASE("http_client: a host name is resolved (localhost)") {
  fixture f;
  f.run([&]() -> asio::awaitable<void> {
    auto t = f.target();
    t.host = "localhost";
    const auto r = co_await f.client.async_post("ep_1", t, json_request());
    // localhost may resolve to ::1 first; the server listens on 127.0.0.1 only, and every
    // resolved address is tried in turn.
    REQUIRE_MESSAGE(r.has_value(), status_of(r));
    CHECK(r->status == 200);
  });
  REQUIRE(f.server.requests().size() == 1);
  CHECK(f.server.requests()[0].header("Host") == "localhost:" + std::to_string(f.server.port()));
}

TEST_CASE("http_client: the SSRF guard refuses loopback unless allow_private_networks") {
  auto options = test_options();
  options.allow_private_networks = false;
  fixture f{options};
  f.run([&]() -> asio::awaitable<void> {
    const auto literal = co_await f.post();
    REQUIRE(literal.has_error());
    CHECK(literal.error() == transport_errc::address_blocked);
    // The reason a delivery records names the way out.
    CHECK(literal.error().message().find("walhook run --allow-private-networks") != std::string::npos);

    auto by_name = f.target();
    by_name.host = "localhost";  // the guard applies after resolution
    const auto resolved = co_await f.client.async_post("ep_1", by_name, json_request());
    REQUIRE(resolved.has_error());
    CHECK(resolved.error() == transport_errc::address_blocked);

    // Legacy numeric forms are names to the URL parser but 127.0.0.1 to getaddrinfo.
    const auto legacy = parse_url("http://0x7f.1:" + std::to_string(f.server.port()) + "/");
    REQUIRE(legacy.has_value());
    const auto sneaky = co_await f.client.async_post("ep_1", *legacy, json_request());
    REQUIRE(sneaky.has_error());
    CHECK(sneaky.error() == transport_errc::address_blocked);
  });
  CHECK(f.server.accepted_connections() == 0);
}

TEST_CASE("http_client: a port nobody listens on is connect_failed") {
  fixture f;
  // Bound but not listening: the kernel refuses connections, and nobody else can take the port.
  asio::ip::tcp::acceptor closed{f.ioc};
  closed.open(asio::ip::tcp::v4());
  closed.bind({asio::ip::address_v4::loopback(), 0});
  const auto port = closed.local_endpoint().port();
  f.run([&]() -> asio::awaitable<void> {
    const auto t = parse_url("http://127.0.0.1:" + std::to_string(port) + "/hook");
    REQUIRE(t.has_value());
    const auto r = co_await f.client.async_post("ep_1", *t, json_request());
    REQUIRE(r.has_error());
    CHECK(r.error() == transport_errc::connect_failed);
    // last_error names the address and the system's reason, not only that connecting failed.
    const std::string address = "127.0.0.1:" + std::to_string(port);
    CHECK(r.error().detail() == address + ": connection refused");
    CHECK(r.error().text() == "TCP connection failed: " + address + ": connection refused");
    CHECK(classify(r, std::chrono::system_clock::now()).error == r.error().text());

    // A name: every address it resolves to is tried, and each is named with its own reason.
    auto by_name = *t;
    by_name.host = "localhost";
    const auto named = co_await f.client.async_post("ep_1", by_name, json_request());
    REQUIRE(named.has_error());
    CHECK(named.error() == transport_errc::connect_failed);
    asio::ip::tcp::resolver resolver{f.ioc};
    const auto resolved = resolver.resolve("localhost", std::to_string(port));
    std::size_t parts = 1;
    for (std::size_t at = 0; (at = named.error().detail().find("; ", at)) != std::string::npos; at += 2) ++parts;
    CHECK(parts == static_cast<std::size_t>(std::distance(resolved.begin(), resolved.end())));
    CHECK(named.error().detail().find(address + ": connection refused") != std::string::npos);
  });
}

TEST_CASE("http_client: https to a server that does not speak TLS is tls_failed") {
  fixture f;
  f.server.set_handler([](const walhook::test::recorded_request&) { return scripted_action::respond(400); });
  f.run([&]() -> asio::awaitable<void> {
    auto t = f.target();
    t.tls = true;
    const auto r = co_await f.client.async_post("ep_1", t, json_request());
    REQUIRE(r.has_error());
    CHECK(r.error() == transport_errc::tls_failed);
  });
}

TEST_CASE("http_client: a target built by hand is validated") {
  fixture f;
  f.run([&]() -> asio::awaitable<void> {
    for (auto mutate : std::vector<std::function<void(http_target&)>>{
             [](http_target& t) { t.host.clear(); }, [](http_target& t) { t.port = "0"; },
             [](http_target& t) { t.port = "http"; }, [](http_target& t) { t.target = "no-slash"; },
             [](http_target& t) { t.target = "/a b"; }, [](http_target& t) { t.target = "/a\r\nX: y"; }}) {
      auto t = f.target();
      mutate(t);
      const auto r = co_await f.client.async_post("ep_1", t, json_request());
      REQUIRE(r.has_error());
      CHECK(r.error() == transport_errc::invalid_url);
    }
  });
  CHECK(f.server.accepted_connections() == 0);
}

TEST_CASE("http_client: a listener that never accepts times out (the deadline covers connect and TLS)") {
  for (const bool tls : {false, true}) {
    CAPTURE(tls);
    auto options = test_options();
    options.total_deadline = 250ms;
    fixture f{options};
    // Listening but never accepting: the kernel completes (or, once its backlog is full, stalls)
    // TCP handshakes, and nothing ever answers a ClientHello or a request.
    asio::ip::tcp::acceptor silent{f.ioc};
    silent.open(asio::ip::tcp::v4());
    silent.bind({asio::ip::address_v4::loopback(), 0});
    silent.listen(1);
    const auto port = silent.local_endpoint().port();
    f.run(
        [&]() -> asio::awaitable<void> {
          auto t = parse_url((tls ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port) + "/");
          REQUIRE(t.has_value());
          const auto r = co_await f.client.async_post("ep_1", *t, json_request());
          REQUIRE(r.has_error());
          CHECK(r.error() == transport_errc::timeout);
        },
        10s);
  }
}

// ---------------------------------------------------------------------------------------------
// TLS (the scripted server presents a self-signed certificate made at test time)

TEST_CASE("http_client: https is verified, sends SNI for host names only, and reuses connections") {
  const auto identity = walhook::test::make_test_certificate("IP:127.0.0.1,DNS:localhost");
  auto options = test_options();
  options.extra_ca_pem = identity.certificate_pem;
  fixture f{options, identity};
  f.run([&]() -> asio::awaitable<void> {
    const auto by_ip = f.target("/tls");
    CHECK(by_ip.tls);
    const auto first = co_await f.client.async_post("ep_ip", by_ip, json_request());
    REQUIRE_MESSAGE(first.has_value(), status_of(first));
    CHECK(first->status == 200);
    const auto second = co_await f.client.async_post("ep_ip", by_ip, json_request());
    REQUIRE_MESSAGE(second.has_value(), status_of(second));
    CHECK(second->reused_connection);

    auto by_name = by_ip;
    by_name.host = "localhost";
    const auto named = co_await f.client.async_post("ep_name", by_name, json_request());
    REQUIRE_MESSAGE(named.has_value(), status_of(named));
    CHECK(named->status == 200);
    CHECK_FALSE(named->reused_connection);
  });
  REQUIRE(f.server.requests().size() == 3);
  CHECK(f.server.requests()[0].tls_server_name.empty());  // RFC 6066: no SNI for IP literals
  CHECK(f.server.requests()[1].connection == f.server.requests()[0].connection);
  CHECK(f.server.requests()[2].tls_server_name == "localhost");
  CHECK(f.server.requests()[2].header("Host") == "localhost:" + std::to_string(f.server.port()));
  CHECK(f.server.failed_handshakes() == 0);
}

TEST_CASE("http_client: an untrusted self-signed certificate is tls_unknown_ca") {
  const auto identity = walhook::test::make_test_certificate("IP:127.0.0.1,DNS:localhost");
  fixture f{test_options(), identity};  // the client trusts only the system store
  f.run([&]() -> asio::awaitable<void> {
    const auto r = co_await f.post();
    REQUIRE(r.has_error());
    CHECK(r.error() == transport_errc::tls_unknown_ca);
    CHECK(r.error().message().find("unknown CA") != std::string::npos);
    CHECK(is_tls_error(r.error()));
    CHECK(co_await f.server.wait_until([&] { return f.server.failed_handshakes() == 1; }, 10s));
  });
  CHECK(f.server.requests().empty());
}

TEST_CASE("http_client: a trusted certificate for another host is tls_hostname_mismatch") {
  const auto identity = walhook::test::make_test_certificate("DNS:hooks.example.com,IP:10.9.8.7");
  auto options = test_options();
  options.extra_ca_pem = identity.certificate_pem;
  fixture f{options, identity};
  f.run([&]() -> asio::awaitable<void> {
    const auto by_ip = co_await f.post();
    REQUIRE(by_ip.has_error());
    CHECK(by_ip.error() == transport_errc::tls_hostname_mismatch);
    CHECK(by_ip.error().message().find("hostname mismatch") != std::string::npos);
    auto by_name = f.target();
    by_name.host = "localhost";
    const auto named = co_await f.client.async_post("ep_1", by_name, json_request());
    REQUIRE(named.has_error());
    CHECK(named.error() == transport_errc::tls_hostname_mismatch);
  });
  CHECK(f.server.requests().empty());
}

TEST_CASE("http_client: a certificate without a subjectAltName is refused; its CN never counts") {
  // RFC 6125 §6.4.4 and the CA/B Forum: names are in the subjectAltName. A certificate whose only
  // name is CN=localhost (or CN=127.0.0.1) must not be accepted for that host, trusted or not.
  for (const std::string cn : {"localhost", "127.0.0.1"}) {
    CAPTURE(cn);
    walhook::test::certificate_spec spec;
    spec.common_name = cn;  // and no subjectAltName
    const auto identity = walhook::test::make_certificate(spec);
    auto options = test_options();
    options.extra_ca_pem = identity.certificate_pem;
    fixture f{options, identity};
    f.run([&]() -> asio::awaitable<void> {
      auto t = f.target();
      t.host = cn;
      const auto r = co_await f.client.async_post("ep_1", t, json_request());
      REQUIRE(r.has_error());
      CHECK(r.error() == transport_errc::tls_hostname_mismatch);
    });
    CHECK(f.server.requests().empty());
  }
}

namespace {

/// A private CA and, signed by it, a leaf for 127.0.0.1 and localhost as `leaf` says.
struct private_pki {
  explicit private_pki(walhook::test::certificate_spec leaf = {}) {
    walhook::test::certificate_spec ca_spec;
    ca_spec.common_name = "walhook test private CA";
    ca = walhook::test::make_certificate(ca_spec);
    leaf.is_ca = false;
    leaf.common_name = "leaf";
    if (leaf.subject_alt_names.empty()) leaf.subject_alt_names = "IP:127.0.0.1,DNS:localhost";
    leaf.issuer = &ca;
    server = walhook::test::make_certificate(leaf);
  }
  walhook::test::tls_identity ca;
  walhook::test::tls_identity server;
};

/// One post to a TLS server presenting `pki.server`, the client trusting `pki.ca` if `trust_ca`.
result_type post_to(const private_pki& pki, bool trust_ca) {
  auto options = test_options();
  if (trust_ca) options.extra_ca_pem = pki.ca.certificate_pem;
  fixture f{options, pki.server};
  std::optional<result_type> r;
  f.run([&]() -> asio::awaitable<void> { r = co_await f.post(); });
  return *r;
}

}  // namespace

TEST_CASE("http_client: certificate verification failures say why") {
  SUBCASE("a leaf of a trusted private CA is accepted") {
    const auto r = post_to(private_pki{}, true);
    REQUIRE_MESSAGE(r.has_value(), status_of(r));
    CHECK(r->status == 200);
  }
  SUBCASE("expired") {
    walhook::test::certificate_spec leaf;
    leaf.not_before = -std::chrono::seconds{48 * 3600};
    leaf.not_after = -std::chrono::seconds{24 * 3600};
    const auto r = post_to(private_pki{leaf}, true);
    REQUIRE(r.has_error());
    CHECK(r.error() == transport_errc::tls_certificate_expired);
    CHECK(r.error().message().find("expired") != std::string::npos);
  }
  SUBCASE("not yet valid") {
    walhook::test::certificate_spec leaf;
    leaf.not_before = std::chrono::seconds{24 * 3600};
    leaf.not_after = std::chrono::seconds{48 * 3600};
    const auto r = post_to(private_pki{leaf}, true);
    REQUIRE(r.has_error());
    CHECK(r.error() == transport_errc::tls_certificate_not_yet_valid);
    CHECK(r.error().message().find("not yet valid") != std::string::npos);
  }
  SUBCASE("issued by a CA the client does not trust") {
    const auto r = post_to(private_pki{}, false);
    REQUIRE(r.has_error());
    CHECK(r.error() == transport_errc::tls_unknown_ca);
  }
  SUBCASE("wrong host") {
    walhook::test::certificate_spec leaf;
    leaf.subject_alt_names = "DNS:hooks.example.com";
    const auto r = post_to(private_pki{leaf}, true);
    REQUIRE(r.has_error());
    CHECK(r.error() == transport_errc::tls_hostname_mismatch);
  }
  SUBCASE("any other reason is OpenSSL's, in the error's message") {
    walhook::test::certificate_spec leaf;
    leaf.extended_key_usage = "clientAuth";  // not for servers
    const auto r = post_to(private_pki{leaf}, true);
    REQUIRE(r.has_error());
    CHECK(r.error().category() == tls_verify_category());
    CHECK(is_tls_error(r.error()));
    CHECK(r.error().message() == "TLS certificate verification failed: unsuitable certificate purpose");
  }
}

TEST_CASE("read_ca_bundle: a private CA from a file; unreadable or empty files are errors") {
  const private_pki pki;
  const auto dir = std::filesystem::temp_directory_path() / ("walhook-ca-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  };
  const auto bundle = read_ca_bundle(write("ca.pem", "# a comment\n" + pki.ca.certificate_pem));
  REQUIRE(bundle.has_value());

  auto options = test_options();
  options.extra_ca_pem = *bundle;
  fixture f{options, pki.server};
  f.run([&]() -> asio::awaitable<void> {
    const auto r = co_await f.post();
    REQUIRE_MESSAGE(r.has_value(), status_of(r));
    CHECK(r->status == 200);
  });

  const auto missing = read_ca_bundle((dir / "missing.pem").string());
  REQUIRE(missing.has_error());
  CHECK(missing.error() == boost::system::errc::no_such_file_or_directory);
  const auto empty = read_ca_bundle(write("empty.pem", "no certificate here\n"));
  REQUIRE(empty.has_error());
  CHECK(empty.error() == boost::system::errc::invalid_argument);
  std::filesystem::remove_all(dir);
}

TEST_CASE("http_client: unparsable extra_ca_pem is fatal setup") {
  asio::io_context ioc;
  auto options = test_options();
  options.extra_ca_pem = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
  CHECK_THROWS_AS(http_client(ioc.get_executor(), options), boost::system::system_error);
}

// ---------------------------------------------------------------------------------------------
// Shutdown

TEST_CASE("http_client: shutdown() cancels pending calls and refuses new ones") {
  auto options = test_options();
  options.total_deadline = 60s;  // far beyond the guard: only cancellation can end the call
  fixture f{options};
  f.server.push(scripted_action::never_answer());
  f.run(
      [&]() -> asio::awaitable<void> {
        using namespace asio::experimental::awaitable_operators;
        auto stop_when_request_arrives = [&]() -> asio::awaitable<bool> {
          const bool arrived = co_await f.server.wait_until([&] { return f.server.requests().size() == 1; }, 10s);
          f.client.shutdown();
          co_return arrived;
        };
        const auto [pending, arrived] = co_await (f.post() && stop_when_request_arrives());
        CHECK(arrived);
        REQUIRE(pending.has_error());
        CHECK(pending.error() == transport_errc::cancelled);

        const auto later = co_await f.post();
        REQUIRE(later.has_error());
        CHECK(later.error() == transport_errc::cancelled);
      },
      10s);
  CHECK(f.server.accepted_connections() == 1);
}

TEST_CASE("http_client: destroying the client closes its pooled connections") {
  asio::io_context ioc;
  scripted_http_server server{ioc};
  bool done = false;
  {
    http_client client{ioc.get_executor(), test_options()};
    const auto target = parse_url(server.url("/hook")).value();
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
          const auto r = co_await client.async_post("ep_1", target, json_request());
          CHECK(r.has_value());
        },
        [&](std::exception_ptr) { ioc.stop(); });
    ioc.run_for(30s);
    ioc.restart();
  }
  // The pooled connection is closed by the destructor's shutdown.
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        done = co_await server.wait_until([&] { return server.closed_by_peer() == 1; }, 10s);
      },
      [&](std::exception_ptr) { ioc.stop(); });
  ioc.run_for(30s);
  CHECK(done);
}
