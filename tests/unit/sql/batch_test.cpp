// sql/batch.hpp: the statements one state-store batch becomes (pure; the SQL itself runs against
// a real PostgreSQL in tests/integration/state_store.cpp).

#include "sql/batch.hpp"
#include "sql/statements.hpp"

#include <doctest/doctest.h>
#include <simdjson.h>

#include <string>
#include <vector>

using namespace walhook;
using namespace walhook::sql;
using namespace std::chrono_literals;

namespace {

upsert_delivery pending(std::int64_t endpoint, std::string event, std::optional<std::string> key = {}) {
  upsert_delivery u;
  u.endpoint_id = endpoint;
  u.event_id = std::move(event);
  u.merge_key = std::move(key);
  u.event_created_at = "2027-01-15T08:00:00.000000Z";
  u.commit_lsn = lsn{0x16B374D848};
  u.outcome.status = delivery_status::pending;
  u.outcome.attempts = 1;
  u.outcome.next_attempt_in = std::chrono::milliseconds{30000};
  u.outcome.last_error = "HTTP 500";
  return u;
}

/// The jsonb rows of a statement's first parameter.
std::vector<std::string> rows_of(const pg::statement& st, const char* field) {
  simdjson::dom::parser parser;
  auto doc = parser.parse(*st.args.at(0));
  std::vector<std::string> out;
  for (auto row : doc.get_array()) {
    auto v = row[field];
    if (v.is_null()) out.push_back("null");
    else if (v.is_string()) out.emplace_back(std::string_view(v.get_string()));
    else out.push_back(std::to_string(int64_t(v.get_int64())));
  }
  return out;
}

health_write health(std::int64_t endpoint, int failures) {
  health_write h;
  h.endpoint_id = endpoint;
  h.consecutive_failures = failures;
  return h;
}

update_delivery update(std::optional<std::int64_t> row, delivery_key key, delivery_status status) {
  update_delivery u;
  u.row_id = row;
  u.key = std::move(key);
  u.outcome.status = status;
  u.outcome.attempts = 1;
  return u;
}

}  // namespace

TEST_CASE("build_batch: nothing to write, no statement") { CHECK(build_batch({}).empty()); }

TEST_CASE("build_batch: one statement per kind, in a fixed order; upserts carry every field") {
  std::vector<sql::write> w;
  w.push_back(progress_write{"slot", "sys", lsn{0x500}, {}});
  w.push_back(health(7, 3));
  w.push_back(update(42, {}, delivery_status::delivered));
  w.push_back(pending(1, "e1"));
  auto st = build_batch(w);
  REQUIRE(st.size() == 4);
  CHECK(st[0].sql == statements::upsert_deliveries);
  CHECK(st[1].sql == statements::update_deliveries);
  CHECK(st[2].sql == statements::write_health);
  CHECK(st[3].sql == statements::record_progress);
  CHECK(st[3].args == pg::params{"slot", "sys", "0/500", std::nullopt, "0"});
  CHECK(rows_of(st[0], "commit_lsn") == std::vector<std::string>{"16/B374D848"});
  CHECK(rows_of(st[0], "status") == std::vector<std::string>{"pending"});
  CHECK(rows_of(st[0], "next_attempt_in_ms") == std::vector<std::string>{"30000"});
  CHECK(rows_of(st[0], "last_error") == std::vector<std::string>{"HTTP 500"});
  CHECK(rows_of(st[0], "ord") == std::vector<std::string>{"3"});
  CHECK(rows_of(st[1], "id") == std::vector<std::string>{"42"});
  CHECK(rows_of(st[1], "status") == std::vector<std::string>{"delivered"});
}

TEST_CASE("build_batch: updates by row id or by (endpoint, event)") {
  std::vector<sql::write> w;
  w.push_back(update(9, {}, delivery_status::pending));
  w.push_back(update(std::nullopt, {3, "e3"}, delivery_status::delivered));
  auto st = build_batch(w);
  REQUIRE(st.size() == 1);
  CHECK(rows_of(st[0], "id") == std::vector<std::string>{"9", "null"});
  CHECK(rows_of(st[0], "endpoint_id") == std::vector<std::string>{"null", "3"});
  CHECK(rows_of(st[0], "event_id") == std::vector<std::string>{"null", "e3"});
}

