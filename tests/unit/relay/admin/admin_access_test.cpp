// The admin API's access rules (relay/admin/api.hpp, docs/api.md "Access"): pure checks, as
// tables; relay/main's refusals of --admin-listen/--admin-token-file.

#include "relay/admin/api.hpp"
#include "relay/admin/http_status.hpp"
#include "relay/engine/options.hpp"
#include "relay/operations/blocking_db.hpp"
#include "tests/support/scripted_http_server.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>

using namespace walhook::relay;

namespace {

api_request request(std::string method, std::string host = "localhost:9187", std::string authorization = "",
                    std::string content_type = "") {
  api_request r;
  r.method = std::move(method);
  r.target = "/api/overview";
  r.host = std::move(host);
  r.authorization = std::move(authorization);
  r.content_type = std::move(content_type);
  return r;
}

unsigned status_of(const admin_access& a, const api_request& r) {
  auto denied = check_request(a, r);
  return denied ? denied->status : 0;
}

std::string temp_file(const std::string& content) {
  char name[] = "/tmp/walhook_token_XXXXXX";
  int fd = ::mkstemp(name);
  REQUIRE(fd >= 0);
  std::ofstream(name) << content;
  return name;
}

}  // namespace

TEST_CASE("admin access: loopback Host names") {
  for (const char* h : {"localhost", "localhost:9187", "LOCALHOST:1", "127.0.0.1", "127.0.0.1:9187", "127.1.2.3:80",
                        "[::1]:9187", "[::1]", "app.localhost:8080", "localhost."})
    CHECK_MESSAGE(is_loopback_host(h), h);
  for (const char* h : {"", "evil.example", "evil.example:9187", "10.0.0.1:9187", "[2001:db8::1]:80",
                        "localhost.evil.example", "127.0.0.1.evil.example"})
    CHECK_MESSAGE(!is_loopback_host(h), h);
}

TEST_CASE("admin access: without a token, Host decides (DNS rebinding); POST needs JSON") {
  admin_access none;
  CHECK(status_of(none, request("GET")) == 0);
  CHECK(status_of(none, request("GET", "attacker.example:9187")) == 403);
  CHECK(status_of(none, request("POST", "localhost", "", "application/json")) == 0);
  CHECK(status_of(none, request("POST", "localhost", "", "application/json; charset=utf-8")) == 0);
  CHECK(status_of(none, request("POST", "localhost", "", "text/plain")) == 415);
  CHECK(status_of(none, request("POST", "localhost", "", "application/x-www-form-urlencoded")) == 415);
  CHECK(status_of(none, request("POST", "localhost")) == 415);
}

TEST_CASE("admin access: with a token, the bearer token decides (any Host)") {
  admin_access tok{.token = "s3cret-token", .loopback_only = false};
  CHECK(status_of(tok, request("GET", "walhook.internal:9187", "Bearer s3cret-token")) == 0);
  CHECK(status_of(tok, request("GET", "walhook.internal:9187", "bearer s3cret-token")) == 0);
  CHECK(status_of(tok, request("GET", "walhook.internal:9187")) == 401);
  CHECK(status_of(tok, request("GET", "localhost", "Bearer s3cret-toke")) == 401);
  CHECK(status_of(tok, request("GET", "localhost", "Bearer s3cret-token2")) == 401);
  CHECK(status_of(tok, request("GET", "localhost", "Basic czNjcmV0LXRva2Vu")) == 401);
  CHECK(status_of(tok, request("GET", "localhost", "Bearer ")) == 401);
  CHECK(status_of(tok, request("POST", "x", "Bearer s3cret-token", "text/plain")) == 415);
  CHECK(status_of(tok, request("POST", "x", "Bearer wrong", "application/json")) == 401);  // 401 first
  auto denied = check_request(tok, request("GET"));
  REQUIRE(denied);
  CHECK(denied->body.find("\"error\"") != std::string::npos);
  CHECK(denied->body.find("s3cret") == std::string::npos);
}

TEST_CASE("admin access: --admin-listen and --admin-token-file checks") {
  run_options o;
  o.admin_listen = "localhost:9187";
  CHECK(check_admin_access(o).loopback_only);
  o.admin_listen = "127.0.0.1:0";
  CHECK(check_admin_access(o).token.empty());
  o.admin_listen = "[::1]:9187";
  CHECK(check_admin_access(o).loopback_only);
  o.admin_listen = "0.0.0.0:9187";
  try {
    check_admin_access(o);
    FAIL("a non-loopback address without a token must be refused");
  } catch (const cli_error& e) {
    CHECK(std::string(e.what()).find("--admin-token-file") != std::string::npos);
  }
  o.admin_listen = ":9187";
  CHECK_THROWS_AS(check_admin_access(o), cli_error);
  const auto file = temp_file("  tok-0123456789abcdef\n");
  o.admin_token_file = file;
  auto a = check_admin_access(o);
  CHECK(a.token == "tok-0123456789abcdef");
  CHECK_FALSE(a.loopback_only);
  CHECK(token_fingerprint(a.token).starts_with("sha256:"));
  CHECK(token_fingerprint(a.token).size() == 7 + 12);
  const auto empty = temp_file(" \n\n");
  o.admin_token_file = empty;
  CHECK_THROWS_WITH_AS(check_admin_access(o), doctest::Contains("is empty"), cli_error);
  o.admin_token_file = "/nonexistent/walhook-token";
  CHECK_THROWS_WITH_AS(check_admin_access(o), doctest::Contains("cannot read"), cli_error);
  std::remove(file.c_str());
  std::remove(empty.c_str());
}

