#include "sql/state_store.hpp"

#include "common/json_writer.hpp"
#include "common/log.hpp"
#include "sql/session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <unordered_map>
#include <variant>

namespace walhook::sql {
namespace asio = boost::asio;
using namespace std::chrono_literals;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

std::string_view to_string(delivery_status s) {
  switch (s) {
    case delivery_status::pending: return "pending";
    case delivery_status::delivered: return "delivered";
    case delivery_status::dead: return "dead";
  }
  return "pending";
}

std::string to_sql_timestamp(system_clock::time_point t) { return format_iso8601(t); }

namespace {

// Deliveries known only in memory: merge into a pending row with the same (endpoint, merge key)
// when there is one, else insert; a redelivered event updates its existing row but never
// regresses a delivered one, and never touches a row being sent.
constexpr const char* upsert_sql = R"sql(
WITH input AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
    ord int, endpoint_id bigint, event_id uuid, aggregate_id text, merge_key text, status text,
    attempts int, next_attempt_at timestamptz, last_attempt_at timestamptz, last_status int,
    last_error text, event_created_at timestamptz, commit_lsn pg_lsn)
), merged AS (
  UPDATE walhook.deliveries d
     SET event_id = i.event_id, aggregate_id = i.aggregate_id, event_created_at = i.event_created_at,
         commit_lsn = i.commit_lsn, merged_count = d.merged_count + 1, updated_at = now()
    FROM input i
   WHERE i.status = 'pending' AND i.merge_key IS NOT NULL
     AND d.endpoint_id = i.endpoint_id AND d.merge_key = i.merge_key AND d.status = 'pending'
     AND (d.commit_lsn IS NULL OR i.commit_lsn IS NULL OR i.commit_lsn >= d.commit_lsn)
     AND NOT EXISTS (SELECT 1 FROM walhook.deliveries x
                      WHERE x.endpoint_id = i.endpoint_id AND x.event_id = i.event_id)
  RETURNING i.ord
), superseded AS (
  -- An older event than the pending one holding its key (e.g. a failed attempt persisted after
  -- a newer event was spilled) is merged away: the newer one carries the entity's state.
  SELECT i.ord FROM input i
   WHERE i.status = 'pending' AND i.merge_key IS NOT NULL AND i.commit_lsn IS NOT NULL
     AND EXISTS (SELECT 1 FROM walhook.deliveries d
                  WHERE d.endpoint_id = i.endpoint_id AND d.merge_key = i.merge_key AND d.status = 'pending'
                    AND d.commit_lsn > i.commit_lsn AND d.event_id <> i.event_id)
)
INSERT INTO walhook.deliveries AS d
  (endpoint_id, event_id, aggregate_id, merge_key, status, attempts, next_attempt_at,
   last_attempt_at, last_status, last_error, event_created_at, commit_lsn, delivered_at)
SELECT endpoint_id, event_id, aggregate_id, merge_key, status, attempts, next_attempt_at,
       last_attempt_at, last_status, last_error, event_created_at, commit_lsn,
       CASE WHEN status = 'delivered' THEN coalesce(last_attempt_at, now()) END
  FROM input i
 WHERE i.ord NOT IN (SELECT ord FROM merged) AND i.ord NOT IN (SELECT ord FROM superseded)
ON CONFLICT (endpoint_id, event_id) DO UPDATE
   SET status = excluded.status, attempts = greatest(d.attempts, excluded.attempts),
       next_attempt_at = excluded.next_attempt_at, last_attempt_at = excluded.last_attempt_at,
       last_status = excluded.last_status, last_error = excluded.last_error,
       delivered_at = excluded.delivered_at, updated_at = now()
 WHERE d.status = 'pending' OR (excluded.status = 'delivered' AND d.status <> 'delivered')
)sql";

