// Secret rotation (relay/core/secret_rotation.hpp, issue 19 #10): an endpoint row with two
// secrets and secret_grace_until, as the stream brings it, signs with both until the grace ends
// and with the new one alone after it — whether or not the row still holds the old one — and the
// drop of expired secrets, when it fails, is tried again with a growing wait.

#include "relay/core/secret_rotation.hpp"

#include "common/time.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace walhook;
using namespace walhook::relay;
using namespace std::chrono_literals;
namespace pgo = walhook::wal::pgoutput;

namespace {

const std::string old_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const std::string new_secret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

pgo::tuple_value text(std::string v) { return {pgo::value_kind::text, std::move(v)}; }
pgo::tuple_value null() { return {pgo::value_kind::null, {}}; }

/// walhook.endpoints' row as pgoutput sends it (text), with `secret` and `grace_until`.
endpoint row(const std::string& secret, pgo::tuple_value grace_until) {
  pgo::relation rel;
  rel.name = "endpoints";
  for (const char* c : {"id", "tenant_id", "url", "secret", "secret_grace_until"}) rel.columns.push_back({0, c, 25, -1});
  pgo::tuple t{text("7"), text("t"), text("https://hooks.example.com/in"), text(secret), std::move(grace_until)};
  auto e = endpoint_from_row(row_view(rel, t), nullptr);
  REQUIRE(e.has_value());
  return *e;
}

bool signs_with(const endpoint& ep, std::chrono::system_clock::time_point now, const std::string& secret) {
  const auto key = delivery::parse_secret(secret);
  REQUIRE(key.has_value());
  const auto header = delivery::signature_header(signing_keys(ep, now), "msg_1", 1'800'000'000, "{}");
  const delivery::signing_key one[] = {*key};
  return delivery::verify(one, "msg_1", "1800000000", "{}", header);
}

}  // namespace

TEST_CASE("signing_keys: both secrets during the grace period, the new one alone from its end") {
  const auto grace_end = *parse_pg_timestamptz("2027-01-15 08:00:00+00");
  const auto end = std::chrono::time_point_cast<std::chrono::system_clock::duration>(grace_end);
  auto rotating = row(new_secret + " " + old_secret, text("2027-01-15 08:00:00+00"));
  REQUIRE(rotating.secret_grace_until == end);
  struct at {
    std::chrono::system_clock::time_point now;
    std::size_t keys;
  };
  for (const auto& t : {at{end - 1h, 2}, at{end - 1s, 2}, at{end, 1}, at{end + 1s, 1}, at{end + 24h, 1}}) {
    CAPTURE(format_iso8601(t.now));
    CHECK(signing_keys(rotating, t.now).size() == t.keys);
    CHECK(signs_with(rotating, t.now, new_secret));
    CHECK(signs_with(rotating, t.now, old_secret) == (t.keys == 2));
  }
  // No grace (the drop landed, or never rotated): every secret in the column signs, as before.
  auto plain = row(new_secret, null());
  CHECK_FALSE(plain.secret_grace_until);
  CHECK(signing_keys(plain, end + 24h).size() == 1);
  auto held = row(new_secret + " " + old_secret, null());
  CHECK(signing_keys(held, end + 24h).size() == 2);
  // A grace walhook cannot read ('infinity'): no expiry to act on; one far ahead is kept.
  CHECK_FALSE(row(new_secret + " " + old_secret, text("infinity")).secret_grace_until);
  auto far = row(new_secret + " " + old_secret, text("2999-01-01 00:00:00+00"));
  REQUIRE(far.secret_grace_until);
  CHECK(signing_keys(far, end + 24h * 365 * 100).size() == 2);
}

TEST_CASE("secret_drop_schedule: every 5 s while it works; after failures 5 s, 10 s, 20 s … capped at 10 min") {
  const auto t0 = std::chrono::steady_clock::time_point{} + 1000h;
  secret_drop_schedule s;
  CHECK(s.due(t0));  // at once after the start
  s.succeeded(t0);
  CHECK_FALSE(s.due(t0 + 4s));
  CHECK(s.due(t0 + 5s));
  auto now = t0 + 5s;
  std::vector<long> waits;
  for (int i = 0; i < 10; ++i) {
    const auto wait = s.failed(now);
    waits.push_back(static_cast<long>(wait.count()));
    CHECK_FALSE(s.due(now + wait - 1s));
    CHECK(s.due(now + wait));
    now += wait;
  }
  CHECK(waits == std::vector<long>{5, 10, 20, 40, 80, 160, 320, 600, 600, 600});
  CHECK(s.failures() == 10);
  s.succeeded(now);
  CHECK(s.failures() == 0);
  CHECK(s.due(now + 5s));
}