TEST_CASE("build_batch: pending upserts with one (endpoint, merge key) merge into the newest") {
  std::vector<sql::write> w;
  w.push_back(pending(1, "old", "k"));
  w.push_back(pending(1, "fact"));
  w.push_back(pending(2, "other endpoint", "k"));
  w.push_back(pending(1, "new", "k"));
  auto dead = pending(1, "dead one", "k");
  dead.outcome.status = delivery_status::dead;  // only pending rows merge
  w.push_back(dead);
  auto st = build_batch(w);
  REQUIRE(st.size() == 1);
  CHECK(rows_of(st[0], "event_id") == std::vector<std::string>{"fact", "other endpoint", "new", "dead one"});
}

TEST_CASE("build_batch: within a batch the newest event by commit LSN wins, whatever order the failures came in") {
  // Attempts of one entity's updates ran at the same time; the newest one's failure was queued first.
  auto newest = pending(1, "newest", "k");
  newest.commit_lsn = lsn{0x3000};
  auto older = pending(1, "older", "k");
  older.commit_lsn = lsn{0x2000};
  auto oldest = pending(1, "oldest", "k");
  oldest.commit_lsn = lsn{0x1000};
  std::vector<sql::write> w{newest, oldest, older};
  auto st = build_batch(w);
  REQUIRE(st.size() == 1);
  CHECK(rows_of(st[0], "event_id") == std::vector<std::string>{"newest"});
}

TEST_CASE("build_batch: the last health write per endpoint wins and brings its disable; progress keeps the highest") {
  std::vector<sql::write> w;
  auto h1 = health(5, 1);
  auto h2 = health(5, 2);
  h2.disable = true;
  h2.disabled_reason = "HTTP 410 Gone";
  w.push_back(h1);
  w.push_back(health(6, 9));
  w.push_back(h2);
  w.push_back(progress_write{"s", "sys", lsn{0x900}, "10:12:10,11"});
  w.push_back(progress_write{"s", "sys", lsn{0x800}, {}});
  w.push_back(progress_write{"s", "other", lsn{0x100}, {}});
  // Of another timeline (the old primary's, retried after a failover): its own statement, which
  // the server ignores; it never raises the position of this one.
  w.push_back(progress_write{"s", "sys", lsn{0x9000}, "20:22:", 1});
  w.push_back(progress_write{"s", "sys", lsn{0x700}, {}, 2});
  auto st = build_batch(w);
  REQUIRE(st.size() == 6);
  CHECK(rows_of(st[0], "endpoint_id") == std::vector<std::string>{"5", "6"});
  CHECK(rows_of(st[0], "consecutive_failures") == std::vector<std::string>{"2", "9"});
  CHECK(st[1].sql == statements::disable_endpoints);
  CHECK(st[1].args == pg::params{"{5}"});
  // The highest position, with the last delivered snapshot given (none: the recorded one stays).
  CHECK(st[2].args == pg::params{"s", "other", "0/100", std::nullopt, "0"});
  CHECK(st[3].args == pg::params{"s", "sys", "0/900", "10:12:10,11", "0"});
  CHECK(st[4].args == pg::params{"s", "sys", "0/9000", "20:22:", "1"});
  CHECK(st[5].args == pg::params{"s", "sys", "0/700", std::nullopt, "2"});
}

TEST_CASE("build_batch: a mark ('sending') is an upsert like any other and never merges") {
  std::vector<sql::write> w;
  auto mark = pending(1, "e", "k");
  mark.outcome.status = delivery_status::sending;
  w.push_back(mark);
  w.push_back(pending(1, "e2", "k"));
  auto st = build_batch(w);
  REQUIRE(st.size() == 1);
  CHECK(rows_of(st[0], "status") == std::vector<std::string>{"sending", "pending"});
}

