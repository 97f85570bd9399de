#include "relay/engine/engine.hpp"

#include "common/log.hpp"
#include "common/task_group.hpp"
#include "delivery/nats_sink.hpp"
#include "relay/core/endpoint_directory.hpp"
#include "relay/core/lsn_tracker.hpp"
#include "relay/core/metrics.hpp"
#include "relay/core/outcome_log.hpp"
#include "relay/core/secret_rotation.hpp"
#include "relay/core/version.hpp"
#include "relay/engine/config.hpp"
#include "relay/engine/cursors.hpp"
#include "relay/engine/dispatcher.hpp"
#include "relay/engine/leadership.hpp"
#include "relay/engine/process_metrics.hpp"
#include "relay/engine/recovery.hpp"
#include "relay/engine/stream_handler.hpp"
#include "sql/state_store.hpp"
#include "wal/errc.hpp"
#include "wal/replication_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <functional>
#include <map>

#include <unistd.h>

namespace walhook::relay {
namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

namespace {

std::string default_instance_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return fmt::format("{}:{}", host, ::getpid());
}
bool cancelled(const asio::cancellation_state& s) { return s.cancelled() != asio::cancellation_type::none; }
}  // namespace

struct engine::impl {
  impl(asio::any_io_executor ex, run_options o)
      : executor(ex),
        options(std::move(o)),
        clock(*options.clock),
        store(ex, store_options_of(options)),
        http(ex, http_options_of(options)),
        sinks(http, std::make_unique<delivery::nats_sink>(ex, broker_options_of(options)), std::make_unique<delivery::amqp_sink>(ex, broker_options_of(options))),
        stream(ex, stream_options_of(options)),
        lead(ex, {options.database_url, options.slot, options.instance_name}),
        recent(options.recent_outcomes),
        deliveries(ex, dispatcher_options_of(options, &recent), directory, tracker, store, sinks, clock,
                   {[this] { released(); }, [this] { stream.wake(); }}),
        handler(tracker, directory, deliveries, clock),
        recovery(store, stream, tracker, handler, deliveries, options.slot),
        cursors(ex, store, tracker, directory, deliveries, recovery, clock),
        background(ex),
        backoff_timer(ex),
        finish_timer(ex) {
    deliveries.set_cursor_hooks(cursors.hooks());
    cursors.allow_entering(options.outbox_cursors);
    cursors.give_up_after(options.give_up_after);
    cursors.retry_policy(options.dispatch.outcomes.retry);
    handler.on_routing_changed([this](const endpoint& before) { cursors.routing_changed(before); });
    handler.on_streamed([this](std::uint32_t xid, const std::string* tenant, lsn end) { cursors.streamed(xid, tenant, end); });
  }

  asio::any_io_executor executor;
  run_options options;
  const clock_source& clock;
  sql::state_store store;
  delivery::http_client http;
  delivery::sink_router sinks;  ///< HTTP and the brokers: what the dispatcher sends through
  endpoint_directory directory;
  lsn_tracker tracker;
  wal::replication_stream stream;
  leadership lead;
  outcome_log recent;  ///< before `deliveries`, which notes each finished attempt in it
  dispatcher deliveries;
  stream_handler handler;
  slot_recovery recovery;
  outbox_cursors cursors;
  task_group background;  // the state store's writer, claims and sweeps: the whole run
  asio::steady_timer backoff_timer;
  asio::steady_timer finish_timer;  ///< bounds reading to the open transaction's Commit on a stop
  bool stopping = false;
  bool session_active = false;
  std::uint64_t sessions = 0;
  lsn progress_recorded;
  steady_clock::time_point progress_at{};
  steady_clock::time_point streamed_until{};  ///< record_progress() keeps its 200 ms cadence until then
  static constexpr auto idle_progress_interval = 60s;

  void confirm() { stream.confirm(tracker.confirmable()); }
  void released() {
    confirm();
    cursors.wake();
  }

  asio::awaitable<void> sleep(std::chrono::milliseconds d) {
    backoff_timer.expires_after(d);
    co_await backoff_timer.async_wait(tuple_awaitable);
  }

