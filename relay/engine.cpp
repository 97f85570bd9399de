#include "relay/engine.hpp"

#include "common/log.hpp"
#include "common/task_group.hpp"
#include "common/time.hpp"
#include "delivery/http_client.hpp"
#include "relay/dispatcher.hpp"
#include "relay/endpoint_directory.hpp"
#include "relay/leadership.hpp"
#include "relay/lsn_tracker.hpp"
#include "relay/metrics.hpp"
#include "relay/rows.hpp"
#include "sql/state_store.hpp"
#include "wal/errc.hpp"
#include "wal/relation_cache.hpp"
#include "wal/replication_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>

#include <unistd.h>

namespace walhook::relay {
namespace asio = boost::asio;
namespace pgo = wal::pgoutput;
using namespace std::chrono_literals;
using boost::system::error_code;
using steady = std::chrono::steady_clock;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

namespace {

std::string default_instance_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return fmt::format("{}:{}", host, ::getpid());
}

wal::stream_options stream_options_of(const run_options& o) {
  wal::stream_options s;
  s.conninfo = o.database_url;
  s.slot = o.slot;
  s.publications = o.publications;
  s.status_interval = o.status_interval;
  s.application_name = "walhook " + o.instance_name;
  return s;
}

sql::state_store_options store_options_of(const run_options& o) {
  sql::state_store_options s;
  s.conninfo = o.database_url;
  s.max_batch = o.max_batch;
  s.reconnect_max = o.reconnect_max;
  s.application_name = "walhook-state " + o.instance_name;
  return s;
}

dispatcher_options dispatcher_options_of(const run_options& o) {
  dispatcher_options d;
  d.limits = o.limits;
  d.max_wait_in_memory = o.max_wait_in_memory;
  d.max_hold = o.max_hold;
  d.admission.max_payload_bytes = o.max_payload_bytes;
  d.outcomes.retry = o.retry;
  d.outcomes.breaker = o.breaker;
  d.outcomes.record_successes = o.record == record_mode::all;
  return d;
}

/// An endpoint id column as a number (the stream and the table give text).
std::optional<std::int64_t> id_of(const row_view& row) {
  std::string_view text;
  if (row.get("id", text) != row_view::state::value) return std::nullopt;
  try {
    return std::stoll(std::string(text));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

struct engine::impl {
  impl(asio::any_io_executor ex, run_options o)
      : executor(ex),
        options(std::move(o)),
        store(ex, store_options_of(options)),
        http(ex, options.http),
        stream(ex, stream_options_of(options)),
        lead(ex, {options.database_url, options.slot, options.instance_name}),
        deliveries(ex, dispatcher_options_of(options), directory, tracker, store, http, real_clock::instance(),
                   {[this] { confirm(); }, [this] { stream.wake(); }}),
        background(ex),
        backoff_timer(ex) {}

  asio::any_io_executor executor;
  run_options options;
  sql::state_store store;
  delivery::http_client http;
  endpoint_directory directory;
  lsn_tracker tracker;
  wal::replication_stream stream;
  wal::relation_cache relations;
  leadership lead;
  dispatcher deliveries;
  task_group background;  // the state store's writer, claims and sweeps: the whole run
  asio::steady_timer backoff_timer;

  std::optional<std::uint32_t> outbox_oid;
  std::optional<std::uint32_t> endpoints_oid;
  lsn_tracker::ticket current_ticket = 0;
  lsn current_final_lsn;
  bool stopping = false;
  bool session_active = false;
  std::uint64_t events = 0, malformed_rows = 0, sessions = 0;
  lsn progress_recorded;
  steady::time_point progress_at{};
  // When each open transaction began (slot lag in seconds), by ticket.
  std::deque<std::pair<lsn_tracker::ticket, steady::time_point>> open_since;

  void confirm() { stream.confirm(tracker.confirmable()); }

  double lag_seconds() {
    auto oldest = tracker.oldest_open();
    while (!open_since.empty() && (oldest == 0 || open_since.front().first < oldest)) open_since.pop_front();
    if (oldest == 0 || open_since.empty()) return 0;
    return std::chrono::duration<double>(steady::now() - open_since.front().second).count();
  }

  asio::awaitable<void> sleep(std::chrono::milliseconds d) {
    backoff_timer.expires_after(d);
    co_await backoff_timer.async_wait(tuple_awaitable);
  }

  /// Records the acknowledged position in walhook.slot_progress (every 200 ms at most, when it moved).
  void record_progress() {
    auto now = steady::now();
    lsn confirmed = stream.confirmed();
    if (!session_active || !confirmed.valid() || confirmed <= progress_recorded || now - progress_at < 200ms) return;
    progress_recorded = confirmed;
    progress_at = now;
    store.enqueue(sql::progress_write{options.slot, stream.info().system_id, confirmed});
  }

  // ---------------------------------------------------------------- the stream

  void apply_endpoint(const row_view& row) {
    auto id = id_of(row);
    auto e = endpoint_from_row(row, id ? directory.find(*id) : nullptr);
    if (!e) return;
    if (!e->config_error.empty()) log::warn("endpoint.invalid", {{"endpoint_id", e->id}, {"error", e->config_error}});
    const endpoint* previous = directory.find(e->id);
    bool news = !previous || previous->status != e->status || previous->url != e->url;
    log::emit(news ? log::level::info : log::level::debug, "endpoint.updated",
              {{"endpoint_id", e->id}, {"tenant_id", e->tenant_id}, {"status", std::string(to_string(e->status))}});
    deliveries.endpoint_changed(directory.apply(std::move(*e)));
  }

  void remove_endpoint(const row_view& row) {
    if (auto id = id_of(row))
      if (auto c = directory.remove(*id)) deliveries.endpoint_changed(*c);
  }

  void on_event(const row_view& row) {
    ++events;
    std::string why;
    auto ev = event_from_row(row, current_final_lsn, why);
    if (!ev) {
      ++malformed_rows;
      log::error("outbox.malformed_row", {{"reason", why}});
      return;
    }
    auto shared = std::make_shared<const delivery::event>(std::move(*ev));
    for (std::int64_t id : directory.route(shared->tenant_id, shared->type)) {
      delivery::job j;
      j.ev = shared;
      j.endpoint_id = id;
      j.ticket = current_ticket;
      tracker.hold(current_ticket);
      deliveries.submit(std::move(j));
    }
  }

  error_code on_message(const pgo::begin& b) {
    current_ticket = tracker.begin();
    open_since.emplace_back(current_ticket, steady::now());
    current_final_lsn = b.final_lsn;
    return {};
  }
  error_code on_message(const pgo::commit& c) {
    tracker.commit(current_ticket, c.end_lsn);
    current_ticket = 0;
    return {};
  }
  error_code on_message(const pgo::relation& r) {
    if (r.schema == "walhook" && r.name == "outbox") outbox_oid = r.oid;
    if (r.schema == "walhook" && r.name == "endpoints") endpoints_oid = r.oid;
    return {};
  }
  error_code on_message(const pgo::insert& m) {
    const auto* rel = relations.find(m.relation_oid);
    if (!rel) return wal::errc::unknown_relation;
    if (m.relation_oid == outbox_oid) on_event(row_view(*rel, m.new_tuple));
    else if (m.relation_oid == endpoints_oid) apply_endpoint(row_view(*rel, m.new_tuple));
    return {};
  }
  error_code on_message(const pgo::update& m) {
    const auto* rel = relations.find(m.relation_oid);
    if (!rel) return wal::errc::unknown_relation;
    if (m.relation_oid != endpoints_oid) return {};
    // A changed primary key arrives as the old key + the new row.
    if (m.key_tuple) remove_endpoint(row_view(*rel, *m.key_tuple));
    apply_endpoint(row_view(*rel, m.new_tuple));
    return {};
  }
  error_code on_message(const pgo::delete_& m) {
    const auto* rel = relations.find(m.relation_oid);
    if (!rel) return wal::errc::unknown_relation;
    if (m.relation_oid == endpoints_oid) remove_endpoint(row_view(*rel, m.key_tuple ? *m.key_tuple : *m.old_tuple));
    return {};
  }
  error_code on_message(const pgo::truncate& m) {
    for (auto oid : m.relation_oids)
      if (oid == endpoints_oid)
        for (const auto& c : directory.clear()) deliveries.endpoint_changed(c);
    return {};
  }
  error_code on_message(const pgo::origin&) { return {}; }
  error_code on_message(const pgo::type&) { return {}; }
  /// Operator signals travel through the WAL, in order with the data: `walhook replay` and
  /// `walhook endpoint enable|resume` emit pg_logical_emit_message(true, 'walhook', …):
  /// "wake:<id>" (pending deliveries are due) or "resume:<id>" (its breaker closes too).
  error_code on_message(const pgo::logical_message& m) {
    if (m.prefix != "walhook") return {};
    bool resume = m.content.starts_with("resume:");
    if (!resume && !m.content.starts_with("wake:")) return {};
    try {
      deliveries.wake(std::stoll(m.content.substr(m.content.find(':') + 1)), resume);
    } catch (const std::exception&) {
    }
    return {};
  }

  error_code handle(const wal::stream_event& ev) {
    if (auto* k = std::get_if<wal::keepalive>(&ev)) {
      tracker.keepalive(k->wal_end);
      return {};
    }
    const auto& ch = std::get<wal::change>(ev);
    // Rows are checked against their Relation message (unknown OID, column count) first.
    if (auto ec = relations.observe(ch.message)) return ec;
    return std::visit([&](const auto& m) { return on_message(m); }, ch.message);
  }

  // ---------------------------------------------------------------- sessions

  /// Everything a session needs from the database before streaming.
  asio::awaitable<error_code> prepare_session() {
    deliveries.end_session();
    tracker.reset();
    relations.clear();
    outbox_oid.reset();
    endpoints_oid.reset();
    current_ticket = 0;
    open_since.clear();

    // 'sending' rows of a process that died (ours before a crash, or the instance we took over
    // from) go back to pending; this process's own attempts are left alone.
    auto reset = co_await store.reset_stale_sending(0s, deliveries.owned());
    if (!reset) co_return reset.error();
    if (*reset > 0) log::info("deliveries.sending_reset", {{"rows", static_cast<std::int64_t>(*reset)}});

    auto table = co_await store.load_endpoints();
    if (!table) co_return table.error();
    pgo::relation rel;
    for (const auto& name : table->columns) rel.columns.push_back({0, name, 0, -1});
    std::vector<endpoint> all;
    for (const auto& r : table->rows) {
      pgo::tuple t;
      for (const auto& v : r) t.push_back(v ? pgo::tuple_value{pgo::value_kind::text, *v} : pgo::tuple_value{pgo::value_kind::null, {}});
      row_view row(rel, t);
      auto id = id_of(row);
      if (auto e = endpoint_from_row(row, id ? directory.find(*id) : nullptr)) all.push_back(std::move(*e));
    }
    for (const auto& c : directory.replace_all(std::move(all))) deliveries.endpoint_changed(c);

    auto health = co_await store.load_health();
    if (!health) co_return health.error();
    directory.clear_health();
    for (const auto& h : *health)
      directory.set_health(h.endpoint_id, {h.consecutive_failures, h.first_failure_at, h.last_failure_at,
                                           h.last_success_at, h.paused_until, h.probe_rounds});
    auto with_backlog = co_await store.endpoints_with_backlog();
    if (!with_backlog) co_return with_backlog.error();
    deliveries.reset_backlog(*with_backlog);

    // walhook's own record of what it acknowledged: the slot's may be older after a server restart.
    auto progress = co_await store.load_progress(options.slot);
    if (!progress) co_return progress.error();
    stream.resume_from(progress->first, progress->second);

    // The previous walsender may still hold the slot for a moment after a takeover.
    auto backoff = 50ms;
    for (int tries = 0;; ++tries) {
      auto ec = co_await stream.async_start();
      if (!ec) break;
      if (ec == wal::errc::slot_in_use && tries < 100 && !stopping) {
        log::info("replication.slot_busy", {{"slot", options.slot}, {"error", stream.last_error()}});
        co_await sleep(backoff);
        backoff = std::min<std::chrono::milliseconds>(backoff * 2, 1000ms);
        continue;
      }
      log::error("replication.start_failed", {{"error", stream.last_error()}});
      co_return ec;
    }
    if (stream.info().slot_created) {
      (void)co_await store.clear_progress(options.slot);
      log::warn("replication.slot_created", {{"slot", options.slot},
                                             {"note", "the slot did not exist: events committed before this moment "
                                                      "are not in it (walhook migrate creates it ahead of time)"}});
    }
    log::info("replication.streaming", {{"slot", options.slot},
                                        {"start_lsn", stream.info().start.to_string()},
                                        {"slot_confirmed_lsn", stream.info().slot_confirmed.to_string()},
                                        {"slot_created", stream.info().slot_created},
                                        {"endpoints", static_cast<std::uint64_t>(directory.size())},
                                        {"endpoints_with_backlog", static_cast<std::uint64_t>(deliveries.backlog().endpoints().size())}});
    co_return error_code{};
  }

  /// Ends the session the moment the lock's session is gone.
  asio::awaitable<void> watch_leadership() {
    auto ec = co_await lead.watch();
    if (ec == pg::errc::cancelled || !session_active) co_return;
    session_active = false;
    stream.interrupt();
  }

  /// Records walhook's acknowledged position while the session streams.
  asio::awaitable<void> record_progress_loop() {
    co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
    asio::steady_timer tick(executor);
    while (session_active) {
      tick.expires_after(200ms);
      co_await tick.async_wait(tuple_awaitable);
      if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) co_return;
      confirm();
      record_progress();
    }
  }

  /// Retention (DESIGN §7): outbox rows and finished deliveries older than the retention period
  /// go, a batch at a time, yielding between batches.
  asio::awaitable<void> expire_old_rows() {
    long total = 0;
    asio::steady_timer pause(executor);
    for (int round = 0; round < 1000 && session_active; ++round) {
      auto n = co_await store.delete_expired(options.retention, options.retention_batch);
      if (!n) {
        log::warn("retention.failed", {{"error", n.error().message()}});
        break;
      }
      total += *n;
      if (*n < options.retention_batch) break;
      pause.expires_after(50ms);
      co_await pause.async_wait(tuple_awaitable);
      if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) break;
    }
    if (total > 0) log::info("retention.deleted", {{"rows", static_cast<std::int64_t>(total)}});
  }

  /// While the session streams: retention soon after it starts and every 10 minutes, and
  /// 'sending' rows left by a dead process (not touched for stale_sending_after) back to pending.
  asio::awaitable<void> housekeeping_loop() {
    co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
    asio::steady_timer tick(executor);
    auto last_stale_check = steady::now();
    auto last_retention = steady::now() - 1h;
    while (session_active) {
      tick.expires_after(250ms);
      co_await tick.async_wait(tuple_awaitable);
      if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) co_return;
      if (steady::now() - last_retention >= 10min) {
        last_retention = steady::now();
        co_await expire_old_rows();
      }
      if (steady::now() - last_stale_check >= 30s) {
        last_stale_check = steady::now();
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
    if (auto ec = co_await prepare_session()) {
      stream.close();
      co_return ec;
    }
    session_active = true;
    task_group session_tasks(executor);
    session_tasks.spawn(watch_leadership(), "leadership watch");
    session_tasks.spawn(record_progress_loop(), "progress");
    session_tasks.spawn(housekeeping_loop(), "housekeeping");

    error_code result;
    while (!stopping && session_active) {
      if (deliveries.must_hold() || store.backlog() >= options.max_store_backlog) {
        // Back-pressure: the walsender waits on TCP; status updates keep flowing.
        if (auto ec = co_await stream.async_hold(50ms)) {
          result = ec;
          break;
        }
        continue;
      }
      auto ev = co_await stream.async_next();
      if (!ev) {
        if (!stopping) result = ev.error();
        break;
      }
      if (auto ec = handle(*ev)) {
        log::error("replication.protocol_error", {{"error", ec.message()}});
        result = ec;
        break;
      }
      confirm();
    }
    if (!stopping && session_active)
      log::warn("replication.stream_ended", {{"error", result.message()}, {"detail", stream.last_error()}});
    session_active = false;
    lead.cancel();
    session_tasks.emit(asio::cancellation_type::total);
    co_await session_tasks.async_wait();
    // A walsender whose client neither reads nor closes keeps a server shutdown waiting for
    // wal_sender_timeout: close the replication connection now (a stop sends its final status first).
    if (!stopping) stream.close();
    co_return result ? result : error_code(pg::errc::connection_lost);
  }

  /// Stop within the grace period: spill queued work, let attempts finish, persist, final status.
  asio::awaitable<void> shutdown() {
    auto deadline = steady::now() + options.shutdown_grace;
    background.emit(asio::cancellation_type::total);  // claims and sweeps stop; the writer goes on
    co_await deliveries.shutdown(deadline);
    co_await store.async_idle(deadline);
    confirm();
    if (store.backlog() == 0 && stream.confirmed().valid() && stream.confirmed() > progress_recorded &&
        steady::now() < deadline) {
      progress_recorded = stream.confirmed();
      store.enqueue(sql::progress_write{options.slot, stream.info().system_id, progress_recorded});
      co_await store.async_idle(deadline);
    }
    co_await stream.async_stop();
    store.stop(deadline);
    co_await background.async_wait(deadline + 1s);
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
        auto began = steady::now();
        ec = co_await session();
        if (steady::now() - began > 30s) backoff = 50ms;  // it ran for a while: start over gently
      }
      if (stopping) break;
      lead.release();
      log::warn("session.retry", {{"error", ec.message()}, {"retry_ms", static_cast<std::int64_t>(backoff.count())}});
      co_await sleep(backoff);
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, options.reconnect_max);
    }
    co_await shutdown();
    co_return 0;
  }
};

