// OAuth2 client credentials per endpoint (migration 014; delivery/oauth2.hpp) on a real PostgreSQL
// 15, `walhook run` and a real receiver that plays both the authorization server (its /token path
// issues tokens to the right client only) and the resource (its /hook path takes only the token
// issued last): one token call for many events, a revoked token replaced within the attempt, a
// refusing token endpoint a failed attempt with the reason, the client secret shown nowhere, and
// the CLI's refusals.

#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

/// The authorization server's and the resource's shared state, used on the receiver's thread.
struct auth_server {
  std::mutex mutex;
  std::string expected_basic;  ///< the Authorization a client must present to /token
  int issued = 0;              ///< tokens issued
  std::string valid;           ///< the token /hook accepts ("" until one is issued)
  bool revoke_on_next = false; ///< the next token issued is the only valid one, before it is asked for
  std::vector<std::string> token_bodies;

  std::pair<unsigned, std::string> token(const relay::received_request& r) {
    std::lock_guard lock(mutex);
    token_bodies.push_back(r.body);
    if (r.header("Authorization") != expected_basic)
      return {401, R"({"error":"invalid_client","error_description":"client authentication failed"})"};
    valid = fmt::format("tok-{}", ++issued);
    return {200, fmt::format(R"({{"access_token":"{}","token_type":"Bearer","expires_in":3600}})", valid)};
  }
  std::pair<unsigned, std::string> hook(const relay::received_request& r) {
    std::lock_guard lock(mutex);
    if (revoke_on_next) {  // the token walhook holds stops working, as a revocation would make it
      valid = "revoked-until-a-new-one";
      revoke_on_next = false;
    }
    const bool ok = !valid.empty() && r.header("Authorization") == "Bearer " + valid;
    return {ok ? 200u : 401u, ok ? "{}" : R"({"error":"invalid_token"})"};
  }
  int tokens_issued() {
    std::lock_guard lock(mutex);
    return issued;
  }
};

std::string basic(const std::string& id, const std::string& secret) {
  return "Basic " + delivery::base64_encode(id + ":" + secret);
}

}  // namespace

