// relay/admin/verdict.hpp as tables: "did endpoint X get event Y?" (docs/api.md, GET
// /api/events/{id}). One row per rule of verdict_for, in its order; then which endpoints the
// answer shows, and when nothing knows the event (404).

#include "relay/admin/verdict.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace walhook;
using namespace walhook::relay;
using namespace std::chrono_literals;

namespace {

const std::string event_id = "00000000-0000-4000-8000-000000000001";
const auto t0 = std::chrono::system_clock::time_point{} + 1'800'000'000s;  // the record's oldest attempt

sys_micros micros(std::chrono::system_clock::time_point t) {
  return sys_micros(std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()));
}

outcome_entry attempt(std::int64_t endpoint, const char* result, int n = 1) {
  outcome_entry e;
  e.event_id = event_id;
  e.endpoint_id = endpoint;
  e.at = t0 + std::chrono::seconds{n};
  e.attempt = n;
  e.result = result;
  return e;
}

/// The event created 1 minute after the record's oldest attempt (in the window), endpoint 1
/// routed, no row, no attempt, not merged.
event_facts base() {
  event_facts f;
  f.outbox_row = true;
  f.created_at = micros(t0 + 60s);
  f.routes = {{.endpoint_id = 1, .added_after = false, .endpoint_created_at = "2027-01-01T00:00:00Z"}};
  f.window = {.kept = 10, .oldest = t0};
  return f;
}

const std::string in_window_reason =
    "no delivery row and no attempt in this walhook's in-memory record: it is newer than the record's oldest "
    "entry, so most likely still queued in memory; or merged into a newer event of its merge key, or sent by "
    "another walhook instance";
const std::string out_of_window_reason =
    "no delivery row and no attempt in this walhook's in-memory record: still queued in memory, merged into a "
    "newer event of its merge key, or delivered before the in-memory record began (a first-try success leaves no "
    "row with --record failed; the record is lost at restart)";
const std::string added_after_reason =
    "the endpoint was added after the event (created 2027-01-01T00:00:00Z): it never gets it";
const std::string merged_reason =
    "merged into a newer event, 00000000-0000-4000-8000-000000000002, of the same merge key (delivered for this "
    "endpoint): only the newest state of a merge key is sent";

/// walhook's records: the event's transaction in the delivered snapshot of slot "walhook".
void in_snapshot(event_facts& f) {
  f.stream = {.xid = "1234", .slot = "walhook", .in_delivered_snapshot = true, .doubt = "", .unavailable = ""};
}

const std::string snapshot_reason =
    "inferred from walhook's records: no delivery row (a first-try success leaves none with --record failed), "
    "routed to it, and its transaction (xid 1234) is in the delivered snapshot of slot walhook, where every "
    "transaction was delivered or written to walhook.deliveries";
const std::string cursor_covers_reason =
    "inferred from walhook's records: no delivery row (a first-try success leaves none with --record failed), "
    "routed to it, and the outbox cursor it follows since 2027-02-01T00:00:00Z covers its transaction (xid 1234)";
const std::string cursor_owes_reason =
    "owed by its outbox cursor: the endpoint follows walhook.outbox since 2027-02-01T00:00:00Z (it was down, paused "
    "or behind) and gets the event when it can take it";
const std::string dead_range_reason =
    "ended dead without a row of its own: the endpoint's outbox cursor was given up at 2027-02-04T00:00:00Z with the "
    "event in its range (walhook.dead_ranges id 7: behind since 2027-02-01T00:00:00Z)";
const std::string newer_state_reason =
    "delivered, or merged into a newer event, 00000000-0000-4000-8000-000000000003, of the same merge key (only the "
    "newest state of a merge key is sent): its transaction (xid 1234) is in the delivered snapshot of slot walhook, "
    "where every transaction was delivered or written to walhook.deliveries, and without a row nothing tells which";
const std::string not_yet_reason =
    "no delivery row and no attempt in this walhook's in-memory record, and its transaction (xid 1234) is not in the "
    "delivered snapshot of slot walhook yet (recorded about every second while streaming): most likely still queued "
    "in memory or in flight; or merged into a newer event of its merge key";
const std::string doubt_reason =
    "no delivery row and no attempt in this walhook's in-memory record; its transaction (xid 1234) is in the "
    "delivered snapshot of slot walhook, but backfill 3 is not finished";

}  // namespace

