// The inbox's values (relay/inbox/schemes.hpp, issue 21): what a source's id, type and order key
// sources give (strings, numbers as written, refusals for anything else), their bounds, the
// reserved "walhook." types, the JSON check of authenticated bodies, and the parsing of a
// source's settings (schemes, value sources, check_source), headers and the fingerprint.

#include "tests/unit/relay/inbox/inbox_fixture.hpp"

#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <string>

using namespace walhook;
using namespace walhook::test::inbox;

namespace {

const std::string secret = "a-generic-secret";

/// A GitHub-signed request (the simplest scheme: the body alone) with this body.
request signed_request(std::string body) {
  request r;
  r.set("X-Hub-Signature-256", "sha256=" + to_hex(hmac_raw(secret, body)));
  r.set("X-GitHub-Delivery", "d-1").set("X-GitHub-Event", "push");
  r.body = std::move(body);
  return r;
}

source_config source_with(const char* id_from = nullptr, const char* type_from = nullptr,
                          const char* order_key_from = nullptr) {
  source_config s;
  s.name = "repo";
  s.kind = scheme::github;
  s.secrets = {secret};
  if (id_from) s.id_from = parse_value_source(id_from);
  if (type_from) s.type_from = parse_value_source(type_from);
  if (order_key_from) s.order_key_from = parse_value_source(order_key_from);
  return s;
}

const auto now = at_unix(1'800'000'000);

}  // namespace

TEST_CASE("values: a string gives the string, a number its JSON text as written") {
  struct row {
    const char* body;
    const char* expected;
  };
  for (const auto& t : {row{R"({"d":{"id":"evt_1"}})", "evt_1"},
                        row{R"({"d":{"id":"caf\u00e9 \"q\""}})", "café \"q\""},
                        row{R"({"d":{"id":12345}})", "12345"},
                        row{R"({"d":{"id":-0}})", "-0"},
                        row{R"({"d":{"id":1E2 }})", "1E2"},
                        row{R"({"d":{"id":1.50}})", "1.50"},
                        row{R"({"d":{"id":123456789012345678901234567890}})", "123456789012345678901234567890"},
                        row{R"({"d":{"id":1e999}})", "1e999"}}) {
    CAPTURE(t.body);
    const auto ok = run(source_with("/d/id"), signed_request(t.body), now);
    REQUIRE(ok.has_value());
    CHECK(ok->event_id == t.expected);
  }
  // RFC 6901 escapes: "~1" is "/", "~0" is "~"; arrays by index.
  const auto escaped = run(source_with("/a~1b/~0c", "/list/1"), signed_request(R"({"a/b":{"~c":"x"},"list":["p","q"]})"), now);
  REQUIRE(escaped.has_value());
  CHECK(escaped->event_id == "x");
  CHECK(escaped->event_type == "q");
}

TEST_CASE("values: the id must be a string or number; else no_event_id") {
  for (const char* body : {R"({"d":{}})", R"({"d":{"id":{"x":1}}})", R"({"d":{"id":[1]}})", R"({"d":{"id":null}})",
                           R"({"d":{"id":true}})", R"({"d":"id"})", R"([1,2])", R"("just a string")", R"(42)"}) {
    CAPTURE(body);
    check_refused(run(source_with("/d/id"), signed_request(body), now), refusal::no_event_id, source_with("/d/id"));
  }
  // A header source that is absent.
  check_refused(run(source_with("header:X-Event-Id"), signed_request("{}"), now), refusal::no_event_id,
                source_with("header:X-Event-Id"));
}

TEST_CASE("values: the type must be a string or number; else bad_value") {
  for (const char* body : {R"({})", R"({"t":{}})", R"({"t":[]})", R"({"t":null})", R"({"t":false})"}) {
    CAPTURE(body);
    check_refused(run(source_with(nullptr, "/t"), signed_request(body), now), refusal::bad_value,
                  source_with(nullptr, "/t"));
  }
  const auto ok = run(source_with(nullptr, "/t"), signed_request(R"({"t":7})"), now);
  REQUIRE(ok.has_value());
  CHECK(ok->event_type == "7");
}

TEST_CASE("values: the order key is optional — anything but a string or number is no key") {
  struct row {
    const char* body;
    std::optional<std::string> expected;
  };
  for (const auto& t : {row{R"({"k":"cust_1"})", "cust_1"}, row{R"({"k":99})", "99"}, row{R"({})", std::nullopt},
                        row{R"({"k":null})", std::nullopt}, row{R"({"k":{"a":1}})", std::nullopt},
                        row{R"({"k":[1]})", std::nullopt}, row{R"({"k":""})", std::nullopt}}) {
    CAPTURE(t.body);
    const auto ok = run(source_with(nullptr, nullptr, "/k"), signed_request(t.body), now);
    REQUIRE(ok.has_value());
    CHECK(ok->order_key == t.expected);
  }
  // From a header.
  const auto by_header = run(source_with(nullptr, nullptr, "header:X-GitHub-Event"), signed_request("{}"), now);
  REQUIRE(by_header.has_value());
  CHECK(by_header->order_key == "push");
  // No order key unless the source names one.
  CHECK_FALSE(run(source_with(), signed_request(R"({"k":"x"})"), now)->order_key.has_value());
}