  /// Records the acknowledged position in walhook.slot_progress, every 200 ms at most while it
  /// moves because of transactions walhook streamed and for 2 s after the last of them (so the
  /// delivered snapshot sampled after them is recorded too: a slot loss then resends nothing
  /// delivered), and once a minute at most when only keepalives move it. A keepalive-only move
  /// is walhook's own last write (the WAL end it advanced): recording it at once would write
  /// again, and an idle database would never be idle (issue 18: 5 writes a second, ~1.2 KB/s
  /// of WAL, measured at 3413503).
  void record_progress() {
    auto now = clock.steady_now();
    lsn confirmed = stream.confirmed();
    if (!session_active || !confirmed.valid() || confirmed <= progress_recorded || now - progress_at < 200ms) return;
    if (tracker.confirmed_by_transactions() > progress_recorded) streamed_until = now + 2s;
    if (now >= streamed_until && now - progress_at < idle_progress_interval) return;
    progress_recorded = confirmed;
    progress_at = now;
    // With its timeline: retried on a promoted standby after a failover, it is ignored there.
    store.enqueue(sql::progress_write{options.slot, stream.info().system_id, confirmed,
                                      recovery.take_delivered(confirmed), stream.info().timeline});
  }

  /// start_session(), saying which step failed and the server's message.
  asio::awaitable<error_code> start_session_logged() {
    auto ec = co_await start_session();
    if (ec && ec != wal::errc::slot_in_use && !stopping && !start_step.empty())
      log::warn("session.start_failed", {{"step", start_step}, {"error", store.last_read_error()}});
    co_return ec;
  }
  std::string start_step;  ///< what start_session() is reading from the database, "" once streaming

  /// Everything a session needs from the database, then START_REPLICATION.
  asio::awaitable<error_code> start_session() {
    deliveries.end_session();
    recovery.end_session();
    tracker.reset();
    handler.reset();
    start_step.clear();  // the stream logs its own failures
    auto opened = co_await stream.async_open();
    if (opened && opened != wal::errc::slot_missing && opened != wal::errc::slot_invalidated) {
      log::error("replication.start_failed", {{"error", stream.last_error()}});
      co_return opened;
    }
    if (auto ec = co_await check_shard_layout()) co_return ec;
    start_step = "replace the replication slot";
    if (auto ec = co_await recovery.prepare_slot(opened)) co_return ec;
    if (auto start = recovery.created_at()) {
      // A new slot starts a new history: nothing acknowledged to the old one carries over.
      tracker.restart_at(*start);
      progress_recorded = *start;
      // Removals before the new slot's start are never streamed: their copies go.
      (void)co_await store.clear_removed_endpoints();
    }
    auto with_backlog = co_await load_session_state();
    if (!with_backlog) co_return with_backlog.error();
    start_step.clear();  // the stream logs its own failures
    if (auto ec = co_await start_replication()) co_return ec;
    deliveries.start_session(*with_backlog);
    // Backfills after a slot loss go first: each endpoint gets those older events before the
    // new slot's. The stream waits unread meanwhile (its status updates go on).
    start_step = "backfill from the outbox";
    if (auto ec = co_await recovery.feed(true, [this] { return !stopping; })) co_return ec;
    log::info("replication.streaming", {{"slot", options.slot},
                                        {"start_lsn", stream.info().start.to_string()},
                                        {"slot_confirmed_lsn", stream.info().slot_confirmed.to_string()},
                                        {"slot_created", stream.info().slot_created},
                                        {"endpoints", static_cast<std::uint64_t>(directory.size())},
                                        {"endpoints_with_backlog",
                                         static_cast<std::uint64_t>(deliveries.backlog().endpoints().size())}});
    co_return error_code{};
  }

