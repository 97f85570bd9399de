// Endpoint URLs (pure): what parse_url accepts and how it normalises, and the helpers the
// transport re-applies to a hand-built http_target.

#include "delivery/transport.hpp"
#include "delivery/url.hpp"

#include <doctest/doctest.h>

#include <string_view>

using namespace walhook::delivery;

TEST_CASE("url: parse_url accepts http(s) URLs and normalises them") {
  struct row {
    std::string_view url;
    http_target want;
  };
  const row rows[] = {
      {"http://example.com", {false, "example.com", "80", "/"}},
      {"https://example.com", {true, "example.com", "443", "/"}},
      {"HTTPS://Hooks.Example.COM:8443/a/b?c=d&e=%20f#frag", {true, "hooks.example.com", "8443", "/a/b?c=d&e=%20f"}},
      {"http://10.0.0.1:8080/x", {false, "10.0.0.1", "8080", "/x"}},
      {"http://[::1]:8080/x", {false, "::1", "8080", "/x"}},
      {"https://[2001:DB8::1]/", {true, "2001:db8::1", "443", "/"}},
      {"http://example.com:/p", {false, "example.com", "80", "/p"}},
      {"http://example.com?q=1", {false, "example.com", "80", "/?q=1"}},
      {"http://example.com:00080/", {false, "example.com", "80", "/"}},
      {"http://my_host.internal/hook", {false, "my_host.internal", "80", "/hook"}},
  };
  for (const auto& r : rows) {
    CAPTURE(r.url);
    const auto t = parse_url(r.url);
    REQUIRE(t.has_value());
    CHECK(*t == r.want);
  }
}

TEST_CASE("url: parse_url refuses what is not an absolute http(s) URL with a host") {
  for (std::string_view bad : {
           "",
           "example.com/hook",
           "//example.com/hook",
           "/hook",
           "ftp://example.com/",
           "ws://example.com/",
           "mailto:ops@example.com",
           "http:/hook",
           "http://",
           "http:///hook",
           "http://user:pw@example.com/",
           "http://user@example.com/",
           "http://example.com:0/",
           "http://example.com:65536/",
           "http://example.com:99999999999/",
           "http://example.com:80a/",
           "http://[::1/",
           "http://[v7.fe]/",
           "http://exa mple.com/",
           "http://example.com/a b",
           "http://ex%0Dample.com/",  // percent-decodes to a CR
           "http://ex%2Fample.com/",  // percent-decodes to a slash
       }) {
    CAPTURE(bad);
    const auto t = parse_url(bad);
    REQUIRE(t.has_error());
    CHECK(t.error() == transport_errc::invalid_url);
  }
  // Percent-encoded letters decode to an ordinary host name.
  const auto decoded = parse_url("http://ex%41mple.com/");
  REQUIRE(decoded.has_value());
  CHECK(decoded->host == "example.com");
}

TEST_CASE("url: parse_port takes decimal 1-65535 only") {
  CHECK(parse_port("1") == 1);
  CHECK(parse_port("80") == 80);
  CHECK(parse_port("00080") == 80);
  CHECK(parse_port("65535") == 65535);
  for (std::string_view bad : {"", "0", "00", "65536", "99999999999", "-1", "+80", "80a", " 80", "0x50"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_port(bad).has_value());
  }
}

TEST_CASE("url: is_valid_target accepts origin-form of printable ASCII only") {
  for (std::string_view good : {"/", "/hook", "/a/b?c=d&e=%20f", "/~x!$&'()*+,;=:@"}) {
    CAPTURE(good);
    CHECK(is_valid_target(good));
  }
  using namespace std::string_view_literals;
  for (std::string_view bad : {""sv, "hook"sv, "*"sv, "http://example.com/"sv, "/a b"sv, "/a\tb"sv, "/a\r\nHost: x"sv,
                               "/\x7f"sv, "/a\0b"sv}) {
    CAPTURE(bad);
    CHECK_FALSE(is_valid_target(bad));
  }
}

TEST_CASE("url: host_header brackets IPv6 literals and omits the default port") {
  CHECK(host_header({false, "example.com", "80", "/"}) == "example.com");
  CHECK(host_header({true, "example.com", "443", "/"}) == "example.com");
  CHECK(host_header({false, "example.com", "443", "/"}) == "example.com:443");
  CHECK(host_header({true, "example.com", "80", "/"}) == "example.com:80");
  CHECK(host_header({false, "10.0.0.1", "8080", "/"}) == "10.0.0.1:8080");
  CHECK(host_header({true, "2001:db8::1", "443", "/"}) == "[2001:db8::1]");
  CHECK(host_header({false, "::1", "8080", "/"}) == "[::1]:8080");
}

