#include "delivery/signing.hpp"

#include <doctest/doctest.h>

#include <array>
#include <string>
#include <system_error>

using namespace walhook::delivery;

namespace {

// Standard Webhooks published example (standard-webhooks spec, "Signature scheme" and the
// reference libraries' tests).
constexpr std::string_view spec_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr std::string_view spec_id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
constexpr std::int64_t spec_timestamp = 1614265330;
constexpr std::string_view spec_body = R"({"test": 2432232314})";
constexpr std::string_view spec_signature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

signing_key key_of(std::string_view secret) {
  auto k = parse_secret(secret);
  REQUIRE(k.has_value());
  return *k;
}

}  // namespace

TEST_CASE("signing: the Standard Webhooks published example signs and verifies") {
  const auto key = key_of(spec_secret);
  CHECK(key.bytes.size() == 24);
  CHECK(sign(key, spec_id, spec_timestamp, spec_body) == spec_signature);

  const std::array keys{key};
  CHECK(signature_header(keys, spec_id, spec_timestamp, spec_body) == spec_signature);
  CHECK(verify(keys, spec_id, "1614265330", spec_body, spec_signature));
}

TEST_CASE("signing: tampered id, timestamp, body or signature fail verification") {
  const std::array keys{key_of(spec_secret)};
  CHECK_FALSE(verify(keys, spec_id, "1614265331", spec_body, spec_signature));
  CHECK_FALSE(verify(keys, spec_id, "1614265330", R"({"test": 2432232315})", spec_signature));
  CHECK_FALSE(verify(keys, "msg_p5jXN8AQM9LWM0D4loKWxJeK", "1614265330", spec_body, spec_signature));
  CHECK_FALSE(verify(keys, spec_id, "1614265330", std::string(spec_body) + " ", spec_signature));
  CHECK_FALSE(verify(keys, spec_id, "1614265330", spec_body, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="));
  // Right bytes, wrong version tag; truncated; garbage; empty.
  CHECK_FALSE(verify(keys, spec_id, "1614265330", spec_body, "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="));
  CHECK_FALSE(verify(keys, spec_id, "1614265330", spec_body, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlN"));
  CHECK_FALSE(verify(keys, spec_id, "1614265330", spec_body, "v1,!!!"));
  CHECK_FALSE(verify(keys, spec_id, "1614265330", spec_body, ""));
  CHECK_FALSE(verify(keys, spec_id, "1614265330", spec_body, "v1,"));
}

TEST_CASE("signing: a header with several signatures verifies if any matches") {
  const std::array keys{key_of(spec_secret)};
  const std::string header = "v1a,c29tZXRoaW5nIGVsc2U= v1,bm90IHRoZSByaWdodCBvbmUgYXQgYWxsISEhISEhISEhIQ== " +
                             std::string(spec_signature);
  CHECK(verify(keys, spec_id, "1614265330", spec_body, header));
  CHECK(verify(keys, spec_id, "1614265330", spec_body, "  " + std::string(spec_signature) + "  "));
}

TEST_CASE("signing: rotation with two secrets sends two signatures, each verifiable") {
  const std::string old_secret = generate_secret();
  const std::string new_secret = generate_secret();
  const auto keys = parse_secrets(old_secret + " " + new_secret);
  REQUIRE(keys.has_value());
  REQUIRE(keys->size() == 2);

  const std::string body = R"({"id":"evt_1","type":"order.paid","data":{"total":42}})";
  const std::string header = signature_header(*keys, "evt_1", 1700000000, body);
  const auto space = header.find(' ');
  REQUIRE(space != std::string::npos);
  CHECK(header.substr(0, space) == sign((*keys)[0], "evt_1", 1700000000, body));
  CHECK(header.substr(space + 1) == sign((*keys)[1], "evt_1", 1700000000, body));

  // A receiver that knows only one of the two secrets accepts the delivery.
  const std::array only_old{(*keys)[0]};
  const std::array only_new{(*keys)[1]};
  CHECK(verify(only_old, "evt_1", "1700000000", body, header));
  CHECK(verify(only_new, "evt_1", "1700000000", body, header));
  // One that knows neither does not.
  const std::array stranger{key_of(spec_secret)};
  CHECK_FALSE(verify(stranger, "evt_1", "1700000000", body, header));
  CHECK_FALSE(verify(only_new, "evt_1", "1700000001", body, header));
}

TEST_CASE("signing: invalid secrets are rejected with invalid_argument") {
  const auto invalid = std::make_error_code(std::errc::invalid_argument);
  for (std::string_view bad : {
           "",
           "whsec_",
           "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",          // no prefix
           "WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",    // prefix is case-sensitive
           "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS",     // length not a multiple of 4
           "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa$w",    // outside the alphabet
           "whsec_MfKQ9r8GKYqrTwjU PD8ILPZIo2LaLaSw",   // embedded blank
           "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS=w",   // padding in the middle
           "whsec_AAAAAAAAAAAAAAAAAAAA",                 // 15 bytes: too short
       }) {
    CAPTURE(bad);
    const auto k = parse_secret(bad);
    REQUIRE(k.has_error());
    CHECK(k.error() == invalid);
  }
  // 16 and 64 bytes are the bounds.
  CHECK(parse_secret("whsec_" + base64_encode(std::string(16, 'k'))).has_value());
  CHECK(parse_secret("whsec_" + base64_encode(std::string(64, 'k'))).has_value());
  CHECK(parse_secret("whsec_" + base64_encode(std::string(65, 'k'))).has_error());

  CHECK(parse_secrets("").has_error());
  CHECK(parse_secrets("   ").has_error());
  CHECK(parse_secrets(std::string(spec_secret) + " whsec_nope").has_error());
  const auto two = parse_secrets("  " + std::string(spec_secret) + "\t " + std::string(spec_secret) + " ");
  REQUIRE(two.has_value());
  CHECK(two->size() == 2);
}

TEST_CASE("signing: generated secrets are 32 random bytes that parse back") {
  const std::string a = generate_secret();
  const std::string b = generate_secret();
  CHECK(a.starts_with("whsec_"));
  CHECK(a != b);
  const auto key = parse_secret(a);
  REQUIRE(key.has_value());
  CHECK(key->bytes.size() == 32);
}

TEST_CASE("signing: base64 follows RFC 4648 §10 and round-trips every byte") {
  const std::array<std::pair<std::string_view, std::string_view>, 7> vectors{{
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  }};
  for (const auto& [plain, encoded] : vectors) {
    CAPTURE(plain);
    CHECK(base64_encode(plain) == encoded);
    const auto decoded = base64_decode(encoded);
    REQUIRE(decoded.has_value());
    CHECK(*decoded == plain);
  }

  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (std::size_t len = 0; len <= all.size(); len += (len < 40 ? 1 : 37)) {
    CAPTURE(len);
    const std::string bytes = all.substr(all.size() - len);
    const auto back = base64_decode(base64_encode(bytes));
    REQUIRE(back.has_value());
    CHECK(*back == bytes);
  }
  // Zero bytes at the end survive (padding is not confused with data).
  CHECK(base64_decode(base64_encode(std::string("\0\0", 2))) == std::string("\0\0", 2));
}

TEST_CASE("signing: malformed base64 is refused") {
  for (std::string_view bad : {"Zg", "Zg=", "Z===", "====", "Zm9v!", "Zm=v", "Zg==Zg==", " Zm9v", "Zm9v\n", "Zm9-",
                               "Zm9_"}) {
    CAPTURE(bad);
    CHECK_FALSE(base64_decode(bad).has_value());
  }
}
