// OAuth2 client credentials (delivery/oauth2.hpp): the token request's shape (RFC 6749 §4.4.2,
// §2.3.1), what a token response must hold, and the token cache driven through a fake transport
// and a manual clock: one token call for many attempts, a refresh before expiry, a new token for
// a rejected one (and only one for many rejections), new credentials never served an old token,
// a failure not cached.

#include "delivery/oauth2.hpp"
#include "delivery/signing.hpp"
#include "tests/support/fake_transport.hpp"
#include "tests/support/manual_clock.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <doctest/doctest.h>

#include <optional>

using namespace walhook;
using namespace walhook::delivery;
namespace asio = boost::asio;

namespace {

oauth2_client client_of(std::string id = "client 1", std::string secret = "s3cr:t&=") {
  return {parse_url("https://auth.example/oauth/token").value(), std::move(id), std::move(secret), "events:write read"};
}

/// One bearer() call in flight; its result once the io_context ran it to the end.
struct pending_bearer {
  std::optional<boost::system::result<std::string, transport_error>> result;
};

std::shared_ptr<pending_bearer> ask(asio::io_context& ioc, oauth2_tokens& tokens, transport& t, oauth2_client c,
                                    std::string rejected = {}) {
  auto p = std::make_shared<pending_bearer>();
  asio::co_spawn(
      ioc,
      [&tokens, &t, c, rejected, p]() -> asio::awaitable<void> {
        p->result = co_await tokens.bearer(t, "7", c, std::chrono::seconds(5), rejected);
      },
      asio::detached);
  ioc.poll();
  ioc.restart();
  return p;
}

void run(asio::io_context& ioc) {
  ioc.poll();
  ioc.restart();
}

const char* token_json(const char* token, int expires_in) {
  static thread_local std::string s;
  s = std::string(R"({"access_token":")") + token + R"(","token_type":"Bearer","expires_in":)" +
      std::to_string(expires_in) + "}";
  return s.c_str();
}

}  // namespace

TEST_CASE("oauth2: the token request is a client_credentials form POST, the client authenticated by HTTP Basic") {
  const auto r = token_request(client_of());
  CHECK(r.body == "grant_type=client_credentials&scope=events%3Awrite%20read");
  CHECK(r.keep_body);
  auto header = [&](std::string_view name) {
    for (const auto& [n, v] : r.headers)
      if (n == name) return v;
    return std::string();
  };
  CHECK(header("Content-Type") == "application/x-www-form-urlencoded");
  CHECK(header("Accept") == "application/json");
  // §2.3.1: the id and secret form-encoded before Basic's base64.
  CHECK(header("Authorization") == "Basic " + base64_encode("client%201:s3cr%3At%26%3D"));
  auto no_scope = client_of();
  no_scope.scope.clear();
  CHECK(token_request(no_scope).body == "grant_type=client_credentials");
}

TEST_CASE("oauth2: a token response needs a visible-ASCII access_token of type Bearer; errors are named, not echoed raw") {
  auto ok = parse_token_response(200, R"({"access_token":"eyJ.a-b_c~+/=","token_type":"bearer","expires_in":3600})");
  REQUIRE(ok.has_value());
  CHECK(ok->access_token == "eyJ.a-b_c~+/=");
  CHECK(ok->expires_in == std::chrono::seconds(3600));
  CHECK(parse_token_response(200, R"({"access_token":"t","token_type":"Bearer","expires_in":"120"})")->expires_in ==
        std::chrono::seconds(120));
  CHECK(parse_token_response(200, R"({"access_token":"t","token_type":"Bearer"})")->expires_in == std::chrono::seconds(300));

  for (const auto& [status, body, says] : std::vector<std::tuple<unsigned, std::string, std::string>>{
           {401, R"({"error":"invalid_client","error_description":"bad\r\nsecret"})", "answered 401: invalid_client (bad??secret)"},
           {503, "<html>down</html>", "answered 503"},
           {200, "not json", "without a JSON object"},
           {200, R"({"token_type":"Bearer"})", "without an access_token"},
           {200, R"({"access_token":"","token_type":"Bearer"})", "without an access_token"},
           {200, R"({"access_token":"a b","token_type":"Bearer"})", "cannot send"},
           {200, R"({"access_token":"a\r\nX-Injected: 1","token_type":"Bearer"})", "cannot send"},
           {200, R"({"access_token":"t"})", "without a token_type"},
           {200, R"({"access_token":"t","token_type":"mac"})", "token_type mac: walhook sends Bearer tokens only"},
           {200, R"({"access_token":"t","token_type":"Bearer","expires_in":0})", "not a positive number"},
           {200, R"({"access_token":"t","token_type":"Bearer","expires_in":"soon"})", "not a positive number"}}) {
    INFO(body);
    auto r = parse_token_response(status, body);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().find(says) != std::string::npos);
  }
  CHECK_FALSE(parse_token_response(200, R"({"access_token":")" + std::string(9000, 'a') + R"(","token_type":"Bearer"})")
                  .has_value());
}