// Outcomes of attempts on persisted rows. A row going back to pending while another pending row
// holds its merge key is superseded (deleted): the newer event carries the entity's state.
constexpr const char* update_sql = R"sql(
WITH input AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
    id bigint, status text, attempts int, next_attempt_at timestamptz, last_attempt_at timestamptz,
    last_status int, last_error text)
), target AS (
  SELECT d.id, d.endpoint_id, d.merge_key, d.commit_lsn, i.status
    FROM input i JOIN walhook.deliveries d ON d.id = i.id
   WHERE d.status <> 'delivered'
), keep AS (
  SELECT DISTINCT ON (t.endpoint_id, t.merge_key) t.id
    FROM target t
   WHERE t.status = 'pending' AND t.merge_key IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM walhook.deliveries p
                      WHERE p.endpoint_id = t.endpoint_id AND p.merge_key = t.merge_key
                        AND p.status = 'pending' AND p.id NOT IN (SELECT id FROM target))
   ORDER BY t.endpoint_id, t.merge_key, t.commit_lsn DESC NULLS LAST, t.id DESC
), gone AS (
  DELETE FROM walhook.deliveries d USING target t
   WHERE d.id = t.id AND t.status = 'pending' AND t.merge_key IS NOT NULL
     AND t.id NOT IN (SELECT id FROM keep)
  RETURNING d.id
)
UPDATE walhook.deliveries d
   SET status = i.status, attempts = i.attempts, next_attempt_at = i.next_attempt_at,
       last_attempt_at = i.last_attempt_at, last_status = i.last_status, last_error = i.last_error,
       delivered_at = CASE WHEN i.status = 'delivered' THEN coalesce(i.last_attempt_at, now()) ELSE d.delivered_at END,
       updated_at = now()
  FROM input i
 WHERE d.id = i.id AND d.status <> 'delivered' AND d.id NOT IN (SELECT id FROM gone)
)sql";

constexpr const char* health_sql = R"sql(
INSERT INTO walhook.endpoint_health AS h
  (endpoint_id, consecutive_failures, first_failure_at, last_failure_at, last_success_at,
   paused_until, probe_rounds, last_status, last_error, disabled_at, disabled_reason, updated_at)
SELECT endpoint_id, consecutive_failures, first_failure_at, last_failure_at, last_success_at,
       paused_until, probe_rounds, last_status, last_error,
       CASE WHEN disable THEN now() END, disabled_reason, now()
  FROM jsonb_to_recordset($1::jsonb) AS x(
    endpoint_id bigint, consecutive_failures int, first_failure_at timestamptz,
    last_failure_at timestamptz, last_success_at timestamptz, paused_until timestamptz,
    probe_rounds int, last_status int, last_error text, disable boolean, disabled_reason text)
ON CONFLICT (endpoint_id) DO UPDATE
   SET consecutive_failures = excluded.consecutive_failures,
       first_failure_at = excluded.first_failure_at, last_failure_at = excluded.last_failure_at,
       last_success_at = coalesce(excluded.last_success_at, h.last_success_at),
       paused_until = excluded.paused_until, probe_rounds = excluded.probe_rounds,
       last_status = excluded.last_status, last_error = excluded.last_error,
       disabled_at = coalesce(excluded.disabled_at, h.disabled_at),
       disabled_reason = coalesce(excluded.disabled_reason, h.disabled_reason), updated_at = now()
)sql";

constexpr const char* disable_sql = R"sql(
UPDATE walhook.endpoints SET status = 'disabled', updated_at = now()
 WHERE id = ANY($1::bigint[]) AND status <> 'disabled'
)sql";

