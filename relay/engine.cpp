#include "relay/engine.hpp"

#include "common/log.hpp"
#include "common/pg_connection.hpp"
#include "common/time.hpp"
#include "delivery/breaker.hpp"
#include "delivery/http_client.hpp"
#include "delivery/policy.hpp"
#include "delivery/scheduler.hpp"
#include "delivery/signing.hpp"
#include "relay/lsn_tracker.hpp"
#include "relay/rows.hpp"
#include "sql/session.hpp"
#include "sql/state_store.hpp"
#include "wal/errc.hpp"
#include "wal/relation_cache.hpp"
#include "wal/replication_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include <unistd.h>

namespace walhook::relay {
namespace asio = boost::asio;
namespace pgo = wal::pgoutput;
using namespace std::chrono_literals;
using boost::system::error_code;
using delivery::job;
using steady = std::chrono::steady_clock;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

namespace {

// Advisory lock (two-int form) that elects the one active instance per slot:
// classid = this constant, objid = hashtext(slot).
constexpr const char* lock_class = "2003748971";

std::string default_instance_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return fmt::format("{}:{}", host, ::getpid());
}

}  // namespace

struct engine::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor ex, run_options o)
      : executor(ex),
        options(std::move(o)),
        stream(ex, stream_options_of(options)),
        store(ex, store_options_of(options)),
        http(ex, options.http),
        sched(options.limits),
        lock_conn(ex),
        claim_timer(ex),
        sweep_timer(ex),
        idle_timer(ex),
        backoff_timer(ex),
        rng(std::random_device{}()) {}

  static wal::stream_options stream_options_of(const run_options& o) {
    wal::stream_options s;
    s.conninfo = o.database_url;
    s.slot = o.slot;
    s.publications = o.publications;
    s.status_interval = o.status_interval;
    s.application_name = "walhook " + o.instance_name;
    return s;
  }
  static sql::state_store_options store_options_of(const run_options& o) {
    sql::state_store_options s;
    s.conninfo = o.database_url;
    s.max_batch = o.max_batch;
    s.application_name = "walhook-state " + o.instance_name;
    return s;
  }

  asio::any_io_executor executor;
  run_options options;
  wal::replication_stream stream;
  sql::state_store store;
  delivery::http_client http;
  delivery::scheduler sched;
  lsn_tracker tracker;
  wal::relation_cache relations;
  pg::connection lock_conn;
  asio::steady_timer claim_timer;
  asio::steady_timer sweep_timer;
  asio::steady_timer idle_timer;   // woken when attempts finish (shutdown and session changes wait on it)
  asio::steady_timer backoff_timer;
  std::mt19937_64 rng;

  std::unordered_map<std::int64_t, endpoint> endpoints;
  std::unordered_map<std::string, std::vector<std::int64_t>> tenants;
  std::unordered_map<std::int64_t, delivery::breaker_state> health;
  std::unordered_set<std::int64_t> backlog;  // endpoints believed to have pending rows
  std::unordered_map<std::int64_t, std::uint64_t> pending_written;    // pending rows committed, per endpoint
  std::unordered_map<std::int64_t, std::uint64_t> pending_unwritten;  // pending rows queued, not yet committed
  std::optional<std::uint32_t> outbox_oid;
  std::optional<std::uint32_t> endpoints_oid;

  lsn_tracker::ticket current_ticket = 0;
  std::uint64_t current_final_lsn = 0;
  bool stopping = false;
  bool session_active = false;
  bool claim_requested = false;
  bool claim_waiting = false;
  std::size_t attempts_running = 0;
  std::size_t background_running = 0;
  steady::time_point shutdown_deadline{};
  walhook::lsn progress_recorded;
  steady::time_point progress_at{};

  // Attempt durations (Prometheus histogram, seconds).
  static constexpr std::array<double, 11> latency_buckets{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  std::array<std::uint64_t, latency_buckets.size() + 1> latency_counts{};
  double latency_sum_s = 0;
  void observe_latency(double s) {
    std::size_t i = 0;
    while (i < latency_buckets.size() && s > latency_buckets[i]) ++i;
    ++latency_counts[i];
    latency_sum_s += s;
  }

  // When each open transaction began (for slot lag in seconds), by ticket.
  std::deque<std::pair<lsn_tracker::ticket, steady::time_point>> open_since;
  void prune_open_since() {
    auto oldest = tracker.oldest_open();
    while (!open_since.empty() && (oldest == 0 || open_since.front().first < oldest)) open_since.pop_front();
  }
  double lag_seconds() {
    prune_open_since();
    if (tracker.oldest_open() == 0 || open_since.empty()) return 0;
    return std::chrono::duration<double>(steady::now() - open_since.front().second).count();
  }
  engine_stats counters;

  // ---------------------------------------------------------------- helpers

  double unit_random() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }

  void request_claim() {
    claim_requested = true;
    if (claim_waiting) claim_timer.cancel();
  }

  void confirm() { stream.confirm(tracker.confirmable()); }

  void release(lsn_tracker::ticket t) {
    if (t == 0) return;
    tracker.release(t);
    confirm();
  }

  template <class Awaitable>
  void spawn_background(Awaitable a, const char* what) {
    ++background_running;
    asio::co_spawn(executor, std::move(a), [self = shared_from_this(), what](std::exception_ptr e) {
      --self->background_running;
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          log::error("engine.task_failed", {{"task", what}, {"error", ex.what()}});
        }
      }
      self->idle_timer.cancel();
    });
  }

  // ---------------------------------------------------------------- endpoints

  void index_endpoint(const endpoint& e) {
    auto& ids = tenants[e.tenant_id];
    if (std::find(ids.begin(), ids.end(), e.id) == ids.end()) ids.push_back(e.id);
  }
  void unindex_endpoint(const endpoint& e) {
    auto t = tenants.find(e.tenant_id);
    if (t == tenants.end()) return;
    std::erase(t->second, e.id);
    if (t->second.empty()) tenants.erase(t);
  }

  void put_endpoint(endpoint e) {
    auto old = endpoints.find(e.id);
    bool was_active = false;
    if (old != endpoints.end()) {
      was_active = old->second.status == endpoint_status::active;
      if (old->second.url != e.url) http.forget(std::to_string(e.id));
      unindex_endpoint(old->second);
    }
    sched.configure(e.id, e.max_concurrency, e.aggregate_ordering);
    index_endpoint(e);
    std::int64_t id = e.id;
    bool active = e.status == endpoint_status::active;
    endpoints[id] = std::move(e);
    if (was_active && !active) {
      spill_all(sched.drain(id), std::nullopt, "endpoint " + std::string(to_string(endpoints[id].status)));
    }
    if (active && !was_active) {
      // Resumed or enabled by an operator: forget the breaker's streak and look for pending rows.
      health.erase(id);
      backlog.insert(id);
      request_claim();
    }
  }

  void remove_endpoint(std::int64_t id) {
    auto it = endpoints.find(id);
    if (it == endpoints.end()) return;
    unindex_endpoint(it->second);
    endpoints.erase(it);
    http.forget(std::to_string(id));
    // Deliveries to a deleted endpoint have nowhere to go: release them.
    for (auto& j : sched.drain(id)) release(j.ticket);
    backlog.erase(id);
    log::info("endpoint.removed", {{"endpoint_id", id}});
  }

  void clear_endpoints() {
    std::vector<std::int64_t> ids;
    for (auto& [id, e] : endpoints) ids.push_back(id);
    for (auto id : ids) remove_endpoint(id);
  }

  asio::awaitable<error_code> load_endpoints() {
    auto conn = co_await store.reader();
    if (!conn) co_return conn.error();
    auto res = co_await (*conn)->async_exec(
        "SELECT id, tenant_id, url, secret, event_types, max_concurrency, status, ordering FROM walhook.endpoints",
        pg::params{}, 30s);
    if (!res) co_return res.error();
    // Reuse the stream's row decoding: present the result as a Relation and its tuples.
    pgo::relation rel;
    for (int c = 0; c < res->columns(); ++c) rel.columns.push_back({0, PQfname(res->get(), c), 0, -1});
    std::unordered_set<std::int64_t> seen;
    for (int r = 0; r < res->rows(); ++r) {
      pgo::tuple t;
      for (int c = 0; c < res->columns(); ++c) {
        if (res->is_null(r, c)) t.push_back({pgo::value_kind::null, {}});
        else t.push_back({pgo::value_kind::text, std::string(res->value(r, c))});
      }
      auto e = endpoint_from_row(row_view(rel, t), nullptr);
      if (!e) continue;
      seen.insert(e->id);
      put_endpoint(std::move(*e));
    }
    std::vector<std::int64_t> gone;
    for (auto& [id, e] : endpoints)
      if (!seen.contains(id)) gone.push_back(id);
    for (auto id : gone) remove_endpoint(id);
    co_return error_code{};
  }

  // ---------------------------------------------------------------- spilling and persisting

  /// Persists a job's state; its ticket is released once durable.
  void persist(const job& j, sql::delivery_outcome outcome) {
    if (outcome.status == sql::delivery_status::pending) {
      backlog.insert(j.endpoint_id);
      ++counters.spilled;
    }
    if (outcome.status == sql::delivery_status::dead) ++counters.dead;
    bool pending = outcome.status == sql::delivery_status::pending;
    if (pending) ++pending_unwritten[j.endpoint_id];
    auto durable = [self = shared_from_this(), t = j.ticket, id = j.endpoint_id, pending] {
      self->release(t);
      if (pending) {
        --self->pending_unwritten[id];
        ++self->pending_written[id];
        self->request_claim();
      }
    };
    if (j.row_id) {
      store.enqueue(sql::update_delivery{*j.row_id, std::move(outcome)}, std::move(durable));
      return;
    }
    sql::upsert_delivery w;
    w.endpoint_id = j.endpoint_id;
    w.event_id = j.ev->id;
    w.aggregate_id = j.ev->aggregate_id;
    w.merge_key = j.ev->merge_key;
    w.event_created_at = j.ev->created_at;
    w.commit_lsn = j.ev->commit_lsn;
    w.outcome = std::move(outcome);
    store.enqueue(std::move(w), std::move(durable));
  }

  /// The outcome of an attempt made now.
  static sql::delivery_outcome after_attempt(sql::delivery_status status, int attempts,
                                         std::optional<system_clock::time_point> next_at, std::optional<int> last_status,
                                         std::optional<std::string> last_error) {
    return {status, attempts, next_at, system_now(), last_status, std::move(last_error)};
  }

  void spill(const job& j, std::optional<system_clock::time_point> next_at, std::optional<std::string> reason = {}) {
    persist(j, {sql::delivery_status::pending, j.attempts, next_at.value_or(system_now()), std::nullopt, std::nullopt,
                std::move(reason)});
  }

  /// A delivery whose endpoint was removed: a persisted one ends dead, one from the stream is
  /// simply done.
  void forget(const job& j) {
    if (j.row_id) dead(j, "endpoint no longer exists");
    else release(j.ticket);
  }

  void spill_all(std::vector<job> jobs, std::optional<system_clock::time_point> next_at, std::string reason) {
    for (auto& j : jobs) spill(j, next_at, reason);
  }

  void dead(const job& j, std::string reason, std::optional<int> last_status = {}, bool attempted = false) {
    log::warn("delivery.dead", {{"endpoint_id", j.endpoint_id}, {"event_id", j.ev->id}, {"reason", reason}});
    persist(j, {sql::delivery_status::dead, j.attempts + (attempted ? 1 : 0), std::nullopt,
                attempted ? std::optional(system_now()) : std::nullopt, last_status, std::move(reason)});
  }

  // ---------------------------------------------------------------- routing and scheduling

  void submit(job j) {
    auto it = endpoints.find(j.endpoint_id);
    if (it == endpoints.end()) return forget(j);
    const endpoint& ep = it->second;
    if (!ep.config_error.empty()) return dead(j, ep.config_error);
    if (j.ev->body.size() > options.max_payload_bytes)
      return dead(j, fmt::format("request body of {} bytes exceeds the limit of {} bytes", j.ev->body.size(),
                                 options.max_payload_bytes));
    if (ep.status != endpoint_status::active) return spill(j, std::nullopt, "endpoint " + std::string(to_string(ep.status)));
    auto h = health.find(ep.id);
    if (h != health.end() && delivery::mode(h->second, system_now()) == delivery::breaker_mode::paused)
      return spill(j, h->second.paused_until, "endpoint paused by the circuit breaker");
    // While an endpoint has persisted backlog, new state updates (merge key) and new events of
    // an aggregate-ordered endpoint go through PostgreSQL too, so merges and per-aggregate order
    // hold across memory and the table. Facts keep the in-memory path: their order is not
    // promised, and routing them through the table would halve throughput under load.
    if (backlog.contains(ep.id) && !j.row_id && (j.ev->merge_key || ep.aggregate_ordering)) return spill(j, std::nullopt);
    auto pushed = sched.push(std::move(j));
    switch (pushed.status) {
      case delivery::scheduler::push_status::queued: break;
      case delivery::scheduler::push_status::merged:
        ++counters.merged;
        release(pushed.replaced->ticket);
        break;
      case delivery::scheduler::push_status::full:
        spill(*pushed.replaced, std::nullopt);
        break;
    }
    dispatch();
  }

  void on_event(const row_view& row) {
    ++counters.events;
    std::string why;
    auto ev = event_from_row(row, current_final_lsn, why);
    if (!ev) {
      ++counters.malformed_rows;
      log::error("outbox.malformed_row", {{"reason", why}});
      return;
    }
    auto shared = std::make_shared<const delivery::event>(std::move(*ev));
    auto t = tenants.find(shared->tenant_id);
    if (t == tenants.end()) return;  // a tenant with no endpoints: nothing to deliver
    auto now = steady::now();
    for (std::int64_t id : t->second) {
      auto e = endpoints.find(id);
      if (e == endpoints.end() || !e->second.subscribed(shared->type)) continue;
      job j;
      j.ev = shared;
      j.endpoint_id = id;
      j.ticket = current_ticket;
      j.enqueued_at = now;
      tracker.hold(current_ticket);
      submit(std::move(j));
    }
  }

  void dispatch() {
    while (auto j = sched.next()) start_attempt(std::move(*j));
  }

  void start_attempt(job j) {
    ++attempts_running;
    asio::co_spawn(executor, attempt(std::move(j)), [self = shared_from_this()](std::exception_ptr e) {
      --self->attempts_running;
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          log::error("delivery.attempt_crashed", {{"error", ex.what()}});
        }
      }
      self->idle_timer.cancel();
    });
  }

  void write_health(std::int64_t id, const delivery::breaker_state& s, std::optional<int> last_status,
                    std::optional<std::string> last_error, bool disable, std::optional<std::string> disabled_reason) {
    sql::health_write h;
    h.endpoint_id = id;
    h.consecutive_failures = s.consecutive_failures;
    h.first_failure_at = s.first_failure_at;
    h.last_failure_at = s.last_failure_at;
    h.last_success_at = s.last_success_at;
    h.paused_until = s.paused_until;
    h.probe_rounds = s.probe_rounds;
    h.last_status = last_status;
    h.last_error = std::move(last_error);
    h.disable = disable;
    h.disabled_reason = std::move(disabled_reason);
    store.enqueue(std::move(h));
  }

  void disable_endpoint(std::int64_t id, const std::string& reason, std::optional<int> last_status,
                        std::optional<std::string> last_error) {
    auto it = endpoints.find(id);
    if (it == endpoints.end() || it->second.status == endpoint_status::disabled) return;
    ++counters.disabled_endpoints;
    log::warn("endpoint.disabled", {{"endpoint_id", id}, {"reason", reason}});
    write_health(id, health[id], last_status, std::move(last_error), true, reason);
    endpoint e = it->second;
    e.status = endpoint_status::disabled;
    put_endpoint(std::move(e));  // the stream echoes the row update later
  }

  asio::awaitable<void> attempt(job j) {
    auto self = shared_from_this();
    auto it = endpoints.find(j.endpoint_id);
    if (it == endpoints.end() || !it->second.target) {
      sched.finished(j);
      if (it == endpoints.end()) forget(j);
      else dead(j, it->second.config_error);
      dispatch();
      co_return;
    }
    const std::int64_t endpoint_id = j.endpoint_id;
    delivery::http_target target = *it->second.target;
    delivery::http_request req;
    req.body = j.ev->body;
    auto ts = unix_seconds(system_now());
    req.headers = {{"webhook-id", j.ev->id},
                   {"webhook-timestamp", std::to_string(ts)},
                   {"webhook-signature", delivery::signature_header(it->second.keys, j.ev->id, ts, req.body)}};
    ++counters.attempts;
    auto attempt_started = steady::now();
    boost::system::result<delivery::http_response> response = delivery::transport_errc::protocol_error;
    try {
      response = co_await http.async_post(std::to_string(endpoint_id), target, req);
    } catch (const std::exception& e) {
      // Never leave the job (and its LSN ticket) behind: an unexpected exception is a failed attempt.
      log::error("delivery.attempt_exception", {{"endpoint_id", endpoint_id}, {"error", e.what()}});
    }
    observe_latency(std::chrono::duration<double>(steady::now() - attempt_started).count());
    auto now = system_now();
    auto outcome = delivery::classify(response, now, options.retry);
    sched.finished(j);
    if (!endpoints.contains(endpoint_id)) {  // removed while the attempt ran
      forget(j);
      dispatch();
      co_return;
    }
    auto& breaker = health[endpoint_id];
    int attempts = j.attempts + 1;
    std::optional<int> status = outcome.status ? std::optional<int>(outcome.status) : std::nullopt;

    switch (outcome.kind) {
      case delivery::verdict::delivered: {
        ++counters.delivered;
        bool was_failing = breaker.consecutive_failures > 0 || breaker.paused_until;
        bool was_paused = breaker.paused_until.has_value();
        delivery::record_success(breaker, now);
        if (was_failing) {
          write_health(endpoint_id, breaker, status, std::nullopt, false, std::nullopt);
          // A closed circuit breaker is news; one success between failures is not.
          if (was_paused) log::info("endpoint.recovered", {{"endpoint_id", endpoint_id}});
        }
        if (j.row_id || options.record == record_mode::all)
          persist(j, after_attempt(sql::delivery_status::delivered, attempts, std::nullopt, status, std::nullopt));
        else
          release(j.ticket);
        if (backlog.contains(endpoint_id)) request_claim();
        break;
      }
      case delivery::verdict::gone:
        ++counters.failed_attempts;
        dead(j, outcome.error, status, true);
        disable_endpoint(endpoint_id, "HTTP 410 Gone", status, outcome.error);
        break;
      case delivery::verdict::dead:
        ++counters.failed_attempts;
        dead(j, outcome.error, status, true);
        break;
      case delivery::verdict::retry: {
        ++counters.failed_attempts;
        auto created = parse_pg_timestamptz(j.ev->created_at);
        std::optional<system_clock::time_point> created_at;
        if (created) created_at = std::chrono::time_point_cast<system_clock::duration>(*created);
        auto decision = delivery::next_attempt(attempts, now, created_at, outcome.retry_after, options.retry, unit_random());
        auto action = delivery::record_failure(breaker, now, options.breaker);
        // Retry-After speaks for the endpoint, not just this delivery: nothing is sent to it
        // before then (the pause ends like a breaker pause, with one probe round).
        if (outcome.retry_after && outcome.retry_after->count() > 0) {
          auto until = now + *outcome.retry_after;
          if (!breaker.paused_until || *breaker.paused_until < until) {
            breaker.paused_until = until;
            if (action == delivery::breaker_action::none) action = delivery::breaker_action::paused;
            log::info("endpoint.retry_after", {{"endpoint_id", endpoint_id}, {"until", format_iso8601(until)}});
          }
        }
        if (decision.give_up) {
          dead(j, decision.reason + ": " + outcome.error, status, true);
        } else {
          auto next_at = decision.next_attempt_at;
          if (breaker.paused_until && *breaker.paused_until > next_at) next_at = *breaker.paused_until;
          persist(j, after_attempt(sql::delivery_status::pending, attempts, next_at, status, outcome.error));
        }
        log::debug("delivery.failed", {{"endpoint_id", endpoint_id}, {"event_id", j.ev->id}, {"error", outcome.error},
                                       {"attempts", attempts}});
        // Per-aggregate order: later events queued behind this one go to PostgreSQL with it, where
        // claims release them only after it (the endpoint now has backlog, so new ones follow).
        if (auto e = endpoints.find(endpoint_id); e != endpoints.end() && e->second.aggregate_ordering)
          spill_all(sched.drain(endpoint_id), std::nullopt, "behind a failed delivery of its aggregate");
        if (action == delivery::breaker_action::disable) {
          disable_endpoint(endpoint_id, fmt::format("failing continuously since {}", format_iso8601(*breaker.first_failure_at)),
                           status, outcome.error);
        } else {
          write_health(endpoint_id, breaker, status, outcome.error, false, std::nullopt);
          if (action == delivery::breaker_action::paused) {
            log::warn("endpoint.paused", {{"endpoint_id", endpoint_id},
                                          {"until", format_iso8601(*breaker.paused_until)},
                                          {"consecutive_failures", breaker.consecutive_failures}});
            spill_all(sched.drain(endpoint_id), breaker.paused_until, "endpoint paused by the circuit breaker");
            request_claim();  // re-arm the claim timer for the pause's end
          }
        }
        break;
      }
    }
    dispatch();
  }

  // ---------------------------------------------------------------- claims of persisted work

  /// Runs a background loop, restarting it (after a pause) if it ever throws.
  asio::awaitable<void> keep_running(asio::awaitable<void> (impl::*loop)(), const char* what) {
    while (!stopping) {
      bool failed = false;
      try {
        co_await (this->*loop)();
      } catch (const std::exception& e) {
        log::error("engine.task_restarted", {{"task", what}, {"error", e.what()}});
        failed = true;
      }
      if (failed) {
        asio::steady_timer pause(executor, 1s);
        co_await pause.async_wait(tuple_awaitable);
      }
    }
  }

  asio::awaitable<void> claim_loop() {
    auto next_wake = steady::time_point::max();
    while (!stopping) {
      if (!claim_requested) {
        claim_waiting = true;
        claim_timer.expires_at(next_wake);
        co_await claim_timer.async_wait(tuple_awaitable);
        claim_waiting = false;
        if (stopping) break;
        if (!claim_requested && steady::now() < next_wake) continue;
      }
      claim_requested = false;
      next_wake = steady::time_point::max();
      if (!session_active) continue;

      auto now_sys = system_now();
      std::vector<sql::claim_quota> quotas;
      std::vector<std::int64_t> waiting;  // claimable endpoints with backlog
      for (std::int64_t id : backlog) {
        auto e = endpoints.find(id);
        if (e == endpoints.end() || e->second.status != endpoint_status::active || !e->second.config_error.empty())
          continue;
        auto h = health.find(id);
        auto m = h == health.end() ? delivery::breaker_mode::closed : delivery::mode(h->second, now_sys);
        if (m == delivery::breaker_mode::paused) {
          auto at = steady::now() + std::chrono::duration_cast<steady::duration>(*h->second.paused_until - now_sys);
          next_wake = std::min(next_wake, at);
          continue;
        }
        waiting.push_back(id);
        // Probing after a pause: one round of at most max_concurrency attempts at a time.
        if (m == delivery::breaker_mode::probing && sched.in_flight(id) > 0) continue;
        std::size_t n = m == delivery::breaker_mode::probing ? sched.free_slots(id) : claim_room(id, e->second);
        n = std::min(n, global_claim_room());
        if (n > 0) quotas.push_back({id, static_cast<int>(n), e->second.aggregate_ordering});
      }
      if (!quotas.empty()) {
        auto claimed = co_await store.claim_due(quotas);
        if (!claimed) {
          log::warn("claims.failed", {{"error", claimed.error().message()}});
          next_wake = steady::now() + 1s;
          continue;
        }
        for (auto& c : *claimed) admit_claimed(std::move(c));
        dispatch();
      }
      if (waiting.empty()) continue;
      // A pending row that commits while next_due runs may be missing from its answer: the
      // endpoint keeps its backlog mark if any did (no lost wakeup).
      std::unordered_map<std::int64_t, std::uint64_t> written_before;
      for (auto id : waiting) written_before[id] = pending_written[id];
      auto due = co_await store.next_due(waiting);
      if (!due) {
        next_wake = std::min(next_wake, steady::now() + 1s);
        continue;
      }
      std::unordered_set<std::int64_t> with_pending;
      for (auto& [id, ms] : *due) {
        with_pending.insert(id);
        // Due now but not claimable (slots busy, aggregates blocked): attempts finishing wake
        // us; re-check after a short pause in case nothing is in flight.
        auto wait = ms.count() <= 0 ? std::chrono::milliseconds{sched.in_flight(id) > 0 ? 1000 : 100} : ms;
        next_wake = std::min(next_wake, steady::now() + wait);
      }
      // No pending rows left (and no writes on their way): the endpoint takes new work in memory again.
      for (auto id : waiting) {
        // For aggregate order, a persisted delivery still in flight may fail and come back: wait.
        auto e = endpoints.find(id);
        bool ordered = e != endpoints.end() && e->second.aggregate_ordering;
        if (!with_pending.contains(id) && pending_unwritten[id] == 0 && pending_written[id] == written_before[id] &&
            (!ordered || sched.in_flight(id) == 0))
          backlog.erase(id);
      }
    }
  }

  // Claims fetch a few rounds of work ahead (claim_ahead × the concurrency) so one round trip
  // feeds several attempts; claimed rows wait in memory as 'sending' for seconds at most.
  static constexpr std::size_t claim_ahead = 4;
  std::size_t claim_room(std::int64_t id, const endpoint& e) const {
    std::size_t want = claim_ahead * static_cast<std::size_t>(e.max_concurrency);
    std::size_t have = sched.queued(id) + sched.in_flight(id);
    return want > have ? want - have : 0;
  }
  std::size_t global_claim_room() const {
    std::size_t want = claim_ahead * sched.limits().max_in_flight;
    std::size_t have = sched.queued_total() + sched.in_flight_total();
    return want > have ? want - have : 0;
  }

  void admit_claimed(sql::claimed_delivery c) {
    ++counters.claimed;
    auto ev = std::make_shared<delivery::event>();
    ev->id = c.event_id;
    ev->merge_key = c.merge_key;
    ev->aggregate_id = c.aggregate_id;
    ev->commit_lsn = c.commit_lsn;
    job j;
    j.endpoint_id = c.endpoint_id;
    j.row_id = c.row_id;
    j.attempts = c.attempts;
    j.enqueued_at = steady::now();
    if (c.event_missing) {
      ev->created_at = format_iso8601(system_now());
      j.ev = ev;
      dead(j, "event no longer in walhook.outbox");
      return;
    }
    ev->tenant_id = std::move(c.tenant_id);
    ev->type = std::move(c.event_type);
    ev->created_at = std::move(c.event_created_at);
    ev->payload = std::move(c.payload);
    ev->body = delivery::make_body(*ev);
    j.ev = ev;
    // The same checks as fresh work: the endpoint may have been paused, disabled or removed
    // while the claim ran, and the payload limit holds for replayed deliveries too.
    submit(std::move(j));
  }

  // ---------------------------------------------------------------- periodic work

  asio::awaitable<void> sweep_loop() {
    auto last_stale_check = steady::now();
    auto last_retention = steady::now() - 1h;  // first pass soon after the session starts
    while (!stopping) {
      sweep_timer.expires_after(std::min<std::chrono::milliseconds>(options.max_wait_in_memory / 4, 250ms));
      co_await sweep_timer.async_wait(tuple_awaitable);
      if (stopping) break;
      // Deliveries that waited too long in memory go to PostgreSQL so the slot can move on.
      auto old = sched.take_waiting_since(steady::now() - options.max_wait_in_memory);
      for (auto& j : old) spill(j, std::nullopt);
      record_progress();
      if (session_active && steady::now() - last_retention >= 10min) {
        last_retention = steady::now();
        co_await expire_old_rows();
      }
      if (session_active && steady::now() - last_stale_check >= 30s) {
        last_stale_check = steady::now();
        auto n = co_await store.reset_stale_sending(options.stale_sending_after);
        if (n && *n > 0) {
          log::warn("deliveries.stale_sending_reset", {{"rows", static_cast<std::int64_t>(*n)}});
          if (auto ids = co_await store.endpoints_with_backlog()) backlog.insert(ids->begin(), ids->end());
          request_claim();
        }
      }
    }
  }

  /// Retention (DESIGN §7): outbox rows and finished deliveries older than the retention period
  /// go, a batch at a time, yielding between batches.
  asio::awaitable<void> expire_old_rows() {
    long total = 0;
    for (int round = 0; round < 1000 && !stopping && session_active; ++round) {
      auto n = co_await store.delete_expired(options.retention, options.retention_batch);
      if (!n) {
        log::warn("retention.failed", {{"error", n.error().message()}});
        break;
      }
      total += *n;
      if (*n < options.retention_batch) break;
      asio::steady_timer pause(executor, 50ms);
      co_await pause.async_wait(tuple_awaitable);
    }
    if (total > 0) log::info("retention.deleted", {{"rows", static_cast<std::int64_t>(total)}});
  }

  /// Records the acknowledged position in walhook.slot_progress every 200 ms at most, when it moved.
  void record_progress() {
    auto now = steady::now();
    walhook::lsn confirmed = stream.confirmed();
    if (!session_active || !confirmed.valid() || confirmed <= progress_recorded || now - progress_at < 200ms) return;
    progress_recorded = confirmed;
    progress_at = now;
    store.enqueue(sql::progress_write{options.slot, stream.info().system_id, confirmed.value()});
  }

  asio::awaitable<void> sleep(std::chrono::milliseconds d) {
    backoff_timer.expires_after(d);
    co_await backoff_timer.async_wait(tuple_awaitable);
  }

  /// Waits until no attempt is running (or the deadline).
  asio::awaitable<void> wait_attempts(steady::time_point deadline) {
    while (attempts_running > 0 && steady::now() < deadline) {
      idle_timer.expires_at(std::min(deadline, steady::now() + 100ms));
      co_await idle_timer.async_wait(tuple_awaitable);
    }
  }
  asio::awaitable<void> wait_store(steady::time_point deadline) {
    while (store.backlog() > 0 && steady::now() < deadline) {
      idle_timer.expires_at(std::min(deadline, steady::now() + 20ms));
      co_await idle_timer.async_wait(tuple_awaitable);
    }
  }

  // ---------------------------------------------------------------- leadership (HA)

  /// Takes the advisory lock of the slot, waiting as a standby while another instance holds it.
  asio::awaitable<error_code> acquire_leadership() {
    if (auto ec = co_await sql::open_session(lock_conn, options.database_url, "walhook-lock " + options.instance_name, 10s)) {
      log::warn("leader.connect_failed", {{"error", lock_conn.last_error()}});
      co_return ec;
    }
    pg::params slot{options.slot};
    auto tried = co_await lock_conn.async_exec(fmt::format("SELECT pg_try_advisory_lock({}, hashtext($1))", lock_class),
                                               slot, 10s);
    if (!tried) co_return tried.error();
    if (tried->value(0, 0) == "t") co_return error_code{};
    auto holder = co_await lock_conn.async_exec(
        fmt::format("SELECT a.pid, coalesce(a.application_name, ''), coalesce(host(a.client_addr), 'local'), "
                    "a.backend_start FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = {} "
                    "AND l.objid = hashtext($1)::oid AND l.objsubid = 2",
                    lock_class),
        slot, 10s);
    if (holder && holder->rows() > 0) {
      log::info("standby.waiting", {{"slot", options.slot},
                                    {"active_pid", std::string(holder->value(0, 0))},
                                    {"active_instance", std::string(holder->value(0, 1)).substr(
                                                            holder->value(0, 1).starts_with("walhook-lock ") ? 13 : 0)},
                                    {"active_client", std::string(holder->value(0, 2))},
                                    {"active_since", std::string(holder->value(0, 3))}});
    } else {
      log::info("standby.waiting", {{"slot", options.slot}});
    }
    // Block on the server until the active instance's session ends: no polling.
    while (!stopping) {
      auto got = co_await lock_conn.async_exec(fmt::format("SELECT pg_advisory_lock({}, hashtext($1))", lock_class),
                                               slot, std::chrono::hours{24});
      if (got) co_return error_code{};
      if (got.error() != pg::errc::timeout) co_return got.error();
    }
    co_return error_code(pg::errc::cancelled);
  }

  /// Ends the session if the lock's connection dies (the lock is gone with it).
  asio::awaitable<void> watch_leadership(std::uint64_t session) {
    asio::steady_timer t(executor);
    while (!stopping && session_active && counters.sessions == session) {
      t.expires_after(2s);
      co_await t.async_wait(tuple_awaitable);
      if (stopping || !session_active || counters.sessions != session) break;
      auto ping = co_await lock_conn.async_exec("SELECT 1", pg::params{}, 5s);
      if (!ping) {
        log::warn("leader.lost", {{"error", lock_conn.last_error()}});
        session_active = false;
        stream.interrupt();
        break;
      }
    }
  }

  // ---------------------------------------------------------------- the stream

  error_code handle(const wal::stream_event& ev) {
    if (auto* k = std::get_if<wal::keepalive>(&ev)) {
      tracker.keepalive(k->wal_end);
      confirm();
      return {};
    }
    const auto& ch = std::get<wal::change>(ev);
    // Rows are checked against their Relation message (unknown OID, column count) first.
    if (auto ec = relations.observe(ch.message)) return ec;
    return std::visit([&](const auto& m) { return on_message(m); }, ch.message);
  }

  error_code on_message(const pgo::begin& b) {
    current_ticket = tracker.begin();
    open_since.emplace_back(current_ticket, steady::now());
    current_final_lsn = b.final_lsn.value();
    return {};
  }
  error_code on_message(const pgo::commit& c) {
    tracker.commit(current_ticket, c.end_lsn);
    current_ticket = 0;
    confirm();
    prune_open_since();
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
    if (outbox_oid && m.relation_oid == *outbox_oid) on_event(row_view(*rel, m.new_tuple));
    else if (endpoints_oid && m.relation_oid == *endpoints_oid) apply_endpoint_row(*rel, m.new_tuple);
    return {};
  }
  error_code on_message(const pgo::update& m) {
    const auto* rel = relations.find(m.relation_oid);
    if (!rel) return wal::errc::unknown_relation;
    if (endpoints_oid && m.relation_oid == *endpoints_oid) {
      // A changed primary key arrives as the old key + the new row.
      if (m.key_tuple) {
        std::string_view id;
        if (row_view(*rel, *m.key_tuple).get("id", id) == row_view::state::value) remove_endpoint(std::stoll(std::string(id)));
      }
      apply_endpoint_row(*rel, m.new_tuple);
    }
    return {};
  }
  error_code on_message(const pgo::delete_& m) {
    const auto* rel = relations.find(m.relation_oid);
    if (!rel) return wal::errc::unknown_relation;
    if (endpoints_oid && m.relation_oid == *endpoints_oid) {
      const auto& t = m.key_tuple ? *m.key_tuple : *m.old_tuple;
      std::string_view id;
      if (row_view(*rel, t).get("id", id) == row_view::state::value) remove_endpoint(std::stoll(std::string(id)));
    }
    return {};
  }
  error_code on_message(const pgo::truncate& m) {
    for (auto oid : m.relation_oids)
      if (endpoints_oid && oid == *endpoints_oid) clear_endpoints();
    return {};
  }
  error_code on_message(const pgo::origin&) { return {}; }
  error_code on_message(const pgo::type&) { return {}; }
  /// Operator signals travel through the WAL, in order with the data: `walhook replay` and
  /// `walhook endpoint enable|resume` emit pg_logical_emit_message(true, 'walhook', …) so the
  /// running relay looks for pending deliveries of that endpoint — no polling.
  error_code on_message(const pgo::logical_message& m) {
    if (m.prefix != "walhook") return {};
    // "wake:<id>": pending deliveries of the endpoint are due (replay). "resume:<id>": an operator
    // resumed or enabled it — the circuit breaker closes too.
    bool resume = m.content.starts_with("resume:");
    if (!resume && !m.content.starts_with("wake:")) return {};
    std::int64_t id = 0;
    try {
      id = std::stoll(m.content.substr(m.content.find(':') + 1));
    } catch (const std::exception&) {
      return {};
    }
    if (resume && health.erase(id)) log::info("endpoint.breaker_reset", {{"endpoint_id", id}});
    backlog.insert(id);
    request_claim();
    return {};
  }

  void apply_endpoint_row(const pgo::relation& rel, const pgo::tuple& t) {
    row_view row(rel, t);
    std::string_view id_text;
    const endpoint* previous = nullptr;
    if (row.get("id", id_text) == row_view::state::value) {
      auto it = endpoints.find(std::stoll(std::string(id_text)));
      if (it != endpoints.end()) previous = &it->second;
    }
    auto e = endpoint_from_row(row, previous);
    if (!e) return;
    if (!e->config_error.empty()) log::warn("endpoint.invalid", {{"endpoint_id", e->id}, {"error", e->config_error}});
    bool news = !previous || previous->status != e->status || previous->url != e->url;
    log::emit(news ? log::level::info : log::level::debug, "endpoint.updated",
              {{"endpoint_id", e->id}, {"tenant_id", e->tenant_id}, {"status", std::string(to_string(e->status))}});
    put_endpoint(std::move(*e));
  }

  asio::awaitable<error_code> session() {
    auto session_no = ++counters.sessions;
    // Attempts of a previous session finish first, so resetting 'sending' rows below never
    // races an attempt of ours.
    co_await wait_attempts(steady::now() + options.http.total_deadline + 2s);
    co_await wait_store(steady::now() + 10s);
    for (auto& j : sched.drain_all())
      if (j.row_id) spill(j, std::nullopt);  // claimed rows go back; stream jobs are streamed again
    tracker.reset();
    relations.clear();
    outbox_oid.reset();
    endpoints_oid.reset();
    current_ticket = 0;

    auto reset = co_await store.reset_stale_sending(0s);
    if (!reset) co_return reset.error();
    if (*reset > 0) log::info("deliveries.sending_reset", {{"rows", static_cast<std::int64_t>(*reset)}});
    if (auto ec = co_await load_endpoints()) co_return ec;
    auto loaded = co_await store.load_health();
    if (!loaded) co_return loaded.error();
    health.clear();
    for (auto& h : *loaded) {
      delivery::breaker_state s;
      s.consecutive_failures = h.consecutive_failures;
      s.first_failure_at = h.first_failure_at;
      s.last_failure_at = h.last_failure_at;
      s.last_success_at = h.last_success_at;
      s.paused_until = h.paused_until;
      s.probe_rounds = h.probe_rounds;
      health[h.endpoint_id] = s;
    }
    auto with_backlog = co_await store.endpoints_with_backlog();
    if (!with_backlog) co_return with_backlog.error();
    backlog.clear();
    backlog.insert(with_backlog->begin(), with_backlog->end());

    // walhook's own record of what it acknowledged: the slot's may be older after a server restart.
    auto progress = co_await store.load_progress(options.slot);
    if (!progress) co_return progress.error();
    stream.resume_from(walhook::lsn{progress->first}, progress->second);

    // The previous walsender may still hold the slot for a moment after a takeover.
    auto backoff = 100ms;
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
                                        {"endpoints", static_cast<std::uint64_t>(endpoints.size())},
                                        {"endpoints_with_backlog", static_cast<std::uint64_t>(backlog.size())}});
    session_active = true;
    spawn_background(watch_leadership(session_no), "leadership watch");
    request_claim();

    error_code result;
    while (!stopping && session_active) {
      if (sched.over_memory_cap() || store.backlog() >= options.max_store_backlog) {
        if (auto ec = co_await stream.async_hold(100ms)) {
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
    if (!stopping && session_active) {
      log::warn("replication.stream_ended", {{"error", result.message()}, {"detail", stream.last_error()}});
    }
    session_active = false;
    co_return result ? result : error_code(pg::errc::connection_lost);
  }

  /// Stop within the grace period: spill queued work, let attempts finish, persist, final status.
  asio::awaitable<void> shutdown() {
    shutdown_deadline = steady::now() + options.shutdown_grace;
    auto deadline = shutdown_deadline;
    log::info("shutdown.begin", {{"in_flight", static_cast<std::uint64_t>(attempts_running)},
                                 {"queued", static_cast<std::uint64_t>(sched.queued_total())}});
    // Queued work goes to PostgreSQL; in-flight attempts get the grace period.
    for (auto& j : sched.drain_all()) spill(j, std::nullopt);
    co_await wait_attempts(deadline - 1s);
    if (attempts_running > 0) {
      log::warn("shutdown.cancelling_attempts", {{"in_flight", static_cast<std::uint64_t>(attempts_running)}});
      http.shutdown();  // remaining attempts fail with 'cancelled' and are persisted as pending
      co_await wait_attempts(steady::now() + 500ms);
    }
    co_await wait_store(deadline);
    confirm();
    if (store.backlog() == 0 && stream.confirmed().valid() && stream.confirmed() > progress_recorded &&
        steady::now() < deadline) {
      progress_recorded = stream.confirmed();
      store.enqueue(sql::progress_write{options.slot, stream.info().system_id, progress_recorded.value()});
      co_await wait_store(deadline);
    }
    co_await stream.async_stop();
  }
};

engine::engine(asio::any_io_executor ex, run_options options) {
  if (options.instance_name.empty()) options.instance_name = default_instance_name();
  impl_ = std::make_shared<impl>(ex, std::move(options));
}

engine::~engine() = default;

void engine::request_stop() {
  auto& s = *impl_;
  if (s.stopping) return;
  s.stopping = true;
  s.stream.interrupt();
  s.lock_conn.cancel();
  s.claim_timer.cancel();
  s.sweep_timer.cancel();
  s.backoff_timer.cancel();
}

bool engine::streaming() const { return impl_->session_active; }

asio::awaitable<int> engine::run() {
  auto s = impl_;
  bool store_done = false;
  asio::co_spawn(s->executor, s->store.run(), [s, &store_done](std::exception_ptr) {
    store_done = true;
    s->idle_timer.cancel();
  });
  s->spawn_background(s->keep_running(&impl::claim_loop, "claims"), "claims");
  s->spawn_background(s->keep_running(&impl::sweep_loop, "sweeper"), "sweeper");

  auto backoff = 100ms;
  while (!s->stopping) {
    auto ec = co_await s->acquire_leadership();
    if (!ec && !s->stopping) {
      log::info("leader.acquired", {{"slot", s->options.slot}, {"instance", s->options.instance_name}});
      auto began = steady::now();
      ec = co_await s->session();
      if (steady::now() - began > 30s) backoff = 100ms;  // it ran for a while: start over gently
    }
    if (s->stopping) break;
    s->lock_conn.close();
    log::warn("session.retry", {{"error", ec.message()}, {"retry_ms", static_cast<std::int64_t>(backoff.count())}});
    co_await s->sleep(backoff);
    backoff = std::min<std::chrono::milliseconds>(backoff * 2, s->options.reconnect_max);
  }

  co_await s->shutdown();
  s->store.stop(s->shutdown_deadline);
  while (!store_done || s->background_running > 0) {
    s->idle_timer.expires_after(50ms);
    co_await s->idle_timer.async_wait(tuple_awaitable);
    s->claim_timer.cancel();
    s->sweep_timer.cancel();
  }
  s->lock_conn.close();
  log::info("shutdown.done", {{"confirmed_lsn", s->stream.confirmed().to_string()}});
  co_return 0;
}

engine_stats engine::stats() const {
  engine_stats out = impl_->counters;
  out.queued = impl_->sched.queued_total();
  out.in_flight = impl_->sched.in_flight_total();
  out.store_backlog = impl_->store.backlog();
  out.confirmed_lsn = impl_->stream.confirmed().to_string();
  out.streaming = impl_->session_active;
  return out;
}

asio::awaitable<std::string> engine::metrics_text() {
  auto self = impl_;
  auto st = stats();
  std::string out;
  auto header = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n", name, help, type);
  };
  auto counter = [&](const char* name, const char* help, std::uint64_t v) {
    header(name, "counter", help);
    out += fmt::format("{} {}\n", name, v);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    header(name, "gauge", help);
    out += fmt::format("{} {}\n", name, v);
  };
  counter("walhook_events_total", "Outbox rows read from the slot.", st.events);
  counter("walhook_malformed_rows_total", "Outbox rows that could not become events.", st.malformed_rows);
  counter("walhook_attempts_total", "Delivery attempts made.", st.attempts);
  counter("walhook_delivered_total", "Deliveries that got a 2xx.", st.delivered);
  counter("walhook_failed_attempts_total", "Attempts that failed.", st.failed_attempts);
  counter("walhook_dead_total", "Deliveries that ended dead.", st.dead);
  counter("walhook_spilled_total", "Deliveries persisted as pending.", st.spilled);
  counter("walhook_merged_total", "Deliveries replaced by a newer one with the same merge key.", st.merged);
  counter("walhook_claimed_total", "Persisted deliveries claimed back for an attempt.", st.claimed);
  counter("walhook_endpoints_disabled_total", "Endpoints disabled by walhook (410, or failing for days).",
          st.disabled_endpoints);
  counter("walhook_sessions_total", "Replication sessions started.", st.sessions);
  gauge("walhook_queued", "Deliveries waiting in memory.", static_cast<double>(st.queued));
  gauge("walhook_in_flight", "Attempts in flight.", static_cast<double>(st.in_flight));
  gauge("walhook_state_store_backlog", "Writes waiting for the state store.", static_cast<double>(st.store_backlog));
  gauge("walhook_streaming", "1 while this instance streams the slot.", st.streaming ? 1.0 : 0.0);
  auto confirmed = self->stream.confirmed();
  auto received = self->stream.received();
  gauge("walhook_confirmed_lsn", "Flush LSN acknowledged to the slot (byte position).", static_cast<double>(confirmed.value()));
  gauge("walhook_slot_lag_bytes", "WAL received from the server but not yet acknowledged.",
        static_cast<double>(walhook::bytes_between(received, confirmed)));
  gauge("walhook_slot_lag_seconds", "How long the oldest unacknowledged transaction has waited.", self->lag_seconds());

  header("walhook_attempt_duration_seconds", "histogram", "Duration of delivery attempts.");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < impl::latency_buckets.size(); ++i) {
    cumulative += self->latency_counts[i];
    out += fmt::format("walhook_attempt_duration_seconds_bucket{{le=\"{}\"}} {}\n", impl::latency_buckets[i], cumulative);
  }
  cumulative += self->latency_counts.back();
  out += fmt::format("walhook_attempt_duration_seconds_bucket{{le=\"+Inf\"}} {}\n", cumulative);
  out += fmt::format("walhook_attempt_duration_seconds_sum {}\nwalhook_attempt_duration_seconds_count {}\n",
                     self->latency_sum_s, cumulative);

  header("walhook_endpoint_queued", "gauge", "Deliveries waiting in memory, per endpoint.");
  for (auto& [id, e] : self->endpoints) out += fmt::format("walhook_endpoint_queued{{endpoint=\"{}\"}} {}\n", id, self->sched.queued(id));
  header("walhook_endpoint_in_flight", "gauge", "Attempts in flight, per endpoint.");
  for (auto& [id, e] : self->endpoints)
    out += fmt::format("walhook_endpoint_in_flight{{endpoint=\"{}\"}} {}\n", id, self->sched.in_flight(id));
  // The alert that catches a customer's pain: how old is the oldest event still waiting for them.
  header("walhook_endpoint_oldest_pending_age_seconds", "gauge",
         "Age of the oldest event not yet delivered to the endpoint (persisted deliveries).");
  if (auto conn = co_await self->store.reader()) {
    auto res = co_await (*conn)->async_exec(
        "SELECT endpoint_id, extract(epoch FROM now() - min(event_created_at)) FROM walhook.deliveries "
        "WHERE status IN ('pending', 'sending') GROUP BY endpoint_id",
        pg::params{}, 5s);
    if (res)
      for (int r = 0; r < res->rows(); ++r)
        out += fmt::format("walhook_endpoint_oldest_pending_age_seconds{{endpoint=\"{}\"}} {}\n", res->value(r, 0),
                           res->value(r, 1));
  }
  co_return out;
}

}  // namespace walhook::relay