// ---------------------------------------------------------------------------------------------
// redact_url and cap_text (issue 9 #8): what logs, last_error and the CLI show of a URL

TEST_CASE("url: redact_url hides userinfo, query and fragment") {
  struct row {
    std::string_view url;
    std::string_view shown;
  };
  const row rows[] = {
      // Accepted by parse_url: rebuilt from its parts.
      {"https://hooks.example.com/in", "https://hooks.example.com/in"},
      {"https://hooks.example.com/in?token=s3cret", "https://hooks.example.com/in?***"},
      {"https://hooks.example.com:8443/in?a=1&token=s3cret#frag", "https://hooks.example.com:8443/in?***#***"},
      {"http://[::1]:8080/x#s3cret", "http://[::1]:8080/x#***"},
      {"HTTPS://Hooks.Example.COM", "https://hooks.example.com/"},
      // Refused by parse_url (userinfo), parsed by Boost.URL: the text fallback.
      {"https://admin:s3cret@hooks.example.com/in", "https://***@hooks.example.com/in"},
      {"https://admin:s3cret@hooks.example.com/in?token=s3cret", "https://***@hooks.example.com/in?***"},
      {"https://:s3cret@hooks.example.com", "https://***@hooks.example.com"},
      // Not a URL Boost.URL can parse.
      {"https://admin:s3 cret@hooks.example.com/in", "https://***@hooks.example.com/in"},
      {"https://ad@min:s3cret@hooks.example.com/", "https://***@hooks.example.com/"},
      {"https://admin:pa/ss@hooks.example.com/", "https://***@hooks.example.com/"},
      {"https://admin:pa?ss@hooks.example.com/", "https://***"},   // where is the host? show none
      {"https://admin:pa#ss@hooks.example.com/", "https://***"},
      {"https://hooks.example.com/ in?token=s3cret", "https://hooks.example.com/\u2026?***"},
      {"ftp://u:s3cret@files.example.com/", "ftp://***@files.example.com/"},
      {"u:s3cret@hooks.example.com", "***@hooks.example.com"},
      {"not a url?token=s3cret", "not%20a%20url?***"},
      {"https://x/\r\n{\"level\":\"error\"}", "https://x/\u2026"},
      {"https://h\xc3\xa9.example/", "https://h%C3%A9.example/"},
      {"", ""},
  };
  for (const auto& r : rows) {
    CAPTURE(r.url);
    CHECK(redact_url(r.url) == r.shown);
  }
}

TEST_CASE("url: redact_url never shows a secret and is bounded, whatever the input") {
  const std::string secret = "s3cretpassw0rd";
  const std::string inputs[] = {
      "https://admin:" + secret + "@hooks.example.com/in",
      "https://hooks.example.com/in?token=" + secret,
      "https://hooks.example.com/in#" + secret,
      "https://admin:" + secret + "@hooks.example.com:99999/in?token=" + secret,
      "https://" + std::string(100 * 1024, 'a') + ":" + secret + "@h/",
      "https://admin:" + secret + "@" + std::string(100 * 1024, 'h') + "/?token=" + secret,
      "https://hooks.example.com/" + std::string(100 * 1024, 'p') + "?token=" + secret,
  };
  for (const auto& in : inputs) {
    CAPTURE(in.substr(0, 80));
    const auto shown = redact_url(in);
    CHECK(shown.find(secret) == std::string::npos);
    CHECK(shown.find("admin") == std::string::npos);
    CHECK(shown.size() <= max_shown_url);
    CHECK(shown.find_first_of(std::string_view("\r\n\0", 3)) == std::string::npos);
  }
  // A 100 KB URL is shown as its first max_shown_url characters, ending in "..." (a long path
  // is hidden anyway; a long host is cut).
  const auto long_host = "https://" + std::string(100 * 1024, 'h') + ".example/in";
  const auto shown = redact_url(long_host);
  CHECK(shown.size() == max_shown_url);
  CHECK(shown.starts_with("https://hhh"));
  CHECK(shown.ends_with("..."));
  CHECK(redact_url("https://hooks.example.com/" + std::string(100 * 1024, 'p')) == "https://hooks.example.com/\u2026");
}