  /// A walhook of another layout (one that waited as a standby through `walhook reshard`) would
  /// deliver a second time what the current shards deliver: it stops instead (exit code 1).
  asio::awaitable<error_code> check_shard_layout() {
    start_step = "check the shard layout";
    auto shards = co_await store.shard_count();
    if (!shards) co_return shards.error();
    if (*shards != options.shard.count) {
      log::error("run.wrong_shard_layout", {{"shards", *shards}, {"this_instance", options.shard.count},
                                            {"note", "the database was resharded: this walhook stops"}});
      exit_code = 1;
      stream.close();
      request_stop_from_inside();
      co_return error_code(pg::errc::cancelled);
    }
    co_return error_code{};
  }

  /// Once the slot is there: stale 'sending' rows reset, endpoints and breaker states loaded, the
  /// slot's retention checked, the stream told walhook's record of the acknowledged position.
  /// Returns the endpoints (of this shard) with rows in walhook.deliveries.
  asio::awaitable<boost::system::result<std::vector<std::int64_t>>> load_session_state() {
    // 'sending' rows of a process that died (ours before a crash, or the instance we took over
    // from) go back to pending; this process's own attempts are left alone.
    start_step = "reset 'sending' rows";
    auto reset = co_await store.reset_stale_sending(0s, deliveries.owned());
    if (!reset) co_return reset.error();
    if (*reset > 0) log::info("deliveries.sending_reset", {{"rows", static_cast<std::int64_t>(*reset)}});
    // walhook.endpoints as of the slot's position (removed endpoints whose removal the slot has
    // not streamed yet included) into the directory.
    start_step = "load endpoints";
    auto table = co_await store.load_endpoints();
    if (!table) co_return table.error();
    for (const auto& c : directory.replace_all(endpoints_from_table(table->columns, table->rows)))
      deliveries.endpoint_changed(c);
    start_step = "load endpoint health";
    auto health = co_await store.load_health();
    if (!health) co_return health.error();
    directory.clear_health();
    const auto now = clock.system_now();
    for (const auto& h : *health) {
      // A pause is what is left of it by the server's clock, on ours.
      std::optional<system_clock::time_point> paused_until;
      if (h.paused_for) paused_until = now + std::max(*h.paused_for, std::chrono::milliseconds{0});
      directory.set_health(h.endpoint_id, {h.consecutive_failures, h.first_failure_at, h.last_failure_at,
                                           h.last_success_at, paused_until, h.probe_rounds});
    }
    start_step = "find endpoints with pending deliveries";
    auto with_backlog = co_await store.endpoints_with_backlog();
    if (!with_backlog) co_return with_backlog.error();
    std::erase_if(*with_backlog, [this](std::int64_t id) { return !directory.find(id); });  // another shard's
    start_step = "check the slot's WAL retention";
    co_await check_slot_health();
    // walhook's own record of what it acknowledged: the slot's may be older after a server restart.
    start_step = "load the recorded slot position";
    auto progress = co_await store.load_progress(options.slot);
    if (!progress) co_return progress.error();
    stream.resume_from(progress->confirmed, progress->system_id);
    start_step = "load the outbox cursors";
    if (auto ec = co_await cursors.start_session(progress->delivered_snapshot)) co_return ec;
    co_return with_backlog;
  }