TEST_CASE("admin access: --admin-listen HOST:PORT is split strictly") {
  CHECK(split_listen("localhost:9187").host == "localhost");
  CHECK(split_listen("localhost:9187").port == 9187);
  CHECK(split_listen("[::1]:9187").host == "::1");
  CHECK(split_listen("[::1]:9187").port == 9187);
  CHECK(split_listen(":9187").host.empty());
  CHECK(split_listen("127.0.0.1:0").port == 0);  // any free port
  CHECK(split_listen("127.0.0.1:65535").port == 65535);
  // "localhost:80x" once bound port 80 (std::stoul stopped at the x).
  for (const char* bad : {"localhost:80x", "localhost:", "localhost:-1", "localhost:+80", "localhost:65536",
                          "localhost:0x50", "localhost: 80", "localhost:999999"})
    CHECK_THROWS_WITH_AS(split_listen(bad), doctest::Contains("is not a number from 0 to 65535"), cli_error);
  CHECK_THROWS_WITH_AS(split_listen("[::1]"), doctest::Contains("needs HOST:PORT"), cli_error);
  CHECK_THROWS_WITH_AS(split_listen("localhost"), doctest::Contains("needs HOST:PORT"), cli_error);
  CHECK_THROWS_WITH_AS(split_listen("::1:9187"), doctest::Contains("brackets"), cli_error);
  CHECK_THROWS_WITH_AS(split_listen("[::1:9187"), doctest::Contains("unclosed"), cli_error);
  run_options o;
  o.admin_listen = "localhost:80x";
  CHECK_THROWS_WITH_AS(check_admin_access(o), doctest::Contains("--admin-listen localhost:80x"), cli_error);
  // A zero-byte token file is empty, like a blank one.
  const auto zero = temp_file("");
  o.admin_listen = "localhost:9187";
  o.admin_token_file = zero;
  CHECK_THROWS_WITH_AS(check_admin_access(o), doctest::Contains("is empty"), cli_error);
  std::remove(zero.c_str());
}

TEST_CASE("admin API: a database error's status comes from its SQLSTATE, not its message") {
  CHECK(status_of_sqlstate("57014") == 504);  // statement timeout
  CHECK(status_of_sqlstate("22007") == 400);  // invalid_datetime_format: the caller's since/until
  CHECK(status_of_sqlstate("22P02") == 400);  // invalid_text_representation
  CHECK(status_of_sqlstate("23505") == 409);  // a concurrent change
  for (const char* server : {"42501", "53100", "57P01", "40001", "40P01", "42P01", "XX000", "08006", ""})
    CHECK(status_of_sqlstate(server) == 503);
}

TEST_CASE("admin API: X-Walhook-Operator is percent-decoded, cleaned and capped for the log") {
  CHECK(operator_of("alice") == "alice");
  CHECK(operator_of("Zo%C3%AB%20K.") == "Zoë K.");
  CHECK(operator_of("50%") == "50%");    // not an escape: kept
  CHECK(operator_of("%zz") == "%zz");
  CHECK(operator_of("a%0Ab\x1b[31m") == "ab[31m");  // no line breaks or escapes in the log
  CHECK(operator_of(std::string(7000, 'a')) == std::string(100, 'a') + "…");
  std::string many;
  for (int i = 0; i < 150; ++i) many += "%C3%AB";
  std::string hundred;
  for (int i = 0; i < 100; ++i) hundred += "ë";
  CHECK(operator_of(many) == hundred + "…");
}

TEST_CASE("admin access: a token shorter than 16 bytes is refused, naming the flag") {
  run_options o;
  o.admin_listen = "localhost:9187";
  const auto short_token = temp_file("x\n");
  o.admin_token_file = short_token;
  CHECK_THROWS_WITH_AS(check_admin_access(o), doctest::Contains("--admin-token-file"), cli_error);
  CHECK_THROWS_WITH_AS(check_admin_access(o), doctest::Contains("at least 16"), cli_error);
  const auto fifteen = temp_file("   0123456789abcde   \n");  // 15 bytes once trimmed
  o.admin_token_file = fifteen;
  CHECK_THROWS_WITH_AS(check_admin_access(o), doctest::Contains("has 15 bytes"), cli_error);
  const auto sixteen = temp_file("0123456789abcdef\n");
  o.admin_token_file = sixteen;
  CHECK(check_admin_access(o).token == "0123456789abcdef");
  for (const auto& f : {short_token, fifteen, sixteen}) std::remove(f.c_str());
}

