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
      {"https://hooks.example.com/ in?token=s3cret", "https://hooks.example.com/%20in?***"},
      {"ftp://u:s3cret@files.example.com/", "ftp://***@files.example.com/"},
      {"u:s3cret@hooks.example.com", "***@hooks.example.com"},
      {"not a url?token=s3cret", "not%20a%20url?***"},
      {"https://x/\r\n{\"level\":\"error\"}", "https://x/%0D%0A{\"level\":\"error\"}"},
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
  // A 100 KB URL is shown as its first max_shown_url characters, ending in "...".
  const auto long_url = "https://hooks.example.com/" + std::string(100 * 1024, 'p');
  const auto shown = redact_url(long_url);
  CHECK(shown.size() == max_shown_url);
  CHECK(shown.starts_with("https://hooks.example.com/ppp"));
  CHECK(shown.ends_with("..."));
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