constexpr const char* claim_sql = R"sql(
WITH quota AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(endpoint_id bigint, n int, ordered boolean)
), picked AS (
  SELECT p.id
    FROM quota q
    CROSS JOIN LATERAL (
      SELECT d.id FROM walhook.deliveries d
       WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending' AND d.next_attempt_at <= now()
         AND (NOT q.ordered OR d.aggregate_id IS NULL OR NOT EXISTS (
               SELECT 1 FROM walhook.deliveries e
                WHERE e.endpoint_id = d.endpoint_id AND e.aggregate_id = d.aggregate_id
                  AND e.id <> d.id
                  AND (e.status = 'sending'
                       OR (e.status = 'pending' AND (e.commit_lsn, e.id) < (d.commit_lsn, d.id)))))
       ORDER BY d.next_attempt_at
       LIMIT q.n
       FOR UPDATE SKIP LOCKED) p
), claimed AS (
  -- By primary key: the planner cannot know how few rows `picked` holds.
  UPDATE walhook.deliveries d SET status = 'sending', updated_at = now()
   WHERE d.id = ANY (ARRAY(SELECT id FROM picked))
  RETURNING d.id, d.endpoint_id, d.attempts, d.event_id, d.merge_key, d.aggregate_id, d.commit_lsn,
            d.next_attempt_at
)
SELECT c.id, c.endpoint_id, c.attempts, c.event_id, c.merge_key, c.aggregate_id,
       coalesce(c.commit_lsn, '0/0'::pg_lsn)::text, o.id IS NULL, o.tenant_id, o.event_type,
       o.created_at, o.payload::text
  FROM claimed c
  LEFT JOIN LATERAL (SELECT * FROM walhook.outbox x WHERE x.id = c.event_id) o ON true
 ORDER BY c.endpoint_id, c.next_attempt_at, c.commit_lsn
)sql";

constexpr const char* next_due_sql = R"sql(
SELECT e.id, (extract(epoch FROM d.next_attempt_at - now()) * 1000)::bigint
  FROM unnest($1::bigint[]) AS e(id)
  CROSS JOIN LATERAL (
    SELECT next_attempt_at FROM walhook.deliveries
     WHERE endpoint_id = e.id AND status = 'pending'
     ORDER BY next_attempt_at LIMIT 1) d
)sql";

constexpr const char* reset_stale_sql = R"sql(
WITH stale AS (
  SELECT id, endpoint_id, merge_key, commit_lsn FROM walhook.deliveries
   WHERE status = 'sending' AND updated_at <= now() - make_interval(secs => $1::int)
   FOR UPDATE SKIP LOCKED
), keep AS (
  SELECT DISTINCT ON (s.endpoint_id, s.merge_key) s.id FROM stale s
   WHERE s.merge_key IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM walhook.deliveries p
                      WHERE p.endpoint_id = s.endpoint_id AND p.merge_key = s.merge_key AND p.status = 'pending')
   ORDER BY s.endpoint_id, s.merge_key, s.commit_lsn DESC NULLS LAST, s.id DESC
), gone AS (
  DELETE FROM walhook.deliveries d USING stale s
   WHERE d.id = s.id AND s.merge_key IS NOT NULL AND s.id NOT IN (SELECT id FROM keep)
  RETURNING d.id
)
UPDATE walhook.deliveries d SET status = 'pending', updated_at = now()
  FROM stale s WHERE d.id = s.id AND d.id NOT IN (SELECT id FROM gone)
)sql";

std::string lsn_text(std::uint64_t v) { return fmt::format("{:X}/{:X}", v >> 32, v & 0xffffffffu); }

std::uint64_t parse_lsn_text(std::string_view s) {
  auto slash = s.find('/');
  if (slash == std::string_view::npos) return 0;
  std::uint32_t hi = 0, lo = 0;
  std::from_chars(s.data(), s.data() + slash, hi, 16);
  std::from_chars(s.data() + slash + 1, s.data() + s.size(), lo, 16);
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

void put_time(json_writer& j, std::string_view key, const std::optional<system_clock::time_point>& t) {
  j.key(key);
  if (t) j.string(format_iso8601(*t));
  else j.null();
}

void put_int(json_writer& j, std::string_view key, const std::optional<int>& v) {
  j.key(key);
  if (v) j.number(static_cast<std::int64_t>(*v));
  else j.null();
}

constexpr const char* progress_sql = R"sql(
INSERT INTO walhook.slot_progress AS p (slot_name, system_id, confirmed_lsn, updated_at)
VALUES ($1, $2, $3::pg_lsn, now())
ON CONFLICT (slot_name) DO UPDATE
   SET confirmed_lsn = CASE WHEN p.system_id IS DISTINCT FROM excluded.system_id THEN excluded.confirmed_lsn
                            ELSE greatest(p.confirmed_lsn, excluded.confirmed_lsn) END,
       system_id = excluded.system_id, updated_at = now()
)sql";

