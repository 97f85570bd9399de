// The inbox's signature schemes (relay/inbox/schemes.hpp, issue 21): for each scheme, the
// provider's own example verifies, and a tampered body, a wrong secret, a stale timestamp
// (either way), a missing or malformed header are refused; several signatures where one
// matches, and rotation (an older secret matches). Signatures are computed here with OpenSSL
// directly (inbox_fixture.hpp), never through the code under test.

#include "tests/unit/relay/inbox/inbox_fixture.hpp"

#include "delivery/signing.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace walhook;
using namespace walhook::test::inbox;
using namespace std::chrono_literals;

namespace {

// --- Standard Webhooks ---------------------------------------------------------------------
// The test vector of the specification's repository (github.com/standard-webhooks/
// standard-webhooks, libraries/*/ "sign" tests): this key, id, time and body give this signature.
const std::string sw_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const std::string sw_id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
constexpr std::int64_t sw_time = 1614265330;
const std::string sw_body = R"({"test": 2432232314})";
const std::string sw_signature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
const std::string other_whsec = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

source_config standard_source(std::vector<std::string> secrets = {sw_secret}) {
  source_config s;
  s.name = "peer";
  s.kind = scheme::standard_webhooks;
  s.secrets = std::move(secrets);
  return s;
}

/// A Standard Webhooks request signed (independently) with the key of `secret` at `time`.
request standard_request(const std::string& secret, std::int64_t time, std::string body, std::string id = "msg_1") {
  const auto key = delivery::base64_decode(std::string_view(secret).substr(6));
  REQUIRE(key.has_value());
  request r;
  const auto ts = std::to_string(time);
  r.set("webhook-signature", "v1," + to_base64(hmac_raw(*key, id + "." + ts + "." + body)));
  r.set("webhook-id", id).set("webhook-timestamp", ts);
  r.body = std::move(body);
  return r;
}

const std::string order_body = R"({"type":"order.paid","id":"ignored","data":{"order":42}})";

}  // namespace

TEST_CASE("standard-webhooks: the specification's test vector verifies") {
  request r;
  r.set("webhook-id", sw_id).set("webhook-timestamp", std::to_string(sw_time)).set("webhook-signature", sw_signature);
  r.body = sw_body;
  // The vector's body has no "type": the signature passes, the type is missing.
  auto plain = standard_source();
  auto refused = run(plain, r, at_unix(sw_time + 10));
  check_refused(refused, refusal::bad_value, plain);
  CHECK(refused.error().detail.find("/type") != std::string::npos);
  // With the type taken from the body's number, the event is whole.
  auto typed = standard_source();
  typed.type_from = parse_value_source("/test");
  const auto ok = run(typed, r, at_unix(sw_time + 10));
  REQUIRE(ok.has_value());
  CHECK(ok->event_id == sw_id);
  CHECK(ok->event_type == "2432232314");
  CHECK(ok->signed_at == sw_time);
  CHECK(ok->secret_index == 0);
  CHECK_FALSE(ok->order_key.has_value());
}

