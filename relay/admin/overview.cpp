// GET /api/overview (docs/api.md): what this walhook knows live, and the slot's WAL lag read
// from PostgreSQL; while the database fails, the live fields still answer.

#include "relay/admin/db_worker.hpp"
#include "relay/admin/routes.hpp"
#include "relay/admin/views.hpp"
#include "relay/core/outcome_log.hpp"
#include "relay/core/version.hpp"
#include "relay/engine/engine.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/status.hpp"

#include "common/json_writer.hpp"
#include "common/time.hpp"

namespace walhook::relay {
namespace asio = boost::asio;

namespace {

/// pg_replication_slots' numbers of the slot, as the database answered them.
struct slot_numbers {
  std::optional<std::int64_t> lag_bytes;  ///< null on a standby (pg_is_in_recovery)
  std::optional<std::string> wal_status;
};

/// What the overview shows: the live snapshot and the record's size, taken on the engine's executor.
struct overview_facts {
  live_status live;
  std::size_t kept = 0;
  std::size_t capacity = 0;
  std::chrono::system_clock::time_point oldest{};
};

std::optional<slot_numbers> read_slot(blocking_db& db, const std::string& slot) {
  auto r = db.exec("SELECT CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_wal_lsn_diff(pg_current_wal_lsn(), "
                   "confirmed_flush_lsn)::bigint END, wal_status FROM pg_replication_slots WHERE slot_name = $1",
                   pg::params{slot});
  if (r.rows() == 0) return std::nullopt;
  return slot_numbers{.lag_bytes = r.optional_integer(0, 0), .wal_status = r.optional_value(0, 1)};
}

/// The overview's fields; `slot` the database's numbers if it answered and has the slot,
/// `database` "ok" or "unreachable".
api_response overview_view(const overview_facts& f, const std::optional<slot_numbers>& slot,
                           std::string_view database) {
  const live_status& live = f.live;
  json_writer j;
  j.begin_object()
      .field("version", std::string(walhook_version))
      .field("instance", live.instance)
      .field("slot", live.slot)
      .field("streaming", live.streaming)
      .key("slot_lag_seconds")
      .number(live.lag_seconds);
  if (slot) {
    j.field("slot_lag_bytes", slot->lag_bytes).field("slot_wal_status", slot->wal_status);
  } else {
    j.key("slot_lag_bytes").null();
    j.field("slot_wal_status", live.slot_wal_status);  // as the engine last read it
  }
  j.field("confirmed_lsn", live.confirmed_lsn)
      .field("queued", static_cast<std::int64_t>(live.queued))
      .field("in_flight", static_cast<std::int64_t>(live.in_flight))
      .key("recent_outcomes")
      .begin_object()
      .field("kept", static_cast<std::int64_t>(f.kept))
      .field("capacity", static_cast<std::int64_t>(f.capacity))
      .key("since");
  if (f.kept) j.string(format_iso8601(f.oldest));
  else j.null();
  j.end_object().field("database", database).end_object();
  return api_response{200, j.take()};
}

/// The worker's answer, or `fallback` if the database failed (503/504): what memory knows.
asio::awaitable<api_response> or_from_memory(asio::awaitable<api_response> from_db, api_response fallback) {
  auto a = co_await std::move(from_db);
  if (a.status == 503 || a.status == 504) co_return fallback;
  co_return a;
}

}  // namespace

asio::awaitable<api_response> get_overview(const route_context& ctx) {
  const auto& log = ctx.eng.recent_outcomes();
  overview_facts f{.live = ctx.eng.live(), .kept = log.size(), .capacity = log.capacity(), .oldest = log.oldest()};
  // PostgreSQL down: the live fields still answer (the console shows its cards and the error).
  auto fallback = overview_view(f, std::nullopt, "unreachable");
  return or_from_memory(
      ctx.worker.run([f](blocking_db& db) { return overview_view(f, read_slot(db, f.live.slot), "ok"); }),
      std::move(fallback));
}

}  // namespace walhook::relay