void put_outcome(json_writer& j, const delivery_outcome& o) {
  j.field("status", to_string(o.status)).field("attempts", o.attempts);
  put_time(j, "next_attempt_at", o.next_attempt_at);
  put_time(j, "last_attempt_at", o.last_attempt_at);
  put_int(j, "last_status", o.last_status);
  j.field("last_error", o.last_error);
}

struct queued_write {
  std::variant<upsert_delivery, update_delivery, health_write, progress_write> write;
  state_store::callback on_durable;
};

bool is_transient(const std::string& sqlstate) {
  return sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "55P03" || sqlstate.starts_with("08") ||
         sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03";
}

}  // namespace

struct state_store::impl {
  impl(asio::any_io_executor ex, state_store_options o)
      : executor(ex), options(std::move(o)), writer(ex), reader_conn(ex), reader_mutex(ex), wake(ex), pause(ex) {}

  asio::any_io_executor executor;
  state_store_options options;
  pg::connection writer;
  pg::connection reader_conn;
  async_mutex reader_mutex;
  asio::steady_timer wake;
  asio::steady_timer pause;
  std::deque<queued_write> queue;
  bool waiting = false;
  bool stopping = false;
  std::chrono::steady_clock::time_point stop_deadline{};
  std::uint64_t batches = 0;
  std::uint64_t rows = 0;
  std::uint64_t failures = 0;

  void push(queued_write w) {
    queue.push_back(std::move(w));
    if (waiting) wake.cancel();
  }

  std::vector<pg::statement> build(std::size_t n) const;
  /// Drops the text a customer's server can influence (last_error) from a write; true if any.
  static bool strip_free_text(queued_write& w) {
    auto strip = [](delivery_outcome& o) {
      if (!o.last_error) return false;
      o.last_error = "(error text could not be stored)";
      return true;
    };
    if (auto* u = std::get_if<upsert_delivery>(&w.write)) return strip(u->outcome);
    if (auto* d = std::get_if<update_delivery>(&w.write)) return strip(d->outcome);
    if (auto* h = std::get_if<health_write>(&w.write); h && h->last_error) {
      h->last_error = "(error text could not be stored)";
      return true;
    }
    return false;
  }
  asio::awaitable<pg::error_code> write_one_by_one(std::size_t n);
  asio::awaitable<void> sleep(std::chrono::milliseconds d) {
    pause.expires_after(d);
    co_await pause.async_wait(tuple_awaitable);
  }
};