TEST_CASE("oauth2: attempts carry a bearer token from the token endpoint; a revoked one is replaced once; the secret is shown nowhere") {
  test::scenario s("endpoint_auth");
  auto server = std::make_shared<auth_server>();
  std::string secret = "cs-" + delivery::generate_secret().substr(6, 24);
  std::erase_if(secret, [](char c) { return c == '+' || c == '/' || c == '='; });  // base64's: form-encoded on the wire
  server->expected_basic = basic("walhook-client", secret);  // unreserved characters only: sent as they are
  relay::receiver_behaviour token_b, hook_b;
  token_b.respond = [server](const relay::received_request& r) { return server->token(r); };
  hook_b.respond = [server](const relay::received_request& r) { return server->hook(r); };
  s.rcv->set_behaviour("/token", token_b);
  s.rcv->set_behaviour("/hook", hook_b);
  auto walhook = s.start_walhook({"--admin-listen", "127.0.0.1:0"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  const auto secret_file = std::filesystem::temp_directory_path() / fmt::format("walhook-oauth-{}", ::getpid());
  std::ofstream(secret_file) << secret << "\n";
  std::string out;
  REQUIRE(test::run_walhook({"endpoint", "add", "--tenant", "acme", "--url", s.rcv->url("/hook"), "--oauth-token-url",
                             s.rcv->url("/token"), "--oauth-client-id", "walhook-client", "--oauth-client-secret-file",
                             secret_file.string(), "--oauth-scope", "events:write", "--database-url", s.url},
                            out) == 0);
  std::filesystem::remove(secret_file);
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex(R"(id: (\d+))")));
  const std::string id = m[1];

  // Twenty events, one token.
  for (int i = 0; i < 20; ++i) s.publish("acme", "order.paid", fmt::format(R"({{"n": {}}})", i));
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/hook").size() == 20; }, 20s), walhook.log_tail());
  CHECK(server->tokens_issued() == 1);
  for (const auto& r : s.received("/hook")) CHECK(r.header("Authorization") == "Bearer tok-1");
  {
    std::lock_guard lock(server->mutex);
    REQUIRE(server->token_bodies.size() == 1);
    CHECK(server->token_bodies[0] == "grant_type=client_credentials&scope=events%3Awrite");
  }

  // Revoked before it expired: the 401 fetches a new token and the attempt goes again with it —
  // delivered, no failed attempt written.
  server->revoke_on_next = true;
  s.publish("acme", "order.paid", R"({"n": 20})");
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/hook").size() == 21; }, 20s), walhook.log_tail());
  CHECK(server->tokens_issued() == 2);
  CHECK(s.received("/hook").back().header("Authorization") == "Bearer tok-2");
  CHECK(s.received("/hook", 401).size() == 1);
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1", {id}) == "0");

  // Shown as a fingerprint only: the CLI, the admin API, the log.
  REQUIRE(test::run_walhook({"status", "--database-url", s.url}, out) == 0);
  CHECK(out.find(secret) == std::string::npos);
  auto [code, body] = test::http_get(walhook.admin_port(), "/api/endpoints/" + id);
  REQUIRE(code == 200);
  CHECK(body.find(secret) == std::string::npos);
  CHECK(std::regex_search(body, std::regex(R"("oauth":\{"token_url":"http://127\.0\.0\.1:\d+/[^"]*","client_id":"walhook-client","client_secret":"sha256:[0-9a-f]{12}","scope":"events:write"\})")));
  CHECK(walhook.log().find(secret) == std::string::npos);

  // The wrong secret: the token endpoint refuses, the attempt fails with its words (and is retried).
  REQUIRE(test::run_walhook({"endpoint", "update", id, "--oauth-client-secret", "wrong", "--database-url", s.url}, out) == 0);
  const auto ev = s.publish("acme", "order.paid", R"({"n": 21})");
  const std::string failed = "SELECT last_error FROM walhook.deliveries WHERE event_id = $1::uuid AND status = 'pending'";
  REQUIRE_MESSAGE(test::eventually([&] { return !s.value(failed, {ev}).empty(); }, 20s), walhook.log_tail());
  CHECK(s.value(failed, {ev}) ==
        fmt::format("no OAuth2 access token for the endpoint: token endpoint 127.0.0.1 answered 401: invalid_client "
                    "(client authentication failed)"));
  CHECK(walhook.log().find("wrong") == std::string::npos);
  // Put right: the pending delivery goes with a token of the right client.
  REQUIRE(test::run_walhook({"endpoint", "update", id, "--oauth-client-secret", secret, "--database-url", s.url}, out) == 0);
  REQUIRE_MESSAGE(test::eventually([&] { return s.received("/hook").size() == 22; }, 30s), walhook.log_tail());
  CHECK(s.received("/hook").back().header("Authorization") == "Bearer tok-3");
  CHECK(walhook.stop() == 0);
}

TEST_CASE("oauth2: the CLI refuses settings that do not go together, and none removes them") {
  test::scenario s("endpoint_auth_cli");
  std::string out;
  auto add = [&](std::vector<std::string> flags) {
    std::vector<std::string> args{"endpoint", "add", "--tenant", "acme", "--database-url", s.url};
    args.insert(args.end(), flags.begin(), flags.end());
    return test::run_walhook(args, out);
  };
  const std::string hook = "https://hooks.example/in";
  for (const auto& [flags, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--url", hook, "--oauth-token-url", "https://auth.example/token"}, "go together"},
           {{"--url", hook, "--oauth-client-id", "c", "--oauth-client-secret", "topsecret"}, "go together"},
           {{"--url", hook, "--oauth-scope", "a"}, "--oauth-scope needs --oauth-token-url"},
           {{"--url", hook, "--oauth-token-url", "ftp://auth.example/token", "--oauth-client-id", "c",
             "--oauth-client-secret", "topsecret"},
            "--oauth-token-url must be an absolute http:// or https:// URL"},
           {{"--url", hook, "--oauth-token-url", "https://auth.example/token", "--oauth-client-id", "c",
             "--oauth-client-secret", "top\nsecret"},
            "--oauth-client-secret must be 1 to 1024 bytes without control characters"},
           {{"--url", hook, "--oauth-token-url", "https://auth.example/token", "--oauth-client-id", "c",
             "--oauth-client-secret", "topsecret", "--header-secret", "Authorization: Bearer x"},
            "OAuth2 sets the Authorization header"},
           {{"--url", "nats://127.0.0.1:4222/events", "--oauth-token-url", "https://auth.example/token",
             "--oauth-client-id", "c", "--oauth-client-secret", "topsecret"},
            "for http(s) endpoints"},
           {{"--url", hook, "--proxy", "socks5://proxy:1080"}, "--proxy must be direct, or http://host:port"}}) {
    INFO(fmt::format("{}", fmt::join(flags, " ")));
    CHECK(add(flags) != 0);
    CHECK(out.find(says) != std::string::npos);
    CHECK(out.find("topsecret") == std::string::npos);
  }
  CHECK(s.value("SELECT count(*) FROM walhook.endpoints") == "0");

  REQUIRE(add({"--url", hook, "--oauth-token-url", "https://auth.example/token", "--oauth-client-id", "c",
               "--oauth-client-secret", "topsecret", "--proxy", "direct"}) == 0);
  const std::string id = s.value("SELECT id FROM walhook.endpoints");
  CHECK(s.value("SELECT oauth_client_secret || ' ' || proxy FROM walhook.endpoints") == "topsecret direct");
  // An update keeps what it does not name, checks the whole, and none removes all four.
  CHECK(test::run_walhook({"endpoint", "update", id, "--header", "Authorization: Basic x", "--database-url", s.url}, out) != 0);
  CHECK(out.find("OAuth2 sets the Authorization header") != std::string::npos);
  CHECK(test::run_walhook({"endpoint", "update", id, "--url", "amqp://guest:guest@127.0.0.1:5672/?routing_key=k",
                           "--database-url", s.url},
                          out) != 0);
  CHECK(out.find("for http(s) endpoints") != std::string::npos);
  // none for one of the three would leave the others alone: refused.
  CHECK(test::run_walhook({"endpoint", "update", id, "--oauth-client-secret", "none", "--database-url", s.url}, out) != 0);
  CHECK(out.find("go together") != std::string::npos);
  REQUIRE(test::run_walhook({"endpoint", "update", id, "--proxy", "HTTP://Proxy.Internal:3128", "--database-url", s.url},
                            out) == 0);
  REQUIRE(test::run_walhook({"endpoint", "update", id, "--oauth-token-url", "none", "--proxy", "none", "--database-url", s.url},
                            out) == 0);
  CHECK(s.value("SELECT count(*) FROM walhook.endpoints WHERE oauth_token_url IS NULL AND oauth_client_id IS NULL AND "
                "oauth_client_secret IS NULL AND oauth_scope IS NULL AND proxy IS NULL") == "1");
  // The table refuses a half-set client written by hand.
  CHECK_THROWS(s.db.exec("UPDATE walhook.endpoints SET oauth_client_id = 'x'"));
}