TEST_CASE("admin access: --admin-listen is resolved once, to the address the listener binds") {
  run_options o;
  o.admin_listen = "localhost:0";
  auto a = check_admin_access(o);
  CHECK(a.bind_address == "127.0.0.1");  // a name: its first IPv4 address
  CHECK(a.loopback_only);
  CHECK(a.port == 0);
  o.admin_listen = "[::1]:9187";
  a = check_admin_access(o);
  CHECK(a.bind_address == "::1");
  CHECK(a.port == 9187);
  const auto token = temp_file("0123456789abcdef0123\n");
  o.admin_token_file = token;
  o.admin_listen = ":9187";
  a = check_admin_access(o);
  CHECK(a.bind_address == "::");
  CHECK_FALSE(a.loopback_only);
  o.admin_listen = "no-such-host.invalid:9187";
  CHECK_THROWS_WITH_AS(check_admin_access(o), doctest::Contains("cannot resolve"), cli_error);
  std::remove(token.c_str());
}

TEST_CASE("admin access: --admin-tls-cert and --admin-tls-key, both or neither, loaded before the start") {
  const auto id = walhook::test::make_test_certificate("IP:127.0.0.1,DNS:localhost");
  const auto other = walhook::test::make_test_certificate("DNS:localhost");
  const auto cert = temp_file(id.certificate_pem), key = temp_file(id.private_key_pem),
             other_key = temp_file(other.private_key_pem);
  run_options o;
  o.admin_listen = "127.0.0.1:0";
  CHECK(check_admin_access(o).tls == nullptr);
  o.admin_tls_cert = cert;
  CHECK_THROWS_WITH_AS(check_admin_access(o), doctest::Contains("--admin-tls-cert needs --admin-tls-key"), cli_error);
  o.admin_tls_cert.clear();
  o.admin_tls_key = key;
  CHECK_THROWS_WITH_AS(check_admin_access(o), doctest::Contains("--admin-tls-key needs --admin-tls-cert"), cli_error);
  o.admin_tls_cert = cert;
  CHECK(check_admin_access(o).tls != nullptr);
  o.admin_tls_key = other_key;
  CHECK_THROWS_WITH_AS(check_admin_access(o), doctest::Contains("is not the key of --admin-tls-cert"), cli_error);
  o.admin_tls_key = cert;  // a certificate where the key should be
  CHECK_THROWS_WITH_AS(check_admin_access(o), doctest::Contains("--admin-tls-key"), cli_error);
  o.admin_tls_key = key;
  o.admin_tls_cert = "/nonexistent/cert.pem";
  CHECK_THROWS_WITH_AS(check_admin_access(o), doctest::Contains("--admin-tls-cert /nonexistent/cert.pem"), cli_error);
  for (const auto& f : {cert, key, other_key}) std::remove(f.c_str());
}

TEST_CASE("admin access: failed authentications are logged at most once per interval, counting the rest") {
  using namespace std::chrono_literals;
  auth_failure_log failures(10s);
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  CHECK(failures.failed(t0) == 1);  // the first one logs at once
  for (int i = 1; i <= 500; ++i) CHECK(failures.failed(t0 + i * 10ms) == 0);  // a flood: nothing
  CHECK(failures.failed(t0 + 10s) == 501);  // the next line counts them, and itself
  CHECK(failures.failed(t0 + 12s) == 0);
  CHECK(failures.failed(t0 + 25s) == 2);
  CHECK(failures.failed(t0 + 1h) == 1);
}

TEST_CASE("admin API: X-Walhook-Operator drops C1 and bidirectional controls; bytes not UTF-8 become U+FFFD") {
  CHECK(operator_of("Zo%C3%AB") == "Zoë");
  CHECK(operator_of("eve%E2%80%AEnimda") == "evenimda");  // U+202E RIGHT-TO-LEFT OVERRIDE
  CHECK(operator_of("a%E2%81%A6b%E2%81%A9c") == "abc");  // U+2066, U+2069 isolates
  CHECK(operator_of("a%E2%80%8Fb") == "ab");  // U+200F RIGHT-TO-LEFT MARK
  CHECK(operator_of("a%C2%85b%C2%9Bc") == "abc");  // NEL, CSI (C1)
  CHECK(operator_of("a%7Fb") == "ab");
  // The UTF-8 walk checks every continuation byte: "%C3(" is not "Ã" swallowing the "(".
  CHECK(operator_of("x%C3(y") == "x\xEF\xBF\xBD(y");
  CHECK(operator_of("%E2%82") == "\xEF\xBF\xBD\xEF\xBF\xBD");  // truncated
  CHECK(operator_of("%C0%AF") == "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
  CHECK(operator_of("%ED%A0%80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  CHECK(operator_of("%F0%9F%98%80") == "😀");
}
