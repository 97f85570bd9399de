// `walhook recover`: an operator's backfill. Asks the walhook streaming the slot (each shard's,
// when sharded) to deliver again, through its normal path, every outbox event created in
// [since, until) (of one tenant); with --wait, waits until it is done (relay/engine/recovery.hpp).

#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/cli/plural.hpp"
#include "relay/core/shard.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/schema.hpp"

#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

namespace walhook::relay::cli {

namespace {

struct recover_args {
  std::string database_url;
  std::string slot = wal::stream_options{}.slot;  ///< the walhook (its slot) that runs the backfill
  std::string since;                              ///< timestamptz text, required
  std::string until;                              ///< optional
  std::string tenant;                             ///< optional
  int shards = 0;     ///< N: one request to each shard's walhook (slots <slot>_K_of_N); 0: the layout's
  bool wait = false;  ///< wait until walhook has delivered or stored every delivery
  int wait_timeout_s = 600;
};

/// One request per walhook (each shard backfills its own tenants' events, relay/core/shard.hpp),
/// in one transaction: their ids, comma-separated.
std::string request(blocking_db& db, const recover_args& a, const std::vector<std::string>& slots) {
  const std::string reason = fmt::format("operator: walhook recover --since {}{}{}", a.since,
                                         a.until.empty() ? "" : " --until " + a.until,
                                         a.tenant.empty() ? "" : " --tenant " + a.tenant);
  std::string ids;
  db.exec("BEGIN");
  for (const auto& slot : slots)
    ids += (ids.empty() ? "" : ", ") + std::string(db.exec(R"sql(
INSERT INTO walhook.recoveries (slot_name, reason, since_time, until_time, tenant_id, requested_by)
VALUES ($1, $2, $3::timestamptz, $4::timestamptz, $5, current_user) RETURNING id)sql",
                                                           pg::params{slot, reason, a.since, text_or_null(a.until),
                                                                      text_or_null(a.tenant)})
                                                       .value(0, 0));
  db.exec("COMMIT");
  return ids;
}

/// --wait: polls the requests until every one is done, or throws after --wait-timeout.
int wait_done(blocking_db& db, const recover_args& a, const std::string& ids, const std::vector<std::string>& slots) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{a.wait_timeout_s};
  for (;;) {
    auto st = db.exec(R"sql(
SELECT count(*) FILTER (WHERE state <> 'done'), coalesce(sum(events), 0), coalesce(sum(deliveries), 0)
  FROM walhook.recoveries WHERE id = ANY ($1::bigint[]))sql",
                      pg::params{"{" + ids + "}"});
    if (st.value(0, 0) == "0") {
      std::cout << "recovery " << ids << " done: " << plural(std::stoll(std::string(st.value(0, 1))), "event", "events")
                << ", " << plural(std::stoll(std::string(st.value(0, 2))), "delivery", "deliveries")
                << " delivered or stored (one already recorded delivered in walhook.deliveries is not sent "
                   "again when it has to wait there: walhook replay covers those)\n";
      return 0;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      throw cli_error(fmt::format("recovery {} is not done after {} s (is walhook run streaming slot {}?)", ids,
                                  a.wait_timeout_s, slots.size() > 1 ? "each of " + slots.front() + " …" : slots.front()));
    std::this_thread::sleep_for(std::chrono::milliseconds{200});
  }
}

int recover(const recover_args& a) {
  if (a.since.empty()) throw cli_error("give --since TIME (events created at or after it are delivered again)");
  blocking_db db(a.database_url);
  operations::require_schema(db);
  const int layout = operations::shard_count(db);
  if (a.shards != 0 && a.shards != layout)
    throw cli_error(fmt::format("this database is split into {} shard(s), not {}: leave --shards out", layout, a.shards));
  if (!a.until.empty() &&
      db.exec("SELECT $1::timestamptz >= $2::timestamptz", pg::params{a.since, a.until}).value(0, 0) == "t")
    throw cli_error(fmt::format("--until {} is not after --since {}: the range is empty", a.until, a.since));
  std::vector<std::string> slots;
  for (int k = 0; k < layout; ++k) slots.push_back(shard_slot(a.slot, {k, layout}));
  auto count = db.exec(R"sql(
SELECT count(*) FROM walhook.outbox
 WHERE created_at >= $1::timestamptz AND ($2::timestamptz IS NULL OR created_at < $2::timestamptz)
   AND ($3::text IS NULL OR tenant_id = $3))sql",
                       pg::params{a.since, text_or_null(a.until), text_or_null(a.tenant)});
  const std::string ids = request(db, a, slots);
  std::cout << "recovery " << ids << ": " << plural(std::stoll(std::string(count.value(0, 0))), "event", "events")
            << " to deliver again through the walhook"
            << (slots.size() > 1 ? "s streaming slots " + slots.front() + " … " + slots.back() : " streaming slot " + slots.front())
            << " (same webhook-ids: receivers that dedupe see each once)\n";
  if (a.wait) return wait_done(db, a, ids, slots);
  std::cout << "walhook run picks it up within 2 s; see walhook status for its progress\n";
  return 0;
}

}  // namespace

command add_recover(CLI::App& app) {
  auto a = std::make_shared<recover_args>();
  auto* c = app.add_subcommand(
      "recover", "Deliver again every event created in a time range (a slot lost without a recorded snapshot, or any "
                 "case walhook cannot see), through the running walhook");
  add_database_url(c, a->database_url);
  c->add_option("--since", a->since, "Events created at or after (timestamptz)")->required();
  c->add_option("--until", a->until, "Events created before (timestamptz; default: no end)");
  c->add_option("--tenant", a->tenant, "Only this tenant's events");
  c->add_option("--slot", a->slot, "The slot of the walhook that delivers them")->capture_default_str();
  c->add_option("--shards", a->shards,
                "N: ask each of N shards' walhooks (slots <slot>_K_of_N); default: the database's layout")
      ->check(CLI::Range(1, max_shards));
  c->add_flag("--wait", a->wait, "Wait until every delivery is delivered or stored");
  c->add_option("--wait-timeout", a->wait_timeout_s, "Seconds --wait waits at most")
      ->capture_default_str()
      ->check(positive);
  return {c, [a] { return recover(*a); }};
}

}  // namespace walhook::relay::cli