TEST_CASE("statements: every embedded statement is there, non-empty") {
  for (auto s : {statements::upsert_deliveries, statements::update_deliveries, statements::write_health,
                 statements::disable_endpoints, statements::record_progress, statements::claim_due, statements::next_due,
                 statements::reset_stale_sending, statements::endpoints_with_backlog, statements::load_progress,
                 statements::slot_replaced, statements::begin_slot_incident, statements::open_recoveries,
                 statements::recovery_event_ids, statements::recovery_events, statements::recovery_done,
                 statements::delete_expired, statements::load_health,
                 statements::load_endpoints, statements::oldest_pending})
    CHECK(s.find("walhook.") != std::string_view::npos);
}

TEST_CASE("build_batch: a streamed removal forgets the copy of the endpoint (or all of them), by xid") {
  std::vector<sql::write> w{removal_streamed{7, 1234}, removal_streamed{std::nullopt, 99}};
  auto st = build_batch(w);
  // Each: wait until the removing transaction is visible to everyone, then forget its copy.
  REQUIRE(st.size() == 4);
  CHECK(st[0].sql == statements::await_removal);
  CHECK(st[0].args == pg::params{std::string("7")});
  CHECK(st[1].sql.find("DELETE FROM walhook.endpoints_removed") != std::string::npos);
  CHECK(st[1].args == pg::params{std::string("7"), std::string("1234")});
  CHECK(st[2].args == pg::params{std::nullopt});
  CHECK(st[3].args == pg::params{std::nullopt, std::string("99")});
}

TEST_CASE("build_batch: due times and pauses travel as delays, never as walhook's clock") {
  upsert_delivery u;
  u.endpoint_id = 1;
  u.event_id = "e";
  u.event_created_at = "2026-01-01T00:00:00.000000Z";
  u.outcome.next_attempt_in = std::chrono::milliseconds{-5};  // overdue: due now, never negative
  health_write h;
  h.endpoint_id = 1;
  h.paused_for = std::chrono::milliseconds{60000};
  std::vector<sql::write> w{u, h};
  auto st = build_batch(w);
  REQUIRE(st.size() == 2);
  CHECK(rows_of(st[0], "next_attempt_in_ms") == std::vector<std::string>{"0"});
  CHECK(rows_of(st[1], "paused_for_ms") == std::vector<std::string>{"60000"});
  CHECK(st[0].args[0]->find("next_attempt_at") == std::string::npos);
}

TEST_CASE("build_batch: events walhook publishes are one outbox insert, after health and disable, in queue order") {
  publish_event a{.tenant_id = "walhook-operator", .event_type = "walhook.endpoint.disabled", .aggregate_id = "walhook.endpoint:3",
                  .merge_key = std::nullopt, .payload = R"({"endpoint_id":3})", .endpoint_id = std::nullopt};
  publish_event b{.tenant_id = "acme", .event_type = "walhook.endpoint.disabled", .aggregate_id = "walhook.endpoint:3",
                  .merge_key = std::nullopt, .payload = R"({"endpoint_id":3})", .endpoint_id = 5};
  health_write h = health(3, 1);
  h.disable = true;
  std::vector<sql::write> writes{h, a, b};
  auto statements = build_batch(writes);
  REQUIRE(statements.size() == 3);
  CHECK(statements[0].sql == statements::write_health);
  CHECK(statements[1].sql == statements::disable_endpoints);
  CHECK(statements[2].sql == statements::publish_events);
  CHECK(rows_of(statements[2], "tenant_id") == std::vector<std::string>{"walhook-operator", "acme"});
  CHECK(rows_of(statements[2], "endpoint_id") == std::vector<std::string>{"null", "5"});
  CHECK(rows_of(statements[2], "merge_key") == std::vector<std::string>{"null", "null"});
  // The payload travels as JSON, not as a string of it.
  simdjson::dom::parser parser;
  auto doc = parser.parse(*statements[2].args.at(0));
  CHECK(int64_t(doc.at(0)["payload"]["endpoint_id"]) == 3);
}