  /// START_REPLICATION; a slot still busy is tried again (50 ms doubling to 1 s, 100 tries).
  asio::awaitable<error_code> start_replication() {
    // The previous walsender may still hold the slot for a moment after a takeover.
    auto backoff = 50ms;
    for (int tries = 0;; ++tries) {
      auto ec = co_await stream.async_start();
      if (!ec) co_return error_code{};
      if (ec != wal::errc::slot_in_use || tries >= 100 || stopping) {
        log::error("replication.start_failed", {{"error", stream.last_error()}});
        co_return ec;
      }
      log::info("replication.slot_busy", {{"slot", options.slot}, {"error", stream.last_error()}});
      co_await sleep(backoff);
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, 1000ms);
    }
  }

  /// Warns (once per change) when the slot keeps more WAL than PostgreSQL guarantees: extended
  /// (beyond max_wal_size) or unreserved (beyond max_slot_wal_keep_size: the next checkpoint may
  /// invalidate it). /readyz shows the state.
  asio::awaitable<void> check_slot_health() {
    auto h = co_await store.load_slot_health(options.slot);
    if (!h || !*h) co_return;
    const auto& slot = **h;
    const bool was_at_risk = last_slot_health && last_slot_health->at_risk();
    if ((!last_slot_health || slot.wal_status != last_slot_health->wal_status) && (slot.at_risk() || was_at_risk)) {
      const std::string safe = slot.safe_wal_size ? std::to_string(*slot.safe_wal_size) : "unlimited";
      log::emit(slot.at_risk() ? log::level::warn : log::level::info,
                slot.at_risk() ? "replication.slot_at_risk" : "replication.slot_safe_again",
                {{"slot", options.slot}, {"wal_status", slot.wal_status}, {"retained_bytes", slot.retained_bytes},
                 {"safe_wal_size", safe}});
    }
    last_slot_health = slot;
  }
  std::optional<sql::slot_health> last_slot_health;  ///< as last read (session start, then every 10 s)

  /// Ends the session the moment the lock's session is gone (not when it is merely slow).
  asio::awaitable<void> watch_leadership() {
    auto ec = co_await lead.watch();
    if (ec == pg::errc::cancelled || !session_active) co_return;
    session_active = false;
    stream.interrupt();
  }

  /// While the session streams: walhook's record of the acknowledged position (200 ms), retention
  /// soon after the start and every 10 minutes, old secrets of rotations past their grace every
  /// 5 s (backing off while that fails, warning each time), and 'sending' rows of a dead process
  /// (untouched for stale_sending_after) back to pending every 30 s.
  asio::awaitable<void> housekeeping() {
    co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
    asio::steady_timer tick(executor);
    auto last_stale_check = clock.steady_now();
    auto last_slot_check = clock.steady_now();
    auto last_snapshot = clock.steady_now() - 1h;
    auto last_retention = clock.steady_now() - 1h;
    secret_drop_schedule secret_drop;  // expired secrets no longer sign; their drop is tried until it works
    while (session_active) {
      tick.expires_after(200ms);
      co_await tick.async_wait(tuple_awaitable);
      if (cancelled(co_await asio::this_coro::cancellation_state)) co_return;
      confirm();
      record_progress();
      if (clock.steady_now() - last_snapshot >= 500ms) {
        last_snapshot = clock.steady_now();
        co_await recovery.sample_snapshot();
      }
      if (clock.steady_now() - last_slot_check >= 10s) {
        last_slot_check = clock.steady_now();
        co_await check_slot_health();
      }
      if (clock.steady_now() - last_retention >= 10min) {
        last_retention = clock.steady_now();
        long total = 0;
        for (int round = 0; round < 1000 && session_active; ++round) {  // a batch at a time
          auto n = co_await store.delete_expired(options.retention, options.retention_batch);
          if (!n) {
            log::warn("retention.failed", {{"error", n.error().message()}});
            break;
          }
          total += *n;
          if (*n == 0) break;  // a dead letter deleted in one round frees its outbox row for the next
          tick.expires_after(50ms);  // let other work in between batches
          co_await tick.async_wait(tuple_awaitable);
          if (cancelled(co_await asio::this_coro::cancellation_state)) break;
        }
        if (total > 0) log::info("retention.deleted", {{"rows", static_cast<std::int64_t>(total)}});
      }
      if (secret_drop.due(clock.steady_now())) {
        auto n = co_await store.drop_expired_secrets();
        if (n && *n > 0) log::info("secrets.old_dropped", {{"endpoints", static_cast<std::int64_t>(*n)}});
        if (n) secret_drop.succeeded(clock.steady_now());
        else  // braced initializers run in order: failed() counts before failures() reads
          log::warn("secrets.drop_expired_failed", {{"error", n.error().message()},
                    {"retry_in_s", static_cast<std::int64_t>(secret_drop.failed(clock.steady_now()).count())},
                    {"failures", secret_drop.failures()}});
      }
      if (clock.steady_now() - last_stale_check >= 30s) {
        last_stale_check = clock.steady_now();
        auto n = co_await store.reset_stale_sending(options.stale_sending_after, deliveries.owned());
        if (n && *n > 0) {
          log::warn("deliveries.stale_sending_reset", {{"rows", static_cast<std::int64_t>(*n)}});
          if (auto ids = co_await store.endpoints_with_backlog())
            for (auto id : *ids) deliveries.wake(id, false);
        }
      }
    }
  }

  asio::awaitable<error_code> session() {
    ++sessions;
    if (auto ec = co_await start_session_logged()) {
      stream.close();
      co_return ec;
    }
    session_active = true;
    session_was_streaming = true;
    task_group session_tasks(executor);
    session_tasks.spawn(watch_leadership(), "leadership watch");
    session_tasks.spawn(housekeeping(), "housekeeping");
    session_tasks.spawn(recovery.run([this] { return session_active && !stopping; }), "recoveries");
    session_tasks.spawn(cursors.run([this] { return session_active && !stopping; }), "outbox cursors");
    error_code result;
    while (session_active && (!stopping || finishing_transaction())) {
      // A stop spills instead of holding; a cursor's last window is read while the stream waits.
      const bool hold = !stopping && (deliveries.must_hold() || cursors.holds_stream());
      if (hold || store.backlog() >= options.max_store_backlog) {
        // Back-pressure: the walsender waits on TCP; status updates keep flowing.
        if (auto ec = co_await stream.async_hold(50ms)) {
          result = ec;
          break;
        }
        continue;
      }
      auto ev = co_await stream.async_next();
      if (!ev) {
        if (!stopping || finishing_transaction()) result = ev.error();
        break;
      }
      if (auto ec = handler.handle(*ev)) {
        log::error("replication.protocol_error", {{"error", ec.message()}});
        result = ec;
        break;
      }
      confirm();
    }
    if (!stopping && session_active)
      log::warn("replication.stream_ended", {{"error", result.message()}, {"detail", stream.last_error()}});
    session_active = false;
    if (!stopping) {  // a stop spills the queue itself, then waits for attempts (and writes the cursors)
      deliveries.end_session();
      cursors.end_session();
    }
    lead.cancel();
    session_tasks.emit(asio::cancellation_type::total);
    if (!co_await session_tasks.async_wait(clock.steady_now() + 1s)) {
      // A read blocked on the server (a lock held by someone else) would hold us for up to
      // statement_timeout: end it.
      store.interrupt_reads();
      session_tasks.emit(asio::cancellation_type::terminal);
      co_await session_tasks.async_wait();
    }
    // A walsender whose client neither reads nor closes holds a server shutdown for
    // wal_sender_timeout: close the replication connection now (a stop sends its final status first).
    if (!stopping) stream.close();
    session_was_streaming = stopping && !result;  // a stop with the stream still usable
    co_return result ? result : error_code(pg::errc::connection_lost);
  }

  /// A stop arrived between a Begin and its Commit: the rest of the transaction is read (its
  /// deliveries go to PostgreSQL) so it is acknowledged and not streamed again after a restart,
  /// within half the grace period at most (a larger transaction is streamed again instead).
  bool finishing_transaction() const {
    return stopping && handler.in_transaction() && clock.steady_now() < stop_requested_at + options.shutdown_grace / 2;
  }
  steady_clock::time_point stop_requested_at{};

  int exit_code = 0;  ///< what run() returns: 1 when this walhook must not run here (the layout changed)
  std::function<void()> request_stop_from_inside;  ///< engine::request_stop(), set by the engine
  bool session_was_streaming = false;  ///< the last session reached streaming (its stream may be read at a stop)

  /// Stop within the grace period: spill queued work, let attempts finish, persist, final status.
  asio::awaitable<void> shutdown() {
    // The grace counts from the stop request (finishing a transaction took part of it).
    auto deadline = std::max(stop_requested_at, clock.steady_now() - options.shutdown_grace) + options.shutdown_grace;
    finish_timer.cancel();
    background.emit(asio::cancellation_type::total);  // claims and sweeps stop; the writer goes on
    co_await deliveries.shutdown(deadline);
    cursors.flush();  // their windows' progress: a graceful stop re-sends nothing from the outbox
    co_await store.async_idle(deadline);
    confirm();
    if (session_was_streaming && tracker.open_transactions() == 0 && store.backlog() == 0)
      co_await recovery.final_snapshot([this] { confirm(); });
    auto delivered = recovery.take_delivered(stream.confirmed());
    if (store.backlog() == 0 && stream.confirmed().valid() && (stream.confirmed() > progress_recorded || delivered)) {
      progress_recorded = std::max(progress_recorded, stream.confirmed());
      store.enqueue(sql::progress_write{options.slot, stream.info().system_id, progress_recorded, std::move(delivered),
                                        stream.info().timeline});
      co_await store.async_idle(deadline);
    }
    co_await recovery.finish();  // a backfill whose deliveries all finished is not run again
    co_await stream.async_stop();
    store.stop(deadline);
    co_await background.async_wait(deadline + 1s);
    store.interrupt_reads();  // a claim blocked by a lock must not hold the exit
    background.emit(asio::cancellation_type::terminal);
    co_await background.async_wait();
    lead.release();
    log::info("shutdown.done", {{"confirmed_lsn", stream.confirmed().to_string()}});
  }

  asio::awaitable<int> run() {
    background.spawn(store.run(), "state store");
    deliveries.start(background);
    auto backoff = 50ms;
    while (!stopping) {
      auto ec = co_await lead.acquire();
      if (!ec && !stopping) {
        log::info("leader.acquired", {{"slot", options.slot}, {"instance", options.instance_name}});
        auto began = clock.steady_now();
        ec = co_await session();
        if (clock.steady_now() - began > 30s) backoff = 50ms;  // it ran for a while: start over gently
      }
      if (stopping) break;
      lead.release();
      log::warn("session.retry", {{"error", ec.message()}, {"retry_ms", static_cast<std::int64_t>(backoff.count())}});
      co_await sleep(backoff);
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, options.reconnect_max);
    }
    co_await shutdown();
    co_return exit_code;
  }
};