TEST_CASE("verdict_for: the table of rules, in order") {
  const outcome_entry retry = attempt(1, "retry");
  const outcome_entry delivered = attempt(1, "delivered", 2);
  const outcome_entry dead = attempt(1, "dead", 3);
  struct row {
    const char* what;
    event_facts facts;
    const outcome_entry* last;
    std::string verdict;
    std::optional<std::string> reason;
  };
  auto with = [](auto change) {
    auto f = base();
    change(f);
    return f;
  };
  auto row_of = [&](const char* status) { return with([status](event_facts& f) { f.row_status[1] = status; }); };
  auto added_after = [](event_facts& f) { f.routes[0].added_after = true; };
  auto merged = [](event_facts& f) {
    f.merged_into[1] = {.event_id = "00000000-0000-4000-8000-000000000002", .status = "delivered"};
  };
  const row rows[] = {
      // 1. The delivery row decides: its status (sending: an attempt in flight).
      {"row pending", row_of("pending"), nullptr, "pending", std::nullopt},
      {"row sending → in_flight", row_of("sending"), nullptr, "in_flight", std::nullopt},
      {"row delivered", row_of("delivered"), nullptr, "delivered", std::nullopt},
      {"row dead", row_of("dead"), nullptr, "dead", std::nullopt},
      {"a row beats the newest attempt", row_of("delivered"), &retry, "delivered", std::nullopt},
      // 2. No row: the newest attempt in the record decides (retry → pending).
      {"attempt delivered", base(), &delivered, "delivered", std::nullopt},
      {"attempt retry → pending", base(), &retry, "pending", std::nullopt},
      {"attempt dead", base(), &dead, "dead", std::nullopt},
      {"an attempt beats added-after (a resend)", with(added_after), &delivered, "delivered", std::nullopt},
      // 3. Neither: an endpoint added after the event never gets it.
      {"added after the event → not_routed", with(added_after), nullptr, "not_routed", added_after_reason},
      {"added after beats merged", with([&](event_facts& f) {
         added_after(f);
         merged(f);
       }), nullptr, "not_routed",
       added_after_reason},
      // 4. Merged into a newer state of its merge key that has a row there.
      {"merged", with(merged), nullptr, "merged", merged_reason},
      {"merged beats walhook's records", with([&](event_facts& f) {
         merged(f);
         in_snapshot(f);
       }), nullptr, "merged", merged_reason},
      // 5. walhook's records, for a routed endpoint: a given-up cursor range, the cursor, the
      // delivered snapshot (inferred delivered unless a newer state of its merge key exists).
      {"a given-up cursor range → dead", with([](event_facts& f) {
         in_snapshot(f);
         f.dead_ranges[1] = {.id = 7, .reason = "behind since 2027-02-01T00:00:00Z", .at = "2027-02-04T00:00:00Z"};
       }), nullptr, "dead", dead_range_reason},
      {"its cursor owes it → pending, whatever the snapshot says", with([](event_facts& f) {
         in_snapshot(f);
         f.cursors[1] = {.covers = false, .since = "2027-02-01T00:00:00Z"};
       }), nullptr, "pending", cursor_owes_reason},
      {"its cursor covers it → delivered (inferred)", with([](event_facts& f) {
         f.stream = {.xid = "1234", .slot = "walhook", .in_delivered_snapshot = false, .doubt = "", .unavailable = ""};
         f.cursors[1] = {.covers = true, .since = "2027-02-01T00:00:00Z"};
       }), nullptr, "delivered", cursor_covers_reason},
      {"in the delivered snapshot → delivered (inferred)", with(in_snapshot), nullptr, "delivered", snapshot_reason},
      {"an attempt beats the snapshot", with(in_snapshot), &retry, "pending", std::nullopt},
      {"added after beats the snapshot", with([&](event_facts& f) {
         in_snapshot(f);
         added_after(f);
       }), nullptr, "not_routed", added_after_reason},
      {"in the snapshot, a newer state of its merge key → unknown", with([](event_facts& f) {
         in_snapshot(f);
         f.newer_states[1] = "00000000-0000-4000-8000-000000000003";
       }), nullptr, "unknown", newer_state_reason},
      {"in the snapshot, with doubt (a backfill running) → unknown", with([](event_facts& f) {
         in_snapshot(f);
         f.stream.doubt = "backfill 3 is not finished";
       }), nullptr, "unknown", doubt_reason},
      {"not in the snapshot yet → unknown", with([](event_facts& f) {
         f.stream = {.xid = "1234", .slot = "walhook", .in_delivered_snapshot = false, .doubt = "", .unavailable = ""};
       }), nullptr, "unknown", not_yet_reason},
      {"no snapshot to ask → unknown, saying why", with([](event_facts& f) {
         f.stream = {.xid = "1234", .slot = "nope", .in_delivered_snapshot = std::nullopt, .doubt = "",
                     .unavailable = "walhook has recorded no delivered snapshot for slot nope"};
       }), nullptr, "unknown",
       std::string("no delivery row and no attempt in this walhook's in-memory record, and walhook's records cannot "
                   "tell: walhook has recorded no delivered snapshot for slot nope")},
      {"a cursor without an xid to tell: the record's words", with([](event_facts& f) {
         f.cursors[1] = {.covers = std::nullopt, .since = "2027-02-01T00:00:00Z"};
       }), nullptr, "unknown", in_window_reason},
      // 6. Unknown, never pending: what may have happened depends on the record's window.
      {"unknown, newer than the record's oldest", base(), nullptr, "unknown", in_window_reason},
      {"unknown, older than the record's oldest", with([](event_facts& f) { f.created_at = micros(t0 - 1s); }), nullptr,
       "unknown", out_of_window_reason},
      {"unknown, as old as the record's oldest", with([](event_facts& f) { f.created_at = micros(t0); }), nullptr,
       "unknown", out_of_window_reason},
      {"unknown, empty record", with([](event_facts& f) { f.window.kept = 0; }), nullptr, "unknown",
       out_of_window_reason},
      {"unknown, the outbox row gone", with([](event_facts& f) { f.created_at.reset(); }), nullptr, "unknown",
       out_of_window_reason},
  };
  for (const auto& r : rows) {
    CAPTURE(r.what);
    const auto v = verdict_for(1, r.facts, r.last);
    CHECK(v.endpoint_id == 1);
    CHECK(v.verdict == r.verdict);
    CHECK(v.reason == r.reason);
  }
}