std::vector<pg::statement> state_store::impl::build(std::size_t n) const {
  json_writer upserts, updates, health;
  upserts.begin_array();
  updates.begin_array();
  health.begin_array();
  std::string disable = "{";
  bool any_upsert = false, any_update = false, any_health = false, any_disable = false;
  // The newest health state per endpoint, and the newest progress per slot, win within a batch.
  std::unordered_map<std::int64_t, const health_write*> latest_health;
  std::map<std::pair<std::string, std::string>, std::uint64_t> latest_progress;
  // Merge within the batch: of several pending deliveries with one (endpoint, merge key), only
  // the newest (last queued: commit order) is written; the others are superseded by it.
  std::map<std::pair<std::int64_t, std::string>, std::size_t> newest_by_key;
  for (std::size_t i = 0; i < n; ++i)
    if (const auto* u = std::get_if<upsert_delivery>(&queue[i].write);
        u && u->merge_key && u->outcome.status == delivery_status::pending)
      newest_by_key[{u->endpoint_id, *u->merge_key}] = i;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& w = queue[i].write;
    if (const auto* u = std::get_if<upsert_delivery>(&w)) {
      if (u->merge_key && u->outcome.status == delivery_status::pending &&
          newest_by_key[{u->endpoint_id, *u->merge_key}] != i)
        continue;
      any_upsert = true;
      upserts.begin_object()
          .field("ord", static_cast<std::int64_t>(i))
          .field("endpoint_id", u->endpoint_id)
          .field("event_id", u->event_id)
          .field("aggregate_id", u->aggregate_id)
          .field("merge_key", u->merge_key)
          .field("event_created_at", u->event_created_at);
      upserts.key("commit_lsn");
      if (u->commit_lsn) upserts.string(lsn_text(u->commit_lsn));
      else upserts.null();
      put_outcome(upserts, u->outcome);
      upserts.end_object();
    } else if (const auto* d = std::get_if<update_delivery>(&w)) {
      any_update = true;
      updates.begin_object().field("id", d->row_id);
      put_outcome(updates, d->outcome);
      updates.end_object();
    } else if (const auto* h = std::get_if<health_write>(&w)) {
      latest_health[h->endpoint_id] = h;
    } else if (const auto* p = std::get_if<progress_write>(&w)) {
      auto& v = latest_progress[{p->slot, p->system_id}];
      v = std::max(v, p->confirmed_lsn);
    }
  }
  for (const auto& [id, h] : latest_health) {
    any_health = true;
    health.begin_object().field("endpoint_id", h->endpoint_id).field("consecutive_failures", h->consecutive_failures);
    put_time(health, "first_failure_at", h->first_failure_at);
    put_time(health, "last_failure_at", h->last_failure_at);
    put_time(health, "last_success_at", h->last_success_at);
    put_time(health, "paused_until", h->paused_until);
    health.field("probe_rounds", h->probe_rounds);
    put_int(health, "last_status", h->last_status);
    health.field("last_error", h->last_error).field("disable", h->disable).field("disabled_reason", h->disabled_reason);
    health.end_object();
    if (h->disable) {
      if (any_disable) disable += ',';
      disable += std::to_string(h->endpoint_id);
      any_disable = true;
    }
  }
  disable += '}';
  upserts.end_array();
  updates.end_array();
  health.end_array();

  // One implicit transaction: everything up to the pipeline's sync commits or none of it does.
  std::vector<pg::statement> out;
  if (any_upsert) out.push_back({upsert_sql, {upserts.take()}});
  if (any_update) out.push_back({update_sql, {updates.take()}});
  if (any_health) out.push_back({health_sql, {health.take()}});
  if (any_disable) out.push_back({disable_sql, {disable}});
  for (const auto& [key, lsn] : latest_progress) out.push_back({progress_sql, {key.first, key.second, lsn_text(lsn)}});
  return out;
}

asio::awaitable<pg::error_code> state_store::impl::write_one_by_one(std::size_t n) {
  // A statement failed for a reason that is not the connection: write one at a time to find the
  // write at fault. A data error (SQLSTATE class 22) is retried once without its free text; a
  // write that still fails stays at the head of the queue and the caller retries it after a
  // backoff. Nothing is dropped: an unwritten delivery keeps its LSN ticket, so the slot is
  // never acknowledged past it (DESIGN §4 invariant 2).
  for (std::size_t i = 0; i < n; ++i) {
    for (int tries = 0;; ++tries) {
      std::deque<queued_write> single;
      single.push_back(std::move(queue.front()));
      queue.pop_front();
      std::swap(queue, single);  // build() reads `queue`
      auto statements = build(1);
      std::swap(queue, single);
      auto res = co_await writer.async_pipeline(statements, options.statement_timeout);
      if (res) {
        ++rows;
        if (single.front().on_durable) single.front().on_durable();
        break;
      }
      queue.push_front(std::move(single.front()));
      if (res.error() != pg::errc::query_failed) co_return res.error();
      ++failures;
      log::error("state_store.write_failed", {{"error", writer.last_error()}, {"sqlstate", writer.last_sqlstate()}});
      if (tries == 0 && writer.last_sqlstate().starts_with("22") && strip_free_text(queue.front())) continue;
      co_return res.error();
    }
  }
  co_return pg::error_code{};
}

state_store::state_store(asio::any_io_executor ex, state_store_options options)
    : impl_(std::make_unique<impl>(ex, std::move(options))) {}