TEST_CASE("oauth2: concurrent attempts share one token call; the token is kept until 30 s before it expires") {
  asio::io_context ioc;
  test::fake_transport t(ioc.get_executor());
  test::manual_clock clock;
  oauth2_tokens tokens(clock);
  auto a = ask(ioc, tokens, t, client_of());
  auto b = ask(ioc, tokens, t, client_of());
  REQUIRE(t.calls() == 1);  // single flight
  CHECK(t.at(0).pool_key == "oauth2:7");
  CHECK(t.at(0).target.host == "auth.example");
  CHECK(t.at(0).target.target == "/oauth/token");
  t.answer_with_body(0, 200, token_json("tok-1", 120));
  run(ioc);
  REQUIRE(a->result);
  REQUIRE(b->result);
  CHECK(a->result->value() == "tok-1");
  CHECK(b->result->value() == "tok-1");

  clock.advance(std::chrono::seconds(89));
  CHECK(ask(ioc, tokens, t, client_of())->result->value() == "tok-1");  // cached: no call
  CHECK(t.calls() == 1);
  clock.advance(std::chrono::seconds(1));  // 30 s before expiry: renewed
  auto c = ask(ioc, tokens, t, client_of());
  REQUIRE(t.calls() == 2);
  t.answer_with_body(1, 200, token_json("tok-2", 3600));
  run(ioc);
  CHECK(c->result->value() == "tok-2");
}

TEST_CASE("oauth2: a rejected token is replaced once, however many attempts saw it rejected") {
  asio::io_context ioc;
  test::fake_transport t(ioc.get_executor());
  test::manual_clock clock;
  oauth2_tokens tokens(clock);
  auto first = ask(ioc, tokens, t, client_of());
  t.answer_with_body(0, 200, token_json("tok-1", 3600));
  run(ioc);
  REQUIRE(first->result->value() == "tok-1");

  auto a = ask(ioc, tokens, t, client_of(), "tok-1");
  auto b = ask(ioc, tokens, t, client_of(), "tok-1");
  REQUIRE(t.calls() == 2);
  t.answer_with_body(1, 200, token_json("tok-2", 3600));
  run(ioc);
  CHECK(a->result->value() == "tok-2");
  CHECK(b->result->value() == "tok-2");
  // Rejected again, but an attempt that still carried tok-1 gets tok-2 without another call.
  CHECK(ask(ioc, tokens, t, client_of(), "tok-1")->result->value() == "tok-2");
  CHECK(t.calls() == 2);
}