TEST_CASE("standard-webhooks: a walhook delivery signed by delivery::signature_header verifies") {
  // What one walhook sends another: both secrets of a rotation sign, space-separated.
  const auto keys = delivery::parse_secrets(other_whsec + " " + sw_secret);
  REQUIRE(keys.has_value());
  const std::string body =
      R"({"id":"0190a3c4-1b2c-7d3e-8f40-1234567890ab","type":"invoice.paid","timestamp":"2027-01-15T08:00:00Z","data":{"n":1}})";
  request r;
  r.set("webhook-id", "0190a3c4-1b2c-7d3e-8f40-1234567890ab")
      .set("webhook-timestamp", "1800000000")
      .set("webhook-signature", delivery::signature_header(*keys, "0190a3c4-1b2c-7d3e-8f40-1234567890ab", 1'800'000'000, body));
  r.body = body;
  for (const auto& secrets : {std::vector{sw_secret}, std::vector{other_whsec}}) {
    const auto ok = run(standard_source(secrets), r, at_unix(1'800'000'030));
    REQUIRE(ok.has_value());
    CHECK(ok->event_id == "0190a3c4-1b2c-7d3e-8f40-1234567890ab");
    CHECK(ok->event_type == "invoice.paid");
  }
}

TEST_CASE("standard-webhooks: tampered body, wrong secret, missing and malformed headers are refused") {
  const auto source = standard_source();
  const auto good = standard_request(sw_secret, 1'800'000'000, order_body);
  const auto now = at_unix(1'800'000'000);
  REQUIRE(run(source, good, now).has_value());

  auto tampered = good;
  tampered.body = R"({"type":"order.paid","id":"ignored","data":{"order":43}})";
  check_refused(run(source, tampered, now), refusal::bad_signature, source);
  check_refused(run(standard_source({other_whsec}), good, now), refusal::bad_signature, standard_source({other_whsec}));
  // The id and the timestamp are signed too.
  check_refused(run(source, request(good).set("webhook-id", "msg_2"), now), refusal::bad_signature, source);
  check_refused(run(source, request(good).set("webhook-timestamp", "1800000001"), now + 1s), refusal::bad_signature, source);

  for (const char* header : {"webhook-id", "webhook-timestamp", "webhook-signature"}) {
    CAPTURE(header);
    auto r = run(source, request(good).drop(header), now);
    check_refused(r, refusal::missing_header, source);
    CHECK(r.error().detail.find(header) != std::string::npos);
  }
  for (const char* timestamp : {"abc", "-5", "1e9", "1800000000.5", " 1800000000", "", "1234567890123456789"}) {
    CAPTURE(timestamp);
    check_refused(run(source, request(good).set("webhook-timestamp", timestamp), now), refusal::bad_signature, source);
  }
  for (const char* signature : {"v1,!!!notbase64!!!", "v1,", "v2,abc=", "", "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}) {
    CAPTURE(signature);
    check_refused(run(source, request(good).set("webhook-signature", signature), now), refusal::bad_signature, source);
  }
  // A secret that is not a whsec_ key can never match (check_source refuses it before).
  check_refused(run(standard_source({"plain-text"}), good, now), refusal::bad_signature, standard_source({"plain-text"}));
  // Not JSON is judged only after the signature: a forged non-JSON body is a bad signature.
  auto forged = good;
  forged.body = "not json";
  check_refused(run(source, forged, now), refusal::bad_signature, source);
  check_refused(run(source, standard_request(sw_secret, 1'800'000'000, "not json"), now), refusal::not_json, source);
}

TEST_CASE("standard-webhooks: the timestamp may be `tolerance` away either way, not more") {
  auto source = standard_source();
  source.tolerance = 300s;
  const auto r = standard_request(sw_secret, 1'800'000'000, order_body);
  for (std::int64_t skew : {-300, -1, 0, 1, 300}) {
    CAPTURE(skew);
    CHECK(run(source, r, at_unix(1'800'000'000 + skew)).has_value());
  }
  // now is 301 s after the signed time: stale; 301 s before it: from the future.
  auto past = run(source, r, at_unix(1'800'000'301));
  check_refused(past, refusal::stale_timestamp, source);
  CHECK(past.error().detail.find("past") != std::string::npos);
  auto future = run(source, r, at_unix(1'800'000'000 - 301));
  check_refused(future, refusal::stale_timestamp, source);
  CHECK(future.error().detail.find("future") != std::string::npos);
  // Sub-second receiving times count by whole seconds.
  CHECK(run(source, r, at_unix(1'800'000'300) + 999ms).has_value());
  // A timestamp far from any clock does not overflow anything.
  check_refused(run(source, standard_request(sw_secret, 999'999'999'999'999'999, order_body), at_unix(1'800'000'000)),
                refusal::stale_timestamp, source);
  check_refused(run(source, standard_request(sw_secret, 0, order_body), at_unix(1'800'000'000)), refusal::stale_timestamp,
                source);
}

TEST_CASE("standard-webhooks: several signatures, one matching; rotation; svix-* headers") {
  const auto now = at_unix(1'800'000'000);
  auto r = standard_request(sw_secret, 1'800'000'000, order_body);
  const auto good = r.header("webhook-signature");
  // Unknown versions (v1a: asymmetric), garbage and a wrong v1 around the right one.
  r.set("webhook-signature", "v1a,hnO3f9T8Ytu9Hw== v1,AAAA v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= " + good);
  const auto ok = run(standard_source(), r, now);
  REQUIRE(ok.has_value());
  CHECK(ok->secret_index == 0);
  // Rotation: the newest secret first, the sender still on the older one.
  const auto rotated = run(standard_source({other_whsec, sw_secret}), r, now);
  REQUIRE(rotated.has_value());
  CHECK(rotated->secret_index == 1);
  // Svix's own header names (the same scheme): accepted as one family.
  request svix;
  for (const auto& [name, value] : standard_request(sw_secret, 1'800'000'000, order_body).headers)
    svix.set("svix-" + name.substr(8), value);
  svix.body = order_body;
  const auto from_svix = run(standard_source(), svix, now);
  REQUIRE(from_svix.has_value());
  CHECK(from_svix->event_id == "msg_1");
  // Header names are case-insensitive.
  request upper;
  for (const auto& [name, value] : standard_request(sw_secret, 1'800'000'000, order_body).headers)
    upper.set(name == "webhook-id" ? "Webhook-ID" : name, value);
  upper.body = order_body;
  CHECK(run(standard_source(), upper, now).has_value());
}

// --- Stripe ----------------------------------------------------------------------------------
// Stripe publishes no fixed test vector (its libraries build test headers at run time with the
// same construction), so the example follows Stripe's docs step by step, with OpenSSL directly:
// signed payload = "{t}.{body}", HMAC-SHA256 keyed with the endpoint secret's bytes as they are
// (the whsec_ string is not base64-decoded), v1 = its lowercase hex.

namespace {

const std::string stripe_secret = "whsec_5f1c0ffee0ddba11deadbeefcafe0000";
const std::string stripe_old_secret = "whsec_0ld0ld0ld0ld0ld0ld0ld0ld0ld0ld0";
constexpr std::int64_t stripe_time = 1'800'000'000;
const std::string stripe_body =
    R"({"id":"evt_1Q2w3E4r5T6y7U8i","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1"}}})";

source_config stripe_source(std::vector<std::string> secrets = {stripe_secret}) {
  source_config s;
  s.name = "stripe";
  s.kind = scheme::stripe;
  s.secrets = std::move(secrets);
  return s;
}

std::string stripe_v1(const std::string& secret, std::int64_t t, const std::string& body) {
  return to_hex(hmac_raw(secret, std::to_string(t) + "." + body));
}

request stripe_request(const std::string& header, std::string body = stripe_body) {
  request r;
  r.set("Stripe-Signature", header);
  r.body = std::move(body);
  return r;
}

}  // namespace

TEST_CASE("stripe: a header built as Stripe's docs describe verifies; the event is the body's id and type") {
  const auto header = "t=" + std::to_string(stripe_time) + ",v1=" + stripe_v1(stripe_secret, stripe_time, stripe_body);
  const auto ok = run(stripe_source(), stripe_request(header), at_unix(stripe_time + 5));
  REQUIRE(ok.has_value());
  CHECK(ok->event_id == "evt_1Q2w3E4r5T6y7U8i");
  CHECK(ok->event_type == "payment_intent.succeeded");
  CHECK(ok->signed_at == stripe_time);
  // Keyed with the base64-decoded secret (Standard Webhooks' rule) it must not verify.
  const auto decoded = delivery::base64_decode(std::string_view(stripe_secret).substr(6));
  REQUIRE(decoded.has_value());
  const auto wrong_key = "t=" + std::to_string(stripe_time) + ",v1=" +
                         to_hex(hmac_raw(*decoded, std::to_string(stripe_time) + "." + stripe_body));
  check_refused(run(stripe_source(), stripe_request(wrong_key), at_unix(stripe_time)), refusal::bad_signature,
                stripe_source());
}

TEST_CASE("stripe: tampered body, wrong secret, stale timestamp, missing and malformed headers are refused") {
  const auto source = stripe_source();
  const auto t = std::to_string(stripe_time);
  const auto v1 = stripe_v1(stripe_secret, stripe_time, stripe_body);
  const auto now = at_unix(stripe_time);
  const auto good = "t=" + t + ",v1=" + v1;
  REQUIRE(run(source, stripe_request(good), now).has_value());

  check_refused(run(source, stripe_request(good, stripe_body + " "), now), refusal::bad_signature, source);
  check_refused(run(stripe_source({stripe_old_secret}), stripe_request(good), now), refusal::bad_signature,
                stripe_source({stripe_old_secret}));
  // t is signed: moving it breaks the signature.
  check_refused(run(source, stripe_request("t=" + std::to_string(stripe_time + 1) + ",v1=" + v1), now),
                refusal::bad_signature, source);
  check_refused(run(source, stripe_request(good), at_unix(stripe_time + 301)), refusal::stale_timestamp, source);
  check_refused(run(source, stripe_request(good), at_unix(stripe_time - 301)), refusal::stale_timestamp, source);
  CHECK(run(source, stripe_request(good), at_unix(stripe_time + 300)).has_value());
  CHECK(run(source, stripe_request(good), at_unix(stripe_time - 300)).has_value());
  check_refused(run(source, stripe_request(good).drop("Stripe-Signature"), now), refusal::missing_header, source);

  const std::string odd_hex = v1.substr(1);
  for (const auto& header : {"v1=" + v1,                       // no t=
                             "t=" + t,                         // no v1=
                             "t=" + t + ",v0=" + v1,           // v0 alone is not accepted
                             "t=" + t + ",v1=" + odd_hex,      // odd hex
                             "t=" + t + ",v1=" + v1 + "zz",    // not hex
                             "t=abc,v1=" + v1,                 // t not a Unix time
                             "t=" + t + ",t=" + t + ",v1=" + v1,  // two timestamps
                             std::string("garbage")}) {
    CAPTURE(header);
    check_refused(run(source, stripe_request(header), now), refusal::bad_signature, source);
  }
  // Signed but not JSON: refused only after the signature.
  const std::string text = "plain text";
  check_refused(run(source, stripe_request("t=" + t + ",v1=" + stripe_v1(stripe_secret, stripe_time, text), text), now),
                refusal::not_json, source);
}

TEST_CASE("stripe: several v1 signatures (one matching), v0 and unknown items ignored, rotation") {
  const auto t = std::to_string(stripe_time);
  const auto now = at_unix(stripe_time);
  const auto v1_new = stripe_v1(stripe_secret, stripe_time, stripe_body);
  const auto v1_old = stripe_v1(stripe_old_secret, stripe_time, stripe_body);
  const auto header = "t=" + t + ",v1=" + std::string(64, 'a') + ",v1=" + v1_new + ",v0=" + std::string(64, 'b') +
                      ",scheme=x, flag";
  const auto ok = run(stripe_source(), stripe_request(header), now);
  REQUIRE(ok.has_value());
  CHECK(ok->secret_index == 0);
  // The sender still signs with the old secret only; the source holds both, newest first.
  const auto rotated = run(stripe_source({stripe_secret, stripe_old_secret}), stripe_request("t=" + t + ",v1=" + v1_old), now);
  REQUIRE(rotated.has_value());
  CHECK(rotated->secret_index == 1);
  // Stripe during a rotation sends one v1 per secret: either one matching suffices.
  CHECK(run(stripe_source({stripe_old_secret}), stripe_request("t=" + t + ",v1=" + v1_new + ",v1=" + v1_old), now)
            .has_value());
}

// --- GitHub ----------------------------------------------------------------------------------
// GitHub's docs ("Validating webhook deliveries") give a worked example: this secret and payload
// give this X-Hub-Signature-256.

namespace {

const std::string gh_doc_secret = "It's a Secret to Everybody";
const std::string gh_doc_payload = "Hello, World!";
const std::string gh_doc_signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
const std::string gh_body = R"({"action":"opened","number":7,"repository":{"full_name":"acme/shop"}})";

source_config github_source(std::vector<std::string> secrets = {gh_doc_secret}) {
  source_config s;
  s.name = "github";
  s.kind = scheme::github;
  s.secrets = std::move(secrets);
  return s;
}

request github_request(const std::string& secret, std::string body = gh_body) {
  request r;
  r.set("X-Hub-Signature-256", "sha256=" + to_hex(hmac_raw(secret, body)));
  r.set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958").set("X-GitHub-Event", "pull_request");
  r.body = std::move(body);
  return r;
}

}  // namespace

TEST_CASE("github: the docs' worked example verifies; the event is X-GitHub-Delivery and X-GitHub-Event") {
  request doc;
  doc.set("X-Hub-Signature-256", gh_doc_signature).set("X-GitHub-Delivery", "d1").set("X-GitHub-Event", "ping");
  doc.body = gh_doc_payload;
  // The example's payload is not JSON: not_json is the refusal that only an authentic body gets.
  check_refused(run(github_source(), doc, at_unix(1'800'000'000)), refusal::not_json, github_source());
  auto forged = doc;
  forged.body = "Hello, World?";
  check_refused(run(github_source(), forged, at_unix(1'800'000'000)), refusal::bad_signature, github_source());

  const auto ok = run(github_source(), github_request(gh_doc_secret), at_unix(1'800'000'000));
  REQUIRE(ok.has_value());
  CHECK(ok->event_id == "72d3162e-cc78-11e3-81ab-4c9367dc0958");
  CHECK(ok->event_type == "pull_request");
  CHECK_FALSE(ok->signed_at.has_value());
  // GitHub signs no timestamp: the receiving time does not matter.
  CHECK(run(github_source(), github_request(gh_doc_secret), at_unix(0)).has_value());
  CHECK(run(github_source(), github_request(gh_doc_secret), at_unix(4'000'000'000)).has_value());
}

TEST_CASE("github: tampered body, wrong secret, missing and malformed headers, rotation") {
  const auto source = github_source();
  const auto now = at_unix(1'800'000'000);
  auto tampered = github_request(gh_doc_secret);
  tampered.body = R"({"action":"closed","number":7,"repository":{"full_name":"acme/shop"}})";
  check_refused(run(source, tampered, now), refusal::bad_signature, source);
  check_refused(run(source, github_request("another secret"), now), refusal::bad_signature, source);
  check_refused(run(source, github_request(gh_doc_secret).drop("X-Hub-Signature-256"), now), refusal::missing_header,
                source);
  const auto hex = to_hex(hmac_raw(gh_doc_secret, gh_body));
  for (const auto& value : {hex, "sha1=" + hex, "sha256=" + hex.substr(1), "sha256=" + hex + "0", "sha256=" + hex.substr(2),
                            "sha256=" + std::string(64, 'g'), std::string("sha256=")}) {
    CAPTURE(value);
    check_refused(run(source, github_request(gh_doc_secret).set("X-Hub-Signature-256", value), now),
                  refusal::bad_signature, source);
  }
  // Uppercase hex is the same bytes.
  std::string upper = hex;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  CHECK(run(source, github_request(gh_doc_secret).set("X-Hub-Signature-256", "sha256=" + upper), now).has_value());
  // Without X-GitHub-Delivery there is no id; without X-GitHub-Event no type.
  check_refused(run(source, github_request(gh_doc_secret).drop("X-GitHub-Delivery"), now), refusal::no_event_id, source);
  check_refused(run(source, github_request(gh_doc_secret).drop("X-GitHub-Event"), now), refusal::bad_value, source);
  // Rotation: the new secret first, the hook still signing with the old one.
  const auto rotated = run(github_source({"new secret", gh_doc_secret}), github_request(gh_doc_secret), now);
  REQUIRE(rotated.has_value());
  CHECK(rotated->secret_index == 1);
}

// --- Generic HMAC-SHA256 ---------------------------------------------------------------------

namespace {

const std::string generic_secret = "shared-secret-of-the-sender";
const std::string generic_body = R"({"event":{"id":"e-1","kind":"parcel.shipped"},"parcel":"P9"})";

source_config generic_source(bool base64 = false, bool signs_timestamp = false) {
  source_config s;
  s.name = "carrier";
  s.kind = scheme::hmac_sha256;
  s.secrets = {generic_secret};
  s.signature_header = "X-Signature";
  s.base64 = base64;
  s.signs_timestamp = signs_timestamp;
  if (signs_timestamp) s.timestamp_header = "X-Timestamp";
  s.id_from = parse_value_source("/event/id");
  return s;
}

request generic_request(const std::string& signature, std::string body = generic_body) {
  request r;
  r.set("X-Signature", signature);
  r.body = std::move(body);
  return r;
}

}  // namespace

TEST_CASE("hmac-sha256: hex or base64 over the body, sha256= tolerated; type defaults to the source's name") {
  const auto mac = hmac_raw(generic_secret, generic_body);
  const auto now = at_unix(1'800'000'000);
  REQUIRE(check_source(generic_source()) == std::nullopt);
  for (const auto& signature : {to_hex(mac), "sha256=" + to_hex(mac), "SHA256=" + to_hex(mac)}) {
    CAPTURE(signature);
    const auto ok = run(generic_source(), generic_request(signature), now);
    REQUIRE(ok.has_value());
    CHECK(ok->event_id == "e-1");
    CHECK(ok->event_type == "carrier");
    CHECK_FALSE(ok->signed_at.has_value());
  }
  CHECK(run(generic_source(true), generic_request(to_base64(mac)), now).has_value());
  CHECK(run(generic_source(true), generic_request("sha256=" + to_base64(mac)), now).has_value());
  // The encoding is the source's: hex is not read as base64, nor base64 as hex.
  check_refused(run(generic_source(true), generic_request(to_hex(mac)), now), refusal::bad_signature, generic_source(true));
  check_refused(run(generic_source(), generic_request(to_base64(mac)), now), refusal::bad_signature, generic_source());
  auto typed = generic_source();
  typed.type_from = parse_value_source("/event/kind");
  const auto ok = run(typed, generic_request(to_hex(mac)), now);
  REQUIRE(ok.has_value());
  CHECK(ok->event_type == "parcel.shipped");
}

TEST_CASE("hmac-sha256: refusals — tampered, wrong secret, missing, malformed, no id source") {
  const auto source = generic_source();
  const auto now = at_unix(1'800'000'000);
  const auto hex = to_hex(hmac_raw(generic_secret, generic_body));
  check_refused(run(source, generic_request(hex, generic_body + "\n"), now), refusal::bad_signature, source);
  check_refused(run(source, generic_request(to_hex(hmac_raw("not the secret", generic_body))), now),
                refusal::bad_signature, source);
  check_refused(run(source, generic_request(hex).drop("X-Signature"), now), refusal::missing_header, source);
  for (const auto& value : {hex.substr(1), hex + "x", std::string(""), std::string("sha256="), hex.substr(0, 62)}) {
    CAPTURE(value);
    check_refused(run(source, generic_request(value), now), refusal::bad_signature, source);
  }
  const auto b64 = to_base64(hmac_raw(generic_secret, generic_body));
  for (const auto& value : {b64.substr(1), b64 + "=", "!" + b64.substr(1), b64.substr(0, b64.size() - 1)}) {
    CAPTURE(value);
    check_refused(run(generic_source(true), generic_request(value), now), refusal::bad_signature, generic_source(true));
  }
  // Without id_from the generic scheme knows no id (check_source says so before).
  auto no_id = generic_source();
  no_id.id_from.reset();
  CHECK(check_source(no_id).has_value());
  check_refused(run(no_id, generic_request(hex), now), refusal::no_event_id, no_id);
}

TEST_CASE("hmac-sha256: timestamp.body with the timestamp's header and the tolerance; several signatures") {
  const auto source = generic_source(false, true);
  REQUIRE(check_source(source) == std::nullopt);
  const auto sign = [](const std::string& secret, std::int64_t t) {
    return to_hex(hmac_raw(secret, std::to_string(t) + "." + generic_body));
  };
  auto r = generic_request(sign(generic_secret, 1'800'000'000)).set("X-Timestamp", "1800000000");
  const auto ok = run(source, r, at_unix(1'800'000'120));
  REQUIRE(ok.has_value());
  CHECK(ok->signed_at == 1'800'000'000);
  check_refused(run(source, r, at_unix(1'800'000'301)), refusal::stale_timestamp, source);
  check_refused(run(source, r, at_unix(1'799'999'699)), refusal::stale_timestamp, source);
  check_refused(run(source, request(r).drop("X-Timestamp"), at_unix(1'800'000'000)), refusal::missing_header, source);
  check_refused(run(source, request(r).set("X-Timestamp", "1800000001"), at_unix(1'800'000'000)), refusal::bad_signature,
                source);
  check_refused(run(source, request(r).set("X-Timestamp", "soon"), at_unix(1'800'000'000)), refusal::bad_signature, source);
  // The body alone signed is not timestamp.body.
  check_refused(run(source, request(r).set("X-Signature", to_hex(hmac_raw(generic_secret, generic_body))),
                    at_unix(1'800'000'000)),
                refusal::bad_signature, source);
  // Several signatures, commas or blanks between them, one matching; rotation.
  const auto several = "deadbeef, " + sign("old secret", 1'800'000'000) + " " + sign(generic_secret, 1'800'000'000);
  CHECK(run(source, request(r).set("X-Signature", several), at_unix(1'800'000'000)).has_value());
  auto rotated = source;
  rotated.secrets = {"newest secret", generic_secret};
  const auto by_old = run(rotated, r, at_unix(1'800'000'000));
  REQUIRE(by_old.has_value());
  CHECK(by_old->secret_index == 1);
}