TEST_CASE("verdict_for: routed, and why not") {
  auto f = base();
  f.routes.push_back({.endpoint_id = 2, .added_after = true, .endpoint_created_at = "2027-01-01T00:00:00Z"});
  struct row {
    const char* what;
    std::int64_t endpoint;
    bool routed;
    std::optional<std::string> routed_reason;
  };
  const row rows[] = {
      {"matched now", 1, true, std::nullopt},
      {"matched, but added after the event", 2, false, added_after_reason},
      {"not matched now (a row or an attempt shows it)", 3, false, std::string(no_match_reason)},
  };
  for (const auto& r : rows) {
    CAPTURE(r.what);
    const auto v = verdict_for(r.endpoint, f, nullptr);
    CHECK(v.routed == r.routed);
    CHECK(v.routed_reason == r.routed_reason);
  }
}

TEST_CASE("event_verdicts: the endpoints routed, with a row or with an attempt, by id; 404 when nothing knows it") {
  auto f = base();  // endpoint 1 routed
  f.row_status[5] = "dead";
  f.recent = {attempt(3, "retry", 1), attempt(3, "delivered", 2), attempt(1, "retry", 3)};
  const auto all = event_verdicts(f);
  REQUIRE(all);
  REQUIRE(all->size() == 3);
  CHECK((*all)[0] == endpoint_verdict{.endpoint_id = 1, .routed = true, .routed_reason = std::nullopt,
                                      .verdict = "pending", .reason = std::nullopt});
  // The newest of its attempts decides (the record's entries come oldest first).
  CHECK((*all)[1] == endpoint_verdict{.endpoint_id = 3, .routed = false, .routed_reason = no_match_reason,
                                      .verdict = "delivered", .reason = std::nullopt});
  CHECK((*all)[2] == endpoint_verdict{.endpoint_id = 5, .routed = false, .routed_reason = no_match_reason,
                                      .verdict = "dead", .reason = std::nullopt});

  struct row {
    const char* what;
    event_facts facts;
    bool found;
    std::size_t endpoints;
  };
  event_facts gone;  // no outbox row, no route, no row, no attempt
  event_facts only_row = gone;
  only_row.row_status[2] = "delivered";
  event_facts only_attempt = gone;
  only_attempt.recent = {attempt(4, "dead")};
  event_facts unrouted = gone;
  unrouted.outbox_row = true;
  const row rows[] = {
      {"nothing knows it: 404", gone, false, 0},
      {"the outbox row gone, a delivery row left", only_row, true, 1},
      {"the outbox row gone, an attempt in the record", only_attempt, true, 1},
      {"the outbox row, routed nowhere", unrouted, true, 0},
  };
  for (const auto& r : rows) {
    CAPTURE(r.what);
    const auto v = event_verdicts(r.facts);
    CHECK(v.has_value() == r.found);
    if (v) CHECK(v->size() == r.endpoints);
  }
}

TEST_CASE("record_note: what the in-memory record covers") {
  CHECK(record_note({.kept = 0, .oldest = {}}) ==
        "first-try successes leave no row with --record failed: they are shown from the in-memory record of this "
        "walhook (its last 0 attempts, lost at restart), or inferred from walhook's delivered snapshot once it covers them");
  CHECK(record_note({.kept = 2, .oldest = t0}) ==
        "first-try successes leave no row with --record failed: they are shown from the in-memory record of this "
        "walhook (its last 2 attempts since 2027-01-15T08:00:00.000000Z, lost at restart), or inferred from walhook's "
        "delivered snapshot once it covers them");
}
