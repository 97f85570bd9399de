// The pure parts of an exchange: the request as it goes on the wire, and how I/O failures map
// to transport errors (the I/O itself is tested through http_client against the scripted server).

#include "delivery/exchange.hpp"
#include "tests/support/manual_clock.hpp"

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>

#include <doctest/doctest.h>

#include <string>
#include <system_error>
#include <utility>
#include <vector>

using namespace walhook::delivery;
using namespace std::chrono_literals;
namespace http = boost::beast::http;

namespace {

std::string header(const request_message& req, std::string_view name) {
  const auto it = req.find(name);
  return it == req.end() ? std::string{} : std::string(it->value());
}

}  // namespace

TEST_CASE("exchange: build_request sets framing and keeps the caller's headers in order") {
  http_request r;
  r.body = R"({"id":"evt_1"})";
  r.headers = {{"webhook-id", "evt_1"},       {"Content-Length", "999"}, {"Host", "evil.example"},
               {"Transfer-Encoding", "chunked"}, {"Connection", "upgrade"}, {"TE", "trailers"},
               {"Upgrade", "h2c"},             {"Expect", "100-continue"}, {"User-Agent", "custom/1"},
               {"Content-Type", "application/cloudevents+json"}, {"X-Dup", "1"}, {"X-Dup", "2"}};
  const auto req = build_request("walhook/0.1", {true, "hooks.example.com", "8443", "/in?t=1"}, r);
  REQUIRE(req.has_value());
  CHECK(req->method() == http::verb::post);
  CHECK(req->version() == 11);
  CHECK(req->target() == "/in?t=1");
  CHECK(header(*req, "Host") == "hooks.example.com:8443");
  CHECK(header(*req, "Content-Length") == std::to_string(r.body.size()));
  CHECK(header(*req, "User-Agent") == "custom/1");
  CHECK(header(*req, "Content-Type") == "application/cloudevents+json");
  CHECK(header(*req, "webhook-id") == "evt_1");
  for (std::string_view framing : {"Transfer-Encoding", "Connection", "TE", "Upgrade", "Expect"}) {
    CAPTURE(framing);
    CHECK(req->count(framing) == 0);
  }
  CHECK(req->count("Host") == 1);
  std::vector<std::string> dups;
  for (auto [it, end] = req->equal_range("X-Dup"); it != end; ++it) dups.emplace_back(it->value());
  CHECK(dups == std::vector<std::string>{"1", "2"});
  CHECK(req->body() == r.body);
}

TEST_CASE("exchange: build_request defaults User-Agent and Content-Type") {
  const auto req = build_request("walhook/0.1", {false, "::1", "80", "/"}, http_request{"{}", {}});
  REQUIRE(req.has_value());
  CHECK(header(*req, "Host") == "[::1]");
  CHECK(header(*req, "User-Agent") == "walhook/0.1");
  CHECK(header(*req, "Content-Type") == "application/json");
  CHECK(header(*req, "Content-Length") == "2");
}

TEST_CASE("exchange: build_request refuses bytes that could split the request") {
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"X-Inject", "a\r\nEvil: 1"}, {"X-LF", "a\nb"}, {"Bad Name", "v"}, {"", "v"}, {"X:y", "v"},
           {"X-Nul", std::string("a\0b", 3)}}) {
    CAPTURE(name);
    const http_request r{"{}", {{name, value}}};
    const auto req = build_request("walhook/0.1", {false, "example.com", "80", "/"}, r);
    REQUIRE(req.has_error());
    CHECK(req.error() == std::errc::invalid_argument);
  }
}

TEST_CASE("exchange: build_request validates a hand-built target") {
  for (const http_target& t : std::vector<http_target>{{false, "", "80", "/"},
                                                       {false, "example.com", "0", "/"},
                                                       {false, "example.com", "http", "/"},
                                                       {false, "example.com", "80", ""},
                                                       {false, "example.com", "80", "/a b"},
                                                       {false, "example.com", "80", "/a\r\nX: 1"}}) {
    CAPTURE(t.host);
    CAPTURE(t.port);
    CAPTURE(t.target);
    const auto req = build_request("walhook/0.1", t, http_request{});
    REQUIRE(req.has_error());
    CHECK(req.error() == transport_errc::invalid_url);
  }
}

TEST_CASE("exchange: classify_io_error: shut down wins, then timeout, then the phase's error") {
  walhook::test::manual_clock clock;
  const call_deadline deadline{&clock, clock.steady_now(), clock.steady_now() + 5s};
  const boost::system::error_code reset = boost::asio::error::connection_reset;
  const boost::system::error_code expired = boost::beast::error::timeout;

  CHECK(classify_io_error(true, reset, deadline, transport_errc::write_failed) == transport_errc::cancelled);
  CHECK(classify_io_error(true, expired, deadline, transport_errc::write_failed) == transport_errc::cancelled);
  CHECK(classify_io_error(false, expired, deadline, transport_errc::connect_failed) == transport_errc::timeout);
  CHECK(classify_io_error(false, reset, deadline, transport_errc::connect_failed) == transport_errc::connect_failed);

  clock.advance(5s - 1ns);
  CHECK(deadline.remaining() == 1ns);
  CHECK(classify_io_error(false, reset, deadline, transport_errc::tls_failed) == transport_errc::tls_failed);
  clock.advance(1ns);  // at the deadline: whatever the socket said, the call ran out of time
  CHECK(deadline.passed());
  CHECK(deadline.elapsed() == 5s);
  CHECK(classify_io_error(false, reset, deadline, transport_errc::tls_failed) == transport_errc::timeout);
}