engine::engine(asio::any_io_executor ex, run_options options) {
  if (options.instance_name.empty()) options.instance_name = default_instance_name();
  impl_ = std::make_unique<impl>(ex, std::move(options));
  impl_->request_stop_from_inside = [this] { request_stop(); };
}

engine::~engine() = default;

void engine::request_stop() {
  auto& s = *impl_;
  if (s.stopping) return;
  s.stopping = true;
  s.stop_requested_at = s.clock.steady_now();
  s.deliveries.begin_stop();
  if (s.handler.in_transaction() && s.session_active) {
    // Stop at the transaction's end: the session loop reads on to its Commit, then stops.
    log::info("shutdown.finishing_transaction", {{"grace_ms", static_cast<std::int64_t>(s.options.shutdown_grace.count() / 2)}});
    s.finish_timer.expires_after(s.options.shutdown_grace / 2);
    s.finish_timer.async_wait([&s](const boost::system::error_code& ec) {
      if (!ec) s.stream.interrupt();
    });
  } else {
    s.stream.interrupt();
  }
  s.lead.cancel();
  s.backoff_timer.cancel();
}

bool engine::streaming() const { return impl_->session_active; }
std::optional<std::string> engine::leader_lock_foreign() const { return impl_->lead.foreign_holder(); }
std::optional<std::string> engine::slot_at_risk() const {
  const auto& slot = impl_->last_slot_health;
  if (!slot || !slot->at_risk()) return std::nullopt;
  return slot->wal_status;
}

