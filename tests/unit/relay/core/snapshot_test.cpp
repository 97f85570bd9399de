// pg_snapshot: parsing PostgreSQL's text form, pg_visible_in_snapshot's rule, and widening a
// pgoutput Begin's 32-bit xid across epoch boundaries (relay/core/snapshot.hpp).

#include "relay/core/snapshot.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

using walhook::relay::pg_snapshot;

TEST_CASE("pg_snapshot: parses what PostgreSQL prints and refuses anything else") {
  struct row {
    std::string text;
    bool ok;
  };
  const row rows[] = {
      {"10:20:", true},          {"10:20:12", true},        {"10:20:10,14,19", true}, {"5:5:", true},
      {"4294967300:4294967310:4294967301", true},
      {"", false},               {"10:20", false},          {"20:10:", false},        {"10:20:9", false},
      {"10:20:20", false},       {"10:20:14,12", false},    {"10:20:14,14", false},   {"10:20:12,", false},
      {"10:20:,12", false},      {"-1:20:", false},         {"10:2x:", false},        {"10:20:1 2", false},
  };
  for (const auto& r : rows) {
    CAPTURE(r.text);
    auto s = pg_snapshot::parse(r.text);
    CHECK(s.has_value() == r.ok);
    if (s) CHECK(s->to_string() == r.text);
  }
}

TEST_CASE("pg_snapshot: visible() is pg_visible_in_snapshot") {
  const auto s = *pg_snapshot::parse("10:20:12,15");
  struct row {
    std::uint64_t xid;
    bool visible;
  };
  const row rows[] = {
      {3, true},    // ended before the snapshot
      {9, true},    // just below xmin
      {10, true},   // not below xmin, not listed in progress: visible (PostgreSQL lists a running xmin)
      {12, false},  // in progress then
      {13, true},   // committed between
      {15, false},  // in progress then
      {19, true},   // below xmax, not in progress
      {20, false},  // xmax: had not started
      {99, false},  // later
  };
  for (const auto& r : rows) {
    CAPTURE(r.xid);
    CHECK(s.visible(r.xid) == r.visible);
  }
}

TEST_CASE("pg_snapshot: widen() picks the 64-bit id nearest to xmax, across epoch boundaries") {
  constexpr std::uint64_t epoch = std::uint64_t{1} << 32;
  struct row {
    std::uint64_t xmax;
    std::uint32_t xid;
    std::uint64_t expected;
  };
  const row rows[] = {
      {1000, 990, 990},                                   // same epoch, older
      {1000, 1010, 1010},                                 // same epoch, newer (streamed after the snapshot)
      {epoch + 5, 0xFFFFFFF0u, epoch - 16},               // xmax just past a wraparound: the xid is from the epoch before
      {2 * epoch - 5, 3, 2 * epoch + 3},                  // xmax just before a wraparound: the xid is from the next epoch
      {epoch + 5, 7, epoch + 7},                          // same epoch after the wraparound
      {100, 0xFFFFFF00u, 0xFFFFFF00u},                    // epoch 0: nothing before it
  };
  for (const auto& r : rows) {
    CAPTURE(r.xmax);
    CAPTURE(r.xid);
    pg_snapshot s{r.xmax > 50 ? r.xmax - 50 : 0, r.xmax, {}};
    CHECK(s.widen(r.xid) == r.expected);
  }
}