// Capability URLs (issue 19 #9): the secret is the path itself. The examples have the shape of
// each service's documented webhook URL, with made-up secrets.
TEST_CASE("url: redact_url keeps the first path segment of a capability URL and hides the rest") {
  struct row {
    std::string_view url;
    std::string_view shown;
    std::string_view secret;  ///< a part that must not show
  };
  const row rows[] = {
      {"https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
       "https://hooks.slack.com/services/\u2026", "XXXXXXXXXXXXXXXXXXXXXXXX"},
      {"https://discord.com/api/webhooks/123456789012345678/aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789-_aBcDeFgHiJkLmNoP",
       "https://discord.com/api/\u2026", "aBcDeFgHiJkLmNoPqRsTuVwXyZ"},
      {"https://acme.webhook.office.com/webhookb2/0a1b2c3d-1111-2222-3333-444455556666@7777/IncomingWebhook/"
       "0123456789abcdef0123456789abcdef/88889999-aaaa-bbbb-cccc-ddddeeeeffff",
       "https://acme.webhook.office.com/webhookb2/\u2026", "0123456789abcdef0123456789abcdef"},
      {"https://hooks.zapier.com/hooks/catch/1234567/abcdef1/", "https://hooks.zapier.com/hooks/\u2026", "abcdef1"},
      {"https://chat.googleapis.com/v1/spaces/AAAAx1y2z3/messages?key=AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI&token=t0k3n",
       "https://chat.googleapis.com/v1/\u2026?***", "AIzaSyDdI0hCZtE6vySjMm"},
      {"https://maker.ifttt.com/trigger/order_paid/with/key/dQw4w9WgXcQ-abcdEFGH",
       "https://maker.ifttt.com/trigger/\u2026", "dQw4w9WgXcQ-abcdEFGH"},
      // The first segment is the secret: hidden too (too long, upper case, digits).
      {"https://webhook.site/5e8a2b1c-4f3d-4a6b-9c8d-7e6f5a4b3c2d", "https://webhook.site/\u2026",
       "5e8a2b1c-4f3d-4a6b-9c8d-7e6f5a4b3c2d"},
      {"https://hook.eu1.make.com/abcdefghij0123456789klmnopqrstuv", "https://hook.eu1.make.com/\u2026",
       "abcdefghij0123456789klmnopqrstuv"},
      {"https://mattermost.example.com/hooks/xxx-generatedkey-xxx", "https://mattermost.example.com/hooks/\u2026",
       "generatedkey"},
      {"https://example.com/Tk9PQjEy", "https://example.com/\u2026", "Tk9PQjEy"},
      {"https://example.com/a1b2c3", "https://example.com/\u2026", "a1b2c3"},
      // What stays: a word-like first segment, and nothing after it.
      {"https://api.example.com/v2/", "https://api.example.com/v2/", ""},
      {"https://api.example.com/webhooks", "https://api.example.com/webhooks", ""},
      {"http://127.0.0.1:8080/walhook/customer-7", "http://127.0.0.1:8080/walhook/\u2026", "customer-7"},
      // Userinfo and an unparseable URL: the same rule on the text fallback.
      {"https://admin:s3cret@hooks.slack.com/services/T0/B0/XXXXXXXX", "https://***@hooks.slack.com/services/\u2026",
       "XXXXXXXX"},
      {"https://hooks.slack.com/services/T0/B0/XX XX?x=1", "https://hooks.slack.com/services/\u2026?***", "XX"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.url);
    const auto shown = redact_url(r.url);
    CHECK(shown == r.shown);
    if (!r.secret.empty()) CHECK(shown.find(r.secret) == std::string::npos);
  }
}

TEST_CASE("url: cap_text keeps short texts and cuts long ones on a UTF-8 boundary") {
  CHECK(cap_text("short") == "short");
  CHECK(cap_text(std::string(max_error_text, 'x')) == std::string(max_error_text, 'x'));
  const auto cut = cap_text(std::string(100 * 1024, 'x'));
  CHECK(cut.size() == max_error_text);
  CHECK(cut.ends_with("..."));
  // "é" is two bytes: a cut that would split it backs up before it.
  CHECK(cap_text("ab\xc3\xa9zzzz", 6) == "ab...");
  CHECK(cap_text("abc\xc3\xa9zzzz", 6) == "abc...");
  CHECK(cap_text("abcdef", 2) == "..");
}