TEST_CASE("values: bounds — ids and types 1 to 256 bytes, order keys up to 1024, UTF-8, no control characters") {
  struct row {
    const char* field;
    std::string value;
    bool accepted;
  };
  for (const auto& t : {row{"id", std::string(256, 'i'), true}, row{"id", std::string(257, 'i'), false},
                        row{"id", "", false}, row{"id", "a\\u0000b", false}, row{"id", "line\\nbreak", false},
                        row{"type", std::string(256, 't'), true}, row{"type", std::string(257, 't'), false},
                        row{"type", "", false}, row{"type", "tab\\there", false},
                        row{"key", std::string(1024, 'k'), true}, row{"key", std::string(1025, 'k'), false},
                        row{"key", "\\u007f", false}}) {
    CAPTURE(t.field);
    CAPTURE(t.value.size());
    const auto source = source_with("/id", "/type", "/key");
    std::map<std::string, std::string> fields{{"id", "i"}, {"type", "t"}, {"key", "k"}};
    fields[t.field] = t.value;
    const auto body = "{\"id\":\"" + fields["id"] + "\",\"type\":\"" + fields["type"] + "\",\"key\":\"" + fields["key"] + "\"}";
    const auto r = run(source, signed_request(body), now);
    if (t.accepted) {
      CHECK(r.has_value());
    } else {
      check_refused(r, refusal::bad_value, source);
    }
  }
  // A header value that is not UTF-8 (a JSON string always is).
  auto latin1 = signed_request("{}");
  latin1.set("X-GitHub-Delivery", "caf\xe9");
  check_refused(run(source_with(), latin1, now), refusal::bad_value, source_with());
}

TEST_CASE("values: types starting with walhook. (any case) are walhook's own and refused") {
  for (const char* type : {"walhook.endpoint.disabled", "WALHOOK.x", "Walhook.delivery.dead", "walhook."}) {
    CAPTURE(type);
    auto r = signed_request("{}").set("X-GitHub-Event", type);
    check_refused(run(source_with(), r, now), refusal::bad_value, source_with());
  }
  for (const char* type : {"walhooks.x", "walhook", "my.walhook.event", "walhook_x"}) {
    CAPTURE(type);
    auto r = signed_request("{}").set("X-GitHub-Event", type);
    CHECK(run(source_with(), r, now).has_value());
  }
}

TEST_CASE("values: overrides replace the scheme's defaults") {
  const auto body = R"({"delivery":"body-id","kind":"body-type"})";
  const auto defaults = run(source_with(), signed_request(body), now);
  REQUIRE(defaults.has_value());
  CHECK(defaults->event_id == "d-1");
  CHECK(defaults->event_type == "push");
  const auto overridden = run(source_with("/delivery", "/kind"), signed_request(body), now);
  REQUIRE(overridden.has_value());
  CHECK(overridden->event_id == "body-id");
  CHECK(overridden->event_type == "body-type");
  auto r = signed_request(body).set("x-request-id", "hdr-id");
  const auto by_header = run(source_with("header:X-Request-Id"), r, now);
  REQUIRE(by_header.has_value());
  CHECK(by_header->event_id == "hdr-id");
}

TEST_CASE("the body must be JSON, checked only once the signature passed") {
  for (const char* body : {"", " ", "not json", "{", "{} {}", "[1,]", "{\"a\":tru}", "{\"a\":01}", "\"\xff\"",
                           // A number beyond simdjson's range, then something invalid: still refused.
                           "{\"a\":123456789012345678901234567890,\"b\":tru}",
                           "{\"a\":123456789012345678901234567890,\"b\":1.}",
                           "{\"a\":123456789012345678901234567890} x", "123456789012345678901234567890 x",
                           "{\"a\":1e999,\"b\":\"\\q\"}"}) {
    CAPTURE(body);
    check_refused(run(source_with(), signed_request(body), now), refusal::not_json, source_with());
    auto forged = signed_request(body);
    forged.body += " ";
    check_refused(run(source_with(), forged, now), refusal::bad_signature, source_with());
  }
  for (const char* body : {"{}", "[]", "null", "0", "\"s\"", "123456789012345678901234567890", " {\"a\" : [1, 2.5e-3, true, null]} \n",
                           "{\"big\":[123456789012345678901234567890,{\"x\":-1e999}],\"s\":\"\\u00e9\"}"}) {
    CAPTURE(body);
    CHECK(run(source_with(), signed_request(body), now).has_value());
  }
}