asio::awaitable<int> engine::run() { co_return co_await impl_->run(); }
live_status engine::live() const {
  auto& s = *impl_;  // lag_seconds() reads the clock, not const
  live_status l;
  l.instance = s.options.instance_name;
  l.slot = s.options.slot;
  l.streaming = s.session_active;
  l.lag_seconds = s.handler.lag_seconds();
  if (s.stream.confirmed().valid()) l.confirmed_lsn = s.stream.confirmed().to_string();
  if (s.last_slot_health) l.slot_wal_status = s.last_slot_health->wal_status;
  const auto& sched = s.deliveries.scheduler();
  l.queued = sched.queued_total();
  l.in_flight = sched.in_flight_total();
  for (auto id : s.directory.ids()) {
    const auto* ep = s.directory.find(id);
    l.endpoints[id] = {sched.queued(id), sched.in_flight(id), ep ? ep->config_error : std::string()};
  }
  return l;
}

const outcome_log& engine::recent_outcomes() const { return impl_->recent; }

const run_options& engine::options() const { return impl_->options; }

asio::awaitable<std::string> engine::metrics_text() {
  auto& s = *impl_;
  metrics_snapshot m;
  m.events = s.handler.events();
  m.malformed_rows = s.handler.malformed_rows();
  m.sessions = s.sessions;
  m.delivery = s.deliveries.stats();
  m.queued = s.deliveries.scheduler().queued_total();
  m.in_flight = s.deliveries.scheduler().in_flight_total();
  m.parked = s.deliveries.scheduler().parked_total();
  m.store_backlog = s.store.backlog();
  m.writes_refused = s.store.writes_refused();
  m.event_bytes = s.deliveries.event_bytes();
  m.streaming = s.session_active;
  m.leader_lock_foreign = s.lead.foreign_holder().has_value();
  m.confirmed = s.stream.confirmed();
  m.received = s.stream.received();
  m.lag_seconds = s.handler.lag_seconds();
  m.slot_incidents = s.recovery.incidents();
  m.events_backfilled = s.recovery.events_backfilled();
  m.backfills_running = s.recovery.backfills_running();
  const auto& cs = s.cursors.stats();
  m.cursor_entered = cs.entered;
  m.cursor_rejoined = cs.rejoined;
  m.cursor_skipped = cs.skipped;
  m.cursor_drained = cs.drained;
  m.cursor_windows = cs.windows;
  m.cursor_writes = cs.writes;
  m.cursor_given_up_events = cs.given_up_events;
  m.version = walhook_version;
  m.commit = walhook_commit;
  m.process = read_process_metrics();
  std::map<std::int64_t, endpoint_metrics> by_id;
  for (auto id : s.directory.ids()) {
    auto c = m.delivery.endpoints.find(id);
    auto& e = by_id[id] = {id, s.deliveries.scheduler().queued(id), s.deliveries.scheduler().in_flight(id), std::nullopt,
                           c == m.delivery.endpoints.end() ? endpoint_counters{} : c->second, std::nullopt, 0,
                           sink_label(s.directory.find(id))};
    if (s.session_active)  // a standby's directory is not current: the leader's alone says the state
      set_endpoint_state(e, s.directory.find(id), s.directory.health(id), s.clock.system_now());
  }
  // The database's numbers are the leader's to export (a standby would repeat them, at a cost).
  if (s.session_active)
    if (auto ages = co_await s.store.oldest_pending())
      for (const auto& [id, age] : *ages)
        if (auto e = by_id.find(id); e != by_id.end()) e->second.oldest_pending_age_s = age;  // this shard's, still known
  for (const auto& v : s.cursors.views())
    if (auto e = by_id.find(v.endpoint_id); e != by_id.end()) {
      e->second.cursor_lag_s = v.lag_seconds;
      e->second.cursor_drained = v.drained;
    }
  for (auto& [id, e] : by_id) m.endpoints.push_back(e);
  if (const auto& slot = s.last_slot_health; slot && s.session_active) {  // read every 10 s by housekeeping, not per scrape
    m.slot_wal_status = slot->wal_status;
    m.slot_retained_bytes = slot->retained_bytes;
    m.slot_safe_wal_size = slot->safe_wal_size;
  }
  co_return render_prometheus(m);
}

}  // namespace walhook::relay
