#include "relay/engine/recovery.hpp"

#include "common/log.hpp"
#include "relay/core/rows.hpp"
#include "relay/engine/dispatcher.hpp"
#include "relay/engine/stream_handler.hpp"
#include "sql/state_store.hpp"
#include "wal/errc.hpp"
#include "wal/replication_stream.hpp"

#include "common/pg_connection.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <span>

namespace walhook::relay {
namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

namespace {
/// Rows read per query while backfilling: before streaming (nothing else waits), and while
/// streaming (an operator's, fed in small steps between the stream's own work).
constexpr std::size_t backfill_batch = 500;
constexpr std::size_t background_batch = 100;
/// Event ids read per query (memory stays bounded whatever the backfill's size).
constexpr int ids_page = 20000;
/// The commit LSN backfilled events carry (merge order, and claim order for aggregate-ordered
/// endpoints). A slot backfill's events committed before the new slot's consistent point and
/// after everything walhook handled: just below the consistent point, so they come after any
/// pending row of the old slot and before everything the new slot streams. An operator's resend
/// of the past: before everything (a pending newer state of an entity wins).
lsn backfill_lsn(const sql::recovery& r) { return r.slot_lsn.valid() ? lsn{r.slot_lsn.value() - 1} : lsn{1}; }
}  // namespace

slot_recovery::slot_recovery(sql::state_store& store, wal::replication_stream& stream, lsn_tracker& tracker,
                             stream_handler& handler, dispatcher& deliveries, std::string slot)
    : store_(store), stream_(stream), tracker_(tracker), handler_(handler), deliveries_(deliveries), slot_(std::move(slot)) {}

asio::awaitable<error_code> slot_recovery::prepare_slot(error_code opened) {
  created_at_.reset();
  candidates_.clear();
  const bool lost = opened == wal::errc::slot_missing || opened == wal::errc::slot_invalidated;
  auto open = co_await store_.open_recoveries(slot_);
  if (!open) co_return open.error();
  const bool interrupted = std::any_of(open->begin(), open->end(), [](const auto& r) { return r.state == "creating_slot"; });
  if (!lost && !interrupted) co_return error_code{};

  const auto& system_id = stream_.info().system_id;
  auto record = co_await store_.load_progress(slot_);
  if (!record) co_return record.error();
  // walhook streamed this slot on this cluster before: its absence loses events unless backfilled.
  const bool incident = interrupted || (record->confirmed.valid() && record->system_id == system_id);
  const std::string reason = opened == wal::errc::slot_invalidated ? "slot invalidated"
                             : opened == wal::errc::slot_missing  ? "slot missing"
                                                                  : "slot replacement interrupted";
  std::optional<std::int64_t> incident_id;
  if (incident) {
    auto begun = co_await store_.begin_slot_incident(slot_, reason, system_id);
    if (!begun) co_return begun.error();
    incident_id = begun->id;
    if (begun->recorded_now) {
      ++incidents_;
      log::error("replication.slot_lost",
                 {{"slot", slot_}, {"reason", reason}, {"detail", stream_.last_error()}, {"incident", begun->id},
                  {"last_confirmed_lsn", record->confirmed.to_string()},
                  {"backfill", begun->bounded ? "the outbox rows committed since the last delivered snapshot are delivered "
                                                "before the new slot is read"
                                              : "impossible: no delivered snapshot was recorded (schema before version 5); "
                                                "use walhook recover --since <time> for the events since walhook last ran"}});
    } else {  // a replacement that failed or was interrupted: the same incident, once more
      log::info("replication.slot_replacement_retry",
                {{"slot", slot_}, {"incident", begun->id}, {"detail", stream_.last_error()}});
    }
  }
  auto created = co_await stream_.async_create_slot();
  if (!created) {
    log::error("replication.slot_create_failed", {{"slot", slot_}, {"error", stream_.last_error()}});
    co_return created.error();
  }
  // The exported snapshot lives until the replication connection's next command: import it now.
  auto snapshot = co_await store_.import_snapshot(created->snapshot_name);
  if (!snapshot) {
    stream_.close();
    co_return snapshot.error();
  }
  if (auto ec = co_await store_.slot_replaced(slot_, system_id, created->consistent_point, *snapshot, incident_id)) {
    stream_.close();
    co_return ec;
  }
  created_at_ = created->consistent_point;
  if (incident)
    log::info("replication.slot_replaced", {{"slot", slot_}, {"consistent_point", created->consistent_point.to_string()},
                                            {"incident", *incident_id}});
  else
    log::warn("replication.slot_created",
              {{"slot", slot_}, {"consistent_point", created->consistent_point.to_string()},
               {"note", "the slot did not exist: events committed before this moment are not in it (walhook migrate "
                        "creates it ahead of time)"}});
  co_return error_code{};
}

asio::awaitable<void> slot_recovery::wait_a_little(bool before_streaming) {
  if (before_streaming) {
    (void)co_await stream_.async_hold(50ms);  // status updates go on meanwhile
    co_return;
  }
  asio::steady_timer t(co_await asio::this_coro::executor, 50ms);
  co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
}

asio::awaitable<error_code> slot_recovery::feed(bool before_streaming, std::function<bool()> keep_going) {
  auto open = co_await store_.open_recoveries(slot_);
  if (!open) co_return open.error();
  for (const auto& r : *open) {
    if (r.state != "pending" || fed_.contains(r.id)) continue;
    if (auto ec = co_await feed_one(r, before_streaming, keep_going)) co_return ec;
  }
  co_return error_code{};
}

asio::awaitable<error_code> slot_recovery::feed_one(const sql::recovery& r, bool before_streaming,
                                                    const std::function<bool()>& keep_going) {
  running run{tracker_.begin_detached(), r.reason, 0, 0, steady_clock::now()};
  const lsn commit_lsn = backfill_lsn(r);
  const std::size_t batch = before_streaming ? backfill_batch : background_batch;
  // The stream is not read while a backfill goes first: a status update every 200 ms keeps a
  // walsender with a short wal_sender_timeout (it counts from the client's last message; 1 s is
  // allowed) alive.
  auto last_status = steady_clock::now();
  auto keep_walsender = [&]() -> asio::awaitable<void> {
    if (!before_streaming || steady_clock::now() - last_status < 200ms) co_return;
    (void)co_await stream_.async_send_status();
    last_status = steady_clock::now();
  };
  auto fail = [&](error_code ec) {
    tracker_.end_detached(run.ticket);
    return ec;
  };
  log::info("recovery.backfill_started", {{"slot", slot_}, {"recovery", r.id}, {"reason", r.reason}});
  std::int64_t after = 0;
  for (;;) {
    auto page = co_await store_.recovery_event_ids(r.id, after, ids_page);
    if (!page) co_return fail(page.error());
    if (page->empty()) break;
    after = page->back().first;
    for (std::size_t at = 0; at < page->size(); at += batch) {
      // The byte budget and full queues hold a backfill like the stream; an operator's backfill,
      // fed while streaming, also leaves the stream most of the room.
      while (deliveries_.must_hold() || (!before_streaming && !deliveries_.has_headroom())) {
        if (!keep_going()) break;
        co_await wait_a_little(before_streaming);
        co_await keep_walsender();
      }
      if (!keep_going()) co_return fail(pg::errc::cancelled);
      const auto n = std::min(batch, page->size() - at);
      std::vector<std::string> ids;
      ids.reserve(n);
      for (std::size_t k = at; k < at + n; ++k) ids.push_back((*page)[k].second);
      auto rows = co_await store_.recovery_events(ids);
      if (!rows) co_return fail(rows.error());
      const auto rel = relation_of_columns(rows->columns);
      const auto xid_col = static_cast<std::size_t>(
          std::find(rows->columns.begin(), rows->columns.end(), "xid") - rows->columns.begin());
      for (const auto& row : rows->rows) {
        const auto tuple = tuple_of_text(row);
        // Its transaction's xid: an endpoint that follows the outbox reads it back itself if owed.
        std::uint32_t xid = 0;
        if (xid_col < row.size() && row[xid_col]) xid = static_cast<std::uint32_t>(std::stoull(*row[xid_col]));
        run.deliveries +=
            static_cast<std::int64_t>(handler_.deliver_row(row_view(rel, tuple), commit_lsn, run.ticket, xid));
        ++run.events;
      }
      co_await keep_walsender();
    }
    if (page->size() < static_cast<std::size_t>(ids_page)) break;
  }
  events_backfilled_ += static_cast<std::uint64_t>(run.events);
  log::info("recovery.backfill_fed", {{"recovery", r.id}, {"events", run.events}, {"deliveries", run.deliveries}});
  fed_.emplace(r.id, std::move(run));
  co_return error_code{};
}

asio::awaitable<void> slot_recovery::finish() {
  for (auto it = fed_.begin(); it != fed_.end();) {
    auto& [id, run] = *it;
    if (tracker_.detached_outstanding(run.ticket) > 0) {
      ++it;
      continue;
    }
    if (auto ec = co_await store_.recovery_done(id, run.events, run.deliveries)) {
      log::warn("recovery.done_not_recorded", {{"recovery", id}, {"error", store_.last_read_error()}});
      co_return;  // tried again on the next call
    }
    const double seconds = std::chrono::duration<double>(steady_clock::now() - run.started).count();
    log::info("recovery.done", {{"slot", slot_}, {"recovery", id}, {"reason", run.reason}, {"events", run.events},
                                {"deliveries", run.deliveries}, {"seconds", seconds}});
    tracker_.end_detached(run.ticket);
    it = fed_.erase(it);
  }
}

asio::awaitable<void> slot_recovery::run(std::function<bool()> active) {
  co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
  asio::steady_timer tick(co_await asio::this_coro::executor);
  auto last_check = steady_clock::now();
  while (active()) {
    tick.expires_after(200ms);
    co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) co_return;
    co_await finish();
    if (steady_clock::now() - last_check < 2s) continue;
    last_check = steady_clock::now();
    if (auto ec = co_await feed(false, active); ec && ec != pg::errc::cancelled)
      log::warn("recovery.feed_failed", {{"error", store_.last_read_error()}});
  }
}