state_store::~state_store() = default;

void state_store::enqueue(upsert_delivery w, callback cb) { impl_->push({std::move(w), std::move(cb)}); }
void state_store::enqueue(update_delivery w, callback cb) { impl_->push({std::move(w), std::move(cb)}); }
void state_store::enqueue(health_write w, callback cb) { impl_->push({std::move(w), std::move(cb)}); }
void state_store::enqueue(progress_write w, callback cb) { impl_->push({std::move(w), std::move(cb)}); }

std::size_t state_store::backlog() const { return impl_->queue.size(); }
std::uint64_t state_store::batches_committed() const { return impl_->batches; }
std::uint64_t state_store::rows_written() const { return impl_->rows; }
std::uint64_t state_store::write_failures() const { return impl_->failures; }

void state_store::stop(std::chrono::steady_clock::time_point deadline) {
  impl_->stopping = true;
  impl_->stop_deadline = deadline;
  if (impl_->waiting) impl_->wake.cancel();
  impl_->pause.cancel();
}

asio::awaitable<void> state_store::run() {
  auto& s = *impl_;
  auto backoff = s.options.reconnect_min;
  for (;;) {
    if (s.queue.empty()) {
      if (s.stopping) break;
      s.waiting = true;
      s.wake.expires_at(std::chrono::steady_clock::time_point::max());
      co_await s.wake.async_wait(tuple_awaitable);
      s.waiting = false;
      continue;
    }
    if (s.stopping && std::chrono::steady_clock::now() >= s.stop_deadline) {
      log::warn("state_store.stopped_with_backlog", {{"writes", static_cast<std::uint64_t>(s.queue.size())}});
      break;
    }
    if (!s.writer.is_open()) {
      auto ec = co_await open_session(s.writer, s.options.conninfo, s.options.application_name, 10s);
      if (ec) {
        log::warn("state_store.connect_failed", {{"error", s.writer.last_error()}, {"retry_ms", backoff.count()}});
        co_await s.sleep(backoff);
        backoff = std::min(backoff * 2, s.options.reconnect_max);
        continue;
      }
    }
    std::size_t n = std::min(s.queue.size(), s.options.max_batch);
    auto statements = s.build(n);
    auto res = co_await s.writer.async_pipeline(statements, s.options.statement_timeout);
    if (res) {
      backoff = s.options.reconnect_min;
      ++s.batches;
      s.rows += n;
      std::vector<callback> done;
      done.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        done.push_back(std::move(s.queue.front().on_durable));
        s.queue.pop_front();
      }
      for (auto& cb : done)
        if (cb) cb();
      continue;
    }
    log::warn("state_store.batch_failed", {{"error", s.writer.last_error()},
                                           {"sqlstate", s.writer.last_sqlstate()},
                                           {"writes", static_cast<std::uint64_t>(n)},
                                           {"retry_ms", backoff.count()}});
    if (res.error() == pg::errc::query_failed && !is_transient(s.writer.last_sqlstate())) {
      if (!co_await s.write_one_by_one(n)) continue;  // the fault was isolated and written around
    }
    // Reconnect before retrying: the session may carry settings that changed meanwhile
    // (default_transaction_read_only, statement_timeout) or be mid-protocol.
    s.writer.close();
    co_await s.sleep(backoff);
    backoff = std::min(backoff * 2, s.options.reconnect_max);
  }
  s.writer.close();
  s.reader_conn.close();
}

asio::awaitable<boost::system::result<state_store::reader_lease>> state_store::reader() {
  auto& s = *impl_;
  auto guard = co_await s.reader_mutex.scoped_lock();
  if (!s.reader_conn.is_open()) {
    if (auto ec = co_await open_session(s.reader_conn, s.options.conninfo, s.options.application_name + "-reader", 10s))
      co_return ec;
  }
  co_return reader_lease(&s.reader_conn, std::move(guard));
}