TEST_CASE("oauth2: a failed token call is an auth_failed attempt, not cached; new credentials never get the old token") {
  asio::io_context ioc;
  test::fake_transport t(ioc.get_executor());
  test::manual_clock clock;
  oauth2_tokens tokens(clock);
  auto a = ask(ioc, tokens, t, client_of());
  t.answer_with_body(0, 401, R"({"error":"invalid_client"})");
  run(ioc);
  REQUIRE_FALSE(a->result->has_value());
  CHECK(a->result->error() == transport_errc::auth_failed);
  CHECK(a->result->error().text() ==
        "no OAuth2 access token for the endpoint: token endpoint auth.example answered 401: invalid_client");

  auto b = ask(ioc, tokens, t, client_of());
  REQUIRE(t.calls() == 2);  // asked again
  t.fail(1, transport_errc::connect_failed);
  run(ioc);
  CHECK(b->result->error().detail().find("token endpoint auth.example: ") == 0);

  auto c = ask(ioc, tokens, t, client_of());
  t.answer_with_body(2, 200, token_json("old-client-token", 3600));
  run(ioc);
  CHECK(c->result->value() == "old-client-token");
  auto d = ask(ioc, tokens, t, client_of("client 2"));
  REQUIRE(t.calls() == 4);
  CHECK(t.at(3).header("Authorization") == "Basic " + base64_encode("client%202:s3cr%3At%26%3D"));
  // A call for the old credentials still under way when they change is not kept for the new ones.
  auto e = ask(ioc, tokens, t, client_of("client 3"));
  REQUIRE(t.calls() == 5);
  auto f = ask(ioc, tokens, t, client_of("client 4"));
  REQUIRE(t.calls() == 6);
  t.answer_with_body(4, 200, token_json("client-3-token", 3600));
  t.answer_with_body(5, 200, token_json("client-4-token", 3600));
  t.answer_with_body(3, 200, token_json("client-2-token", 3600));
  run(ioc);
  CHECK(d->result->value() == "client-2-token");
  CHECK(e->result->value() == "client-3-token");
  CHECK(f->result->value() == "client-4-token");
  CHECK(ask(ioc, tokens, t, client_of("client 4"))->result->value() == "client-4-token");
  CHECK(t.calls() == 6);
}

TEST_CASE("oauth2: the token call gets the attempt's deadline; a token endpoint echoing the credentials does not put them in last_error") {
  asio::io_context ioc;
  test::fake_transport t(ioc.get_executor());
  test::manual_clock clock;
  oauth2_tokens tokens(clock);
  auto a = ask(ioc, tokens, t, client_of());
  REQUIRE(t.calls() == 1);
  REQUIRE(t.at(0).request.deadline.has_value());
  CHECK(*t.at(0).request.deadline == std::chrono::seconds(5));
  const std::string basic = t.at(0).header("Authorization");
  t.answer_with_body(0, 400,
                     R"({"error":"invalid_request","error_description":"got )" + basic + R"( and s3cr:t&= and s3cr%3At%26%3D"})");
  run(ioc);
  REQUIRE_FALSE(a->result->has_value());
  const auto text = a->result->error().text();
  CHECK(text.find("s3cr") == std::string::npos);
  CHECK(text.find(basic.substr(6)) == std::string::npos);
  CHECK(text.find("got Basic [redacted] and [redacted] and [redacted]") != std::string::npos);
}

TEST_CASE("oauth2: credentials are redacted before the description is cut or sanitised; a rejected token is not offered again") {
  asio::io_context ioc;
  test::fake_transport t(ioc.get_executor());
  test::manual_clock clock;
  oauth2_tokens tokens(clock);
  const std::string secret = "s\xc3\xa9" "cr\xc3\xa8t-Sx7Kq2LmN9pR4tV8wY1zAb3Cd5Ef7Gh9Ij";  // non-ASCII, 40+ bytes
  auto a = ask(ioc, tokens, t, client_of("c", secret));
  t.answer_with_body(0, 400, R"({"error":"invalid_client","error_description":")" + std::string(180, 'x') + secret + R"("})");
  run(ioc);
  REQUIRE_FALSE(a->result->has_value());
  const auto text = a->result->error().text();
  CHECK(text.find("Sx7Kq2") == std::string::npos);
  CHECK(text.find("cr??t") == std::string::npos);

  // A token the endpoint refused, whose replacement could not be had, is not offered to the next attempt.
  auto b = ask(ioc, tokens, t, client_of());
  t.answer_with_body(1, 200, token_json("tok-1", 3600));
  run(ioc);
  REQUIRE(b->result->value() == "tok-1");
  auto c = ask(ioc, tokens, t, client_of(), "tok-1");
  REQUIRE(t.calls() == 3);
  t.fail(2, transport_errc::timeout);
  run(ioc);
  CHECK_FALSE(c->result->has_value());
  auto d = ask(ioc, tokens, t, client_of());
  CHECK(t.calls() == 4);  // asked again rather than handed tok-1
  CHECK_FALSE(d->result.has_value());
}