asio::awaitable<void> slot_recovery::sample_snapshot() {
  if (auto c = co_await store_.current_snapshot()) add_candidate(std::move(c->first), c->second);
}

asio::awaitable<void> slot_recovery::final_snapshot(std::function<void()> confirm) {
  auto candidate = co_await store_.current_snapshot();
  if (!candidate) co_return;
  const auto until = steady_clock::now() + 1s;
  while (steady_clock::now() < until && stream_.confirmed() < candidate->second) {
    if (co_await stream_.async_send_status(true)) co_return;
    auto ev = co_await stream_.async_next(200ms);
    if (!ev) {
      if (ev.error() == pg::errc::timeout) continue;
      co_return;
    }
    auto* k = std::get_if<wal::keepalive>(&*ev);
    if (!k) co_return;  // a change: not ours to take now
    tracker_.keepalive(k->wal_end);
    confirm();
  }
  if (stream_.confirmed() >= candidate->second) add_candidate(std::move(candidate->first), candidate->second);
}

void slot_recovery::end_session() {
  for (auto& [id, run] : fed_) tracker_.end_detached(run.ticket);
  fed_.clear();
  last_taken_.reset();
}

void slot_recovery::add_candidate(std::string snapshot, lsn insert_position) {
  if (!candidates_.empty() && insert_position <= candidates_.back().second) return;
  candidates_.emplace_back(std::move(snapshot), insert_position);
  if (candidates_.size() > 120) candidates_.pop_front();  // the ack is minutes behind: keep the newest
}

std::optional<std::string> slot_recovery::take_delivered(lsn confirmed) {
  std::optional<std::string> out;
  while (!candidates_.empty() && candidates_.front().second <= confirmed) {
    out = std::move(candidates_.front().first);
    candidates_.pop_front();
  }
  if (out) last_taken_ = out;
  return out;
}

std::optional<std::string> slot_recovery::snapshot_before(lsn bound) const {
  for (auto it = candidates_.rbegin(); it != candidates_.rend(); ++it)
    if (it->second <= bound) return it->first;
  return last_taken_;
}

}  // namespace walhook::relay