asio::awaitable<boost::system::result<std::vector<claimed_delivery>>> state_store::claim_due(
    const std::vector<claim_quota>& quotas) {
  std::vector<claimed_delivery> out;
  if (quotas.empty()) co_return out;
  auto conn = co_await reader();
  if (!conn) co_return conn.error();
  json_writer j;
  j.begin_array();
  for (const auto& q : quotas)
    j.begin_object().field("endpoint_id", q.endpoint_id).field("n", q.limit).field("ordered", q.aggregate_ordering).end_object();
  j.end_array();
  pg::params args{j.take()};
  auto res = co_await (*conn)->async_exec(claim_sql, args, impl_->options.statement_timeout);
  if (!res) {
    if (res.error() != pg::errc::query_failed) (*conn)->close();
    co_return res.error();
  }
  out.reserve(static_cast<std::size_t>(res->rows()));
  for (int r = 0; r < res->rows(); ++r) {
    claimed_delivery c;
    c.row_id = std::stoll(std::string(res->value(r, 0)));
    c.endpoint_id = std::stoll(std::string(res->value(r, 1)));
    c.attempts = std::stoi(std::string(res->value(r, 2)));
    c.event_id = res->value(r, 3);
    c.merge_key = res->optional_value(r, 4);
    c.aggregate_id = res->optional_value(r, 5);
    c.commit_lsn = parse_lsn_text(res->value(r, 6));
    c.event_missing = res->value(r, 7) == "t";
    if (!c.event_missing) {
      c.tenant_id = res->value(r, 8);
      c.event_type = res->value(r, 9);
      c.event_created_at = pg_timestamptz_to_iso8601(res->value(r, 10)).value_or(std::string(res->value(r, 10)));
      c.payload = res->value(r, 11);
    }
    out.push_back(std::move(c));
  }
  co_return out;
}

asio::awaitable<boost::system::result<std::vector<std::pair<std::int64_t, std::chrono::milliseconds>>>>
state_store::next_due(const std::vector<std::int64_t>& endpoint_ids) {
  std::vector<std::pair<std::int64_t, std::chrono::milliseconds>> out;
  if (endpoint_ids.empty()) co_return out;
  auto conn = co_await reader();
  if (!conn) co_return conn.error();
  std::string ids = "{";
  for (std::size_t i = 0; i < endpoint_ids.size(); ++i) {
    if (i) ids += ',';
    ids += std::to_string(endpoint_ids[i]);
  }
  ids += '}';
  pg::params args{ids};
  auto res = co_await (*conn)->async_exec(next_due_sql, args, impl_->options.statement_timeout);
  if (!res) {
    if (res.error() != pg::errc::query_failed) (*conn)->close();
    co_return res.error();
  }
  for (int r = 0; r < res->rows(); ++r)
    out.emplace_back(std::stoll(std::string(res->value(r, 0))),
                     std::chrono::milliseconds{std::stoll(std::string(res->value(r, 1)))});
  co_return out;
}

asio::awaitable<boost::system::result<std::vector<std::int64_t>>> state_store::endpoints_with_backlog() {
  auto conn = co_await reader();
  if (!conn) co_return conn.error();
  auto res = co_await (*conn)->async_exec(
      "SELECT e.id FROM walhook.endpoints e WHERE EXISTS (SELECT 1 FROM walhook.deliveries d "
      "WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'sending'))",
      pg::params{}, impl_->options.statement_timeout);
  if (!res) co_return res.error();
  std::vector<std::int64_t> ids;
  for (int r = 0; r < res->rows(); ++r) ids.push_back(std::stoll(std::string(res->value(r, 0))));
  co_return ids;
}

asio::awaitable<boost::system::result<long>> state_store::reset_stale_sending(std::chrono::seconds older_than) {
  auto conn = co_await reader();
  if (!conn) co_return conn.error();
  pg::params args{std::to_string(older_than.count())};
  auto res = co_await (*conn)->async_exec(reset_stale_sql, args, impl_->options.statement_timeout);
  if (!res) co_return res.error();
  co_return res->affected();
}