TEST_CASE("parse_scheme, scheme_name, parse_value_source, to_string") {
  for (auto s : {scheme::standard_webhooks, scheme::stripe, scheme::github, scheme::hmac_sha256})
    CHECK(parse_scheme(scheme_name(s)) == s);
  CHECK(scheme_name(scheme::standard_webhooks) == "standard-webhooks");
  CHECK(scheme_name(scheme::hmac_sha256) == "hmac-sha256");
  for (const char* bad : {"", "Stripe", "standard_webhooks", "hmac", "svix"}) CHECK_FALSE(parse_scheme(bad).has_value());

  CHECK(parse_value_source("header:X-Id") == value_source{value_source::header, "X-Id"});
  CHECK(parse_value_source("/data/id") == value_source{value_source::json_pointer, "/data/id"});
  CHECK(parse_value_source("/a~1b/~0") == value_source{value_source::json_pointer, "/a~1b/~0"});
  CHECK(parse_value_source("/") == value_source{value_source::json_pointer, "/"});
  for (const char* good : {"header:X-Id", "/data/id", "/a~1b", "header:x_y.z"}) {
    const auto v = parse_value_source(good);
    REQUIRE(v.has_value());
    CHECK(to_string(*v) == good);
  }
  for (const char* bad : {"", "data/id", "header:", "header:X Id", "header:X:Id", "/a~2", "/a~", "Header:X-Id"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_value_source(bad).has_value());
  }
}

TEST_CASE("check_source: what a source needs, in words, never with a secret") {
  source_config ok;
  ok.name = "s";
  ok.kind = scheme::standard_webhooks;
  ok.secrets = {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"};
  CHECK(check_source(ok) == std::nullopt);
  struct row {
    const char* why;
    std::function<void(source_config&)> change;
  };
  const std::vector<row> rows{
      {"no secret", [](source_config& s) { s.secrets.clear(); }},
      {"an empty secret", [](source_config& s) { s.secrets.push_back(""); }},
      {"not a whsec_ key", [](source_config& s) { s.secrets = {"whsec_short"}; }},
      {"a plain secret for standard-webhooks", [](source_config& s) { s.secrets = {"hunter2-hunter2-hunter2"}; }},
      {"no tolerance", [](source_config& s) { s.tolerance = std::chrono::seconds{0}; }},
      {"a malformed source", [](source_config& s) { s.id_from = value_source{value_source::header, "X Id"}; }},
      {"hmac settings on another scheme", [](source_config& s) { s.signature_header = "X-Sig"; }},
      {"hmac without a signature header",
       [](source_config& s) {
         s.kind = scheme::hmac_sha256;
         s.id_from = parse_value_source("/id");
       }},
      {"hmac without an id",
       [](source_config& s) {
         s.kind = scheme::hmac_sha256;
         s.signature_header = "X-Sig";
       }},
      {"hmac signing a timestamp without its header",
       [](source_config& s) {
         s.kind = scheme::hmac_sha256;
         s.signature_header = "X-Sig";
         s.id_from = parse_value_source("/id");
         s.signs_timestamp = true;
       }},
      {"hmac with a timestamp header it does not sign",
       [](source_config& s) {
         s.kind = scheme::hmac_sha256;
         s.signature_header = "X-Sig";
         s.id_from = parse_value_source("/id");
         s.timestamp_header = "X-Ts";
       }},
  };
  for (const auto& r : rows) {
    CAPTURE(r.why);
    auto s = ok;
    r.change(s);
    const auto problem = check_source(s);
    REQUIRE(problem.has_value());
    for (const auto& secret : s.secrets)
      if (!secret.empty()) CHECK(problem->find(secret) == std::string::npos);
  }
  auto generic = ok;
  generic.kind = scheme::hmac_sha256;
  generic.secrets = {"any bytes at all"};
  generic.signature_header = "X-Sig";
  generic.id_from = parse_value_source("header:X-Id");
  CHECK(check_source(generic) == std::nullopt);
  generic.signs_timestamp = true;
  generic.timestamp_header = "X-Ts";
  CHECK(check_source(generic) == std::nullopt);
}

TEST_CASE("find_header: case-insensitive, the first of repeated headers") {
  const std::vector<header_field> h{{"Content-Type", "application/json"}, {"X-Id", "1"}, {"x-id", "2"}};
  CHECK(find_header(h, "content-type") == "application/json");
  CHECK(find_header(h, "X-ID") == "1");
  CHECK_FALSE(find_header(h, "X-Idx").has_value());
  CHECK_FALSE(find_header({}, "X-Id").has_value());
}

TEST_CASE("fingerprint: SHA-256, the raw 32 bytes (FIPS 180-2 examples)") {
  CHECK(to_hex(fingerprint("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(to_hex(fingerprint("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(fingerprint("{\"a\":1}") != fingerprint("{\"a\":1} "));
}