engine::engine(asio::any_io_executor ex, run_options options) {
  if (options.instance_name.empty()) options.instance_name = default_instance_name();
  impl_ = std::make_unique<impl>(ex, std::move(options));
}

engine::~engine() = default;

void engine::request_stop() {
  auto& s = *impl_;
  if (s.stopping) return;
  s.stopping = true;
  s.stream.interrupt();
  s.lead.cancel();
  s.backoff_timer.cancel();
}

bool engine::streaming() const { return impl_->session_active; }

asio::awaitable<int> engine::run() { co_return co_await impl_->run(); }

asio::awaitable<std::string> engine::metrics_text() {
  auto& s = *impl_;
  metrics_snapshot m;
  m.events = s.events;
  m.malformed_rows = s.malformed_rows;
  m.sessions = s.sessions;
  m.delivery = s.deliveries.stats();
  m.queued = s.deliveries.scheduler().queued_total();
  m.in_flight = s.deliveries.scheduler().in_flight_total();
  m.store_backlog = s.store.backlog();
  m.streaming = s.session_active;
  m.confirmed = s.stream.confirmed();
  m.received = s.stream.received();
  m.lag_seconds = s.lag_seconds();
  std::map<std::int64_t, endpoint_metrics> by_id;
  for (auto id : s.directory.ids())
    by_id[id] = {id, s.deliveries.scheduler().queued(id), s.deliveries.scheduler().in_flight(id), std::nullopt};
  if (auto ages = co_await s.store.oldest_pending())
    for (const auto& [id, age] : *ages) {
      auto& e = by_id[id];
      e.id = id;
      e.oldest_pending_age_s = age;
    }
  for (auto& [id, e] : by_id) m.endpoints.push_back(e);
  co_return render_prometheus(m);
}

}  // namespace walhook::relay