asio::awaitable<boost::system::result<std::pair<std::uint64_t, std::string>>> state_store::load_progress(
    const std::string& slot) {
  auto conn = co_await reader();
  if (!conn) co_return conn.error();
  pg::params args{slot};
  auto res = co_await (*conn)->async_exec(
      "SELECT confirmed_lsn::text, coalesce(system_id, '') FROM walhook.slot_progress WHERE slot_name = $1", args,
      impl_->options.statement_timeout);
  if (!res) co_return res.error();
  if (res->rows() == 0) co_return std::pair<std::uint64_t, std::string>{0, ""};
  co_return std::pair<std::uint64_t, std::string>{parse_lsn_text(res->value(0, 0)), std::string(res->value(0, 1))};
}

asio::awaitable<boost::system::error_code> state_store::clear_progress(const std::string& slot) {
  auto conn = co_await reader();
  if (!conn) co_return conn.error();
  pg::params args{slot};
  auto res = co_await (*conn)->async_exec("DELETE FROM walhook.slot_progress WHERE slot_name = $1", args,
                                          impl_->options.statement_timeout);
  if (!res) co_return res.error();
  co_return boost::system::error_code{};
}

asio::awaitable<boost::system::result<long>> state_store::delete_expired(std::chrono::hours age, int batch) {
  auto conn = co_await reader();
  if (!conn) co_return conn.error();
  pg::params args{std::to_string(age.count()), std::to_string(batch)};
  // Small batches keep locks and WAL bursts short; the outbox DELETEs are not published.
  auto res = co_await (*conn)->async_exec(R"sql(
WITH old_events AS (
  DELETE FROM walhook.outbox WHERE seq IN (
    SELECT seq FROM walhook.outbox WHERE created_at < now() - make_interval(hours => $1::int)
     ORDER BY created_at LIMIT $2::int)
  RETURNING 1
), old_deliveries AS (
  DELETE FROM walhook.deliveries WHERE id IN (
    SELECT id FROM walhook.deliveries
     WHERE status IN ('delivered', 'dead') AND event_created_at < now() - make_interval(hours => $1::int)
     LIMIT $2::int)
  RETURNING 1
)
SELECT greatest((SELECT count(*) FROM old_events), (SELECT count(*) FROM old_deliveries)))sql",
                                          args, impl_->options.statement_timeout);
  if (!res) co_return res.error();
  co_return std::stol(std::string(res->value(0, 0)));
}

asio::awaitable<boost::system::result<std::vector<health_write>>> state_store::load_health() {
  auto conn = co_await reader();
  if (!conn) co_return conn.error();
  auto res = co_await (*conn)->async_exec(
      "SELECT endpoint_id, consecutive_failures, extract(epoch FROM first_failure_at)::float8, "
      "extract(epoch FROM last_failure_at)::float8, extract(epoch FROM last_success_at)::float8, "
      "extract(epoch FROM paused_until)::float8, probe_rounds, last_status, last_error FROM walhook.endpoint_health",
      pg::params{}, impl_->options.statement_timeout);
  if (!res) co_return res.error();
  auto as_time = [&](int r, int c) -> std::optional<system_clock::time_point> {
    if (res->is_null(r, c)) return std::nullopt;
    double secs = std::stod(std::string(res->value(r, c)));
    return system_clock::time_point{
        std::chrono::duration_cast<system_clock::duration>(std::chrono::duration<double>(secs))};
  };
  std::vector<health_write> out;
  for (int r = 0; r < res->rows(); ++r) {
    health_write h;
    h.endpoint_id = std::stoll(std::string(res->value(r, 0)));
    h.consecutive_failures = std::stoi(std::string(res->value(r, 1)));
    h.first_failure_at = as_time(r, 2);
    h.last_failure_at = as_time(r, 3);
    h.last_success_at = as_time(r, 4);
    h.paused_until = as_time(r, 5);
    h.probe_rounds = std::stoi(std::string(res->value(r, 6)));
    if (!res->is_null(r, 7)) h.last_status = std::stoi(std::string(res->value(r, 7)));
    h.last_error = res->optional_value(r, 8);
    out.push_back(std::move(h));
  }
  co_return out;
}

}  // namespace walhook::sql
