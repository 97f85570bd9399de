#include "sql/state_store.hpp"

#include "common/json_writer.hpp"
#include "common/log.hpp"
#include "sql/batch.hpp"
#include "sql/session.hpp"
#include "sql/statements.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <deque>

namespace walhook::sql {
namespace asio = boost::asio;
using namespace std::chrono_literals;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

namespace {

bool is_transient(const std::string& sqlstate) {
  return sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "55P03" || sqlstate.starts_with("08") ||
         sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03";
}

/// Drops the text a customer's server can influence (last_error) from a write; true if any.
bool strip_free_text(write& w) {
  constexpr const char* replacement = "(error text could not be stored)";
  auto strip = [&](std::optional<std::string>& e) {
    if (!e) return false;
    e = replacement;
    return true;
  };
  if (auto* u = std::get_if<upsert_delivery>(&w)) return strip(u->outcome.last_error);
  if (auto* d = std::get_if<update_delivery>(&w)) return strip(d->outcome.last_error);
  if (auto* h = std::get_if<health_write>(&w)) return strip(h->last_error);
  return false;
}

std::int64_t to_int64(std::string_view s) { return std::stoll(std::string(s)); }

text_rows as_text_rows(const pg::query_result& res) {
  text_rows out;
  for (int c = 0; c < res.columns(); ++c) out.columns.emplace_back(PQfname(res.get(), c));
  for (int r = 0; r < res.rows(); ++r) {
    auto& row = out.rows.emplace_back();
    for (int c = 0; c < res.columns(); ++c) row.push_back(res.optional_value(r, c));
  }
  return out;
}

/// A refusal because of the data itself (SQLSTATE classes 22 data exception, 23 integrity
/// constraint violation, 54 program limit exceeded — e.g. an index row too large — and P0, a
/// PL/pgSQL trigger's RAISE): writing the same row again can never succeed.
bool is_data_error(const std::string& sqlstate) {
  // P0: raised by PL/pgSQL — an operator's trigger refusing the row (RAISE EXCEPTION is P0001).
  return sqlstate.starts_with("22") || sqlstate.starts_with("23") || sqlstate.starts_with("54") ||
         sqlstate.starts_with("P0");
}

/// Turns a delivery write the server refused for its data into the smallest dead record of that
/// delivery: no merge key or aggregate (the usual culprits), the server's reason as last_error.
/// False for writes that are not deliveries, or already were turned.
bool make_dead(write& w, const std::string& server_error) {
  std::string reason = "walhook could not store this delivery's state: " + server_error.substr(0, 300);
  auto turn = [&](delivery_outcome& o) {
    if (o.status == delivery_status::dead && o.last_error && o.last_error->starts_with("walhook could not store"))
      return false;
    o.status = delivery_status::dead;
    o.next_attempt_in.reset();
    o.last_error = std::move(reason);
    return true;
  };
  if (auto* u = std::get_if<upsert_delivery>(&w)) {
    u->merge_key.reset();
    u->aggregate_id.reset();
    return turn(u->outcome);
  }
  if (auto* d = std::get_if<update_delivery>(&w)) return turn(d->outcome);
  return false;
}

/// Who a write is about, for the log line of a write that had to be given up.
std::string describe(const write& w) {
  if (const auto* u = std::get_if<upsert_delivery>(&w))
    return "delivery of event " + u->event_id + " to endpoint " + std::to_string(u->endpoint_id);
  if (const auto* d = std::get_if<update_delivery>(&w))
    return d->row_id ? "delivery row " + std::to_string(*d->row_id)
                     : "delivery of event " + d->key.event_id + " to endpoint " + std::to_string(d->key.endpoint_id);
  if (const auto* h = std::get_if<health_write>(&w)) return "health of endpoint " + std::to_string(h->endpoint_id);
  if (std::holds_alternative<removal_streamed>(w)) return "copy of a removed endpoint";
  if (const auto* e = std::get_if<publish_event>(&w)) return "event " + e->event_type + " published by walhook";
  if (const auto* c = std::get_if<cursor_write>(&w)) return "outbox cursor of endpoint " + std::to_string(c->endpoint_id);
  if (const auto* c = std::get_if<cursor_delete>(&w)) return "outbox cursor of endpoint " + std::to_string(c->endpoint_id);
  return "slot progress";
}

}  // namespace

struct state_store::impl {
  impl(asio::any_io_executor ex, state_store_options o)
      : options(std::move(o)), writer(ex), reader_conn(ex), reader_mutex(ex), wake(ex), pause(ex) {}

  state_store_options options;
  pg::connection writer;
  pg::connection reader_conn;
  async_mutex reader_mutex;
  asio::steady_timer wake;
  asio::steady_timer pause;
  // The batch being written (kept until it commits), then everything queued after it.
  std::vector<write> batch;
  std::vector<durable_callback> batch_callbacks;
  std::deque<write> queue;
  std::deque<durable_callback> callbacks;
  bool waiting = false;
  bool stopping = false;
  std::chrono::steady_clock::time_point stop_deadline{};
  std::uint64_t batches = 0;
  std::uint64_t rows = 0;
  std::uint64_t failures = 0;
  std::uint64_t refused = 0;   ///< delivery writes refused for their data, written as dead instead
  std::uint64_t given_up = 0;  ///< writes refused even as a dead record: logged and dropped
  std::vector<asio::steady_timer*> idle_waiters;  ///< woken when the backlog reaches 0

  void take_batch() {
    std::size_t n = std::min(queue.size(), options.max_batch);
    // An event walhook publishes commits with the write queued before it (the health write that
    // caused it): the batch never ends between them.
    while (n < queue.size() && std::holds_alternative<publish_event>(queue[n])) ++n;
    for (std::size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(queue.front()));
      batch_callbacks.push_back(std::move(callbacks.front()));
      queue.pop_front();
      callbacks.pop_front();
    }
  }
  /// The batch committed (its first `n` writes, when written one by one): run their callbacks.
  void committed(std::size_t n) {
    rows += n;
    std::vector<durable_callback> done(std::make_move_iterator(batch_callbacks.begin()),
                                       std::make_move_iterator(batch_callbacks.begin() + static_cast<long>(n)));
    batch.erase(batch.begin(), batch.begin() + static_cast<long>(n));
    batch_callbacks.erase(batch_callbacks.begin(), batch_callbacks.begin() + static_cast<long>(n));
    for (auto& cb : done)
      if (cb) cb();
    if (batch.empty() && queue.empty())
      for (auto* w : idle_waiters) w->cancel();
  }
  asio::awaitable<pg::error_code> write_one_by_one();
  /// Writes the batch's second write alone — the queue's next one if the batch has no other, so
  /// a refused write alone in its batch is still told apart from a database refusing every write;
  /// true (and it is done) if it committed. A second write refused for its own data is tried
  /// once more as its dead record.
  asio::awaitable<bool> commit_second() {
    if (batch.size() < 2 && !queue.empty()) {
      batch.push_back(std::move(queue.front()));
      batch_callbacks.push_back(std::move(callbacks.front()));
      queue.pop_front();
      callbacks.pop_front();
    }
    if (batch.size() < 2) co_return false;
    for (int tries = 0;; ++tries) {
      auto statements = build_batch(std::span<const write>(batch.data() + 1, 1));
      if (statements.empty() || co_await writer.async_pipeline(statements, options.statement_timeout)) break;
      if (tries > 0 || !is_data_error(writer.last_sqlstate()) || !make_dead(batch[1], writer.last_error())) co_return false;
      ++refused;
    }
    rows += 1;
    auto cb = std::move(batch_callbacks[1]);
    batch.erase(batch.begin() + 1);
    batch_callbacks.erase(batch_callbacks.begin() + 1);
    if (cb) cb();
    co_return true;
  }
  asio::awaitable<void> sleep(std::chrono::milliseconds d) {
    pause.expires_after(d);
    co_await pause.async_wait(tuple_awaitable);
  }
  /// The reader connection, opened on demand, one query at a time. A session found dead on use
  /// (the server restarted while it was idle) is replaced once, at once.
  asio::awaitable<boost::system::result<pg::query_result>> read(std::string_view sql, pg::params args) {
    auto guard = co_await reader_mutex.scoped_lock();
    // Cancelled while it waited its turn (a session ending): do not start a query now.
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none)
      co_return pg::errc::cancelled;
    for (int tries = 0;; ++tries) {
      bool fresh = !reader_conn.is_open();
      if (fresh) {
        if (auto ec = co_await open_session(reader_conn, options.conninfo, options.application_name + "-reader", 10s))
          co_return ec;
      }
      auto res = co_await reader_conn.async_exec(sql, args, options.statement_timeout);
      if (res || res.error() == pg::errc::query_failed) co_return res;  // a server error leaves it usable
      reader_conn.close();  // a broken session is not reused
      if (fresh || tries > 0 || res.error() != pg::errc::connection_lost) co_return res;
    }
  }
};

asio::awaitable<pg::error_code> state_store::impl::write_one_by_one() {
  // A statement failed for a reason that is not the connection: write one at a time to find the
  // write at fault. A write the server refuses for its data (is_data_error) can never land as it
  // is: first without its free text (class 22: e.g. text a customer's server sent), then as the
  // delivery's dead record with the server's reason; a write that is refused even so is given up
  // with an error log line, so one bad row never blocks the queue, the slot or other tenants.
  // Any other refusal (read-only, permissions, disk full) keeps the write at the head of the
  // batch and the caller retries it after a backoff: an unwritten delivery keeps its LSN ticket,
  // so the slot is never acknowledged past it (docs/architecture.md, Invariants, 2).
  while (!batch.empty()) {
    for (int tries = 0;; ++tries) {
      auto statements = build_batch(std::span<const write>(batch.data(), 1));
      if (statements.empty()) {
        committed(1);
        break;
      }
      auto res = co_await writer.async_pipeline(statements, options.statement_timeout);
      if (res) {
        committed(1);
        break;
      }
      if (res.error() != pg::errc::query_failed) co_return res.error();
      ++failures;
      const std::string sqlstate = writer.last_sqlstate(), error = writer.last_error();
      log::error("state_store.write_failed", {{"error", error}, {"sqlstate", sqlstate}, {"write", describe(batch.front())}});
      // Any other refusal is the database's state (read-only, permissions, a missing table, disk
      // full) — unless the next write goes through: then it is this row's alone (an operator's
      // trigger raising some other SQLSTATE, say), and it is treated as refused for its data.
      // An event walhook publishes holds no LSN ticket: one refused for any reason (a role
      // without INSERT on walhook.outbox, say) is given up, so announcing never stops delivering.
      if (std::holds_alternative<publish_event>(batch.front())) {
        log::error("state_store.write_given_up",
                   {{"write", describe(batch.front())}, {"error", error}, {"sqlstate", sqlstate}});
        ++given_up;
        committed(1);
        break;
      }
      if (!is_data_error(sqlstate) && !co_await commit_second()) co_return res.error();
      if (tries == 0 && sqlstate.starts_with("22") && strip_free_text(batch.front())) continue;
      if (make_dead(batch.front(), error)) {
        ++refused;
        continue;
      }
      log::error("state_store.write_given_up",
                 {{"write", describe(batch.front())}, {"error", error}, {"sqlstate", sqlstate}});
      ++given_up;
      committed(1);  // its LSN ticket goes: keeping it would hold the slot for good
      break;
    }
  }
  co_return pg::error_code{};
}

state_store::state_store(asio::any_io_executor ex, state_store_options options)
    : impl_(std::make_unique<impl>(ex, std::move(options))) {}

state_store::~state_store() = default;

void state_store::enqueue(write w, durable_callback on_durable) {
  impl_->queue.push_back(std::move(w));
  impl_->callbacks.push_back(std::move(on_durable));
  if (impl_->waiting) impl_->wake.cancel();
}

asio::awaitable<bool> state_store::async_idle(std::chrono::steady_clock::time_point deadline) {
  auto& s = *impl_;
  if (backlog() == 0) co_return true;
  asio::steady_timer t(s.wake.get_executor(), deadline);
  s.idle_waiters.push_back(&t);
  co_await t.async_wait(tuple_awaitable);
  std::erase(s.idle_waiters, &t);
  co_return backlog() == 0;
}

const std::string& state_store::last_read_error() const { return impl_->reader_conn.last_error(); }

void state_store::interrupt_reads() { impl_->reader_conn.close(); }

std::size_t state_store::backlog() const { return impl_->queue.size() + impl_->batch.size(); }
std::uint64_t state_store::batches_committed() const { return impl_->batches; }
std::uint64_t state_store::rows_written() const { return impl_->rows; }
std::uint64_t state_store::write_failures() const { return impl_->failures; }
std::uint64_t state_store::writes_refused() const { return impl_->refused + impl_->given_up; }

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
    if (s.batch.empty() && s.queue.empty()) {
      if (s.stopping) break;
      s.waiting = true;
      s.wake.expires_at(std::chrono::steady_clock::time_point::max());
      co_await s.wake.async_wait(tuple_awaitable);
      s.waiting = false;
      continue;
    }
    if (s.stopping && s.options.clock->steady_now() >= s.stop_deadline) {
      log::warn("state_store.stopped_with_backlog", {{"writes", static_cast<std::uint64_t>(backlog())}});
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
    if (s.batch.empty()) s.take_batch();
    auto statements = build_batch(s.batch);
    auto res = co_await s.writer.async_pipeline(statements, s.options.statement_timeout);
    if (res) {
      backoff = s.options.reconnect_min;
      ++s.batches;
      s.committed(s.batch.size());
      continue;
    }
    log::warn("state_store.batch_failed", {{"error", s.writer.last_error()},
                                           {"sqlstate", s.writer.last_sqlstate()},
                                           {"writes", static_cast<std::uint64_t>(s.batch.size())},
                                           {"retry_ms", backoff.count()}});
    if (res.error() == pg::errc::query_failed && !is_transient(s.writer.last_sqlstate())) {
      if (!co_await s.write_one_by_one()) continue;  // the fault was isolated and written around
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

asio::awaitable<boost::system::result<std::vector<claimed_delivery>>> state_store::claim_due(
    std::vector<claim_quota> quotas) {
  std::vector<claimed_delivery> out;
  if (quotas.empty()) co_return out;
  json_writer j;
  j.begin_array();
  for (const auto& q : quotas)
    j.begin_object().field("endpoint_id", q.endpoint_id).field("n", q.limit).field("ordered", q.aggregate_ordering).end_object();
  j.end_array();
  pg::params args{j.take()};
  auto res = co_await impl_->read(statements::claim_due, std::move(args));
  if (!res) co_return res.error();
  out.reserve(static_cast<std::size_t>(res->rows()));
  for (int r = 0; r < res->rows(); ++r) {
    claimed_delivery c;
    c.row_id = to_int64(res->value(r, 0));
    c.endpoint_id = to_int64(res->value(r, 1));
    c.attempts = std::stoi(std::string(res->value(r, 2)));
    c.event_id = res->value(r, 3);
    c.merge_key = res->optional_value(r, 4);
    c.aggregate_id = res->optional_value(r, 5);
    c.commit_lsn = lsn::parse(res->value(r, 6)).value_or(lsn{});
    c.event_missing = res->value(r, 7) == "t";
    if (!c.event_missing) {
      c.tenant_id = res->value(r, 8);
      c.event_type = res->value(r, 9);
      c.event_created_at = res->value(r, 10);  // PostgreSQL's text; the dispatcher renders it (or ends it dead)
      c.payload = res->value(r, 11);
      c.event_stored_at = res->value(r, 12);
      c.aggregate_type = res->optional_value(r, 13);
      c.rejected = res->optional_value(r, 14);
      c.traceparent = res->optional_value(r, 16);
    }
    c.deferrals = std::stoi(std::string(res->value(r, 15)));
    out.push_back(std::move(c));
  }
  co_return out;
}

asio::awaitable<boost::system::result<std::vector<due_time>>> state_store::next_due(std::vector<std::int64_t> endpoint_ids) {
  std::vector<due_time> out;
  if (endpoint_ids.empty()) co_return out;
  std::string ids = "{";
  for (std::size_t i = 0; i < endpoint_ids.size(); ++i) {
    if (i) ids += ',';
    ids += std::to_string(endpoint_ids[i]);
  }
  ids += '}';
  pg::params args{ids};
  auto res = co_await impl_->read(statements::next_due, std::move(args));
  if (!res) co_return res.error();
  for (int r = 0; r < res->rows(); ++r)
    out.push_back({to_int64(res->value(r, 0)), std::chrono::milliseconds{to_int64(res->value(r, 1))}});
  co_return out;
}

asio::awaitable<boost::system::result<std::vector<std::int64_t>>> state_store::endpoints_with_backlog() {
  pg::params args{};
  auto res = co_await impl_->read(statements::endpoints_with_backlog, std::move(args));
  if (!res) co_return res.error();
  std::vector<std::int64_t> ids;
  for (int r = 0; r < res->rows(); ++r) ids.push_back(to_int64(res->value(r, 0)));
  co_return ids;
}

asio::awaitable<boost::system::result<long>> state_store::reset_stale_sending(std::chrono::seconds older_than,
                                                                              std::vector<delivery_key> owned) {
  json_writer j;
  j.begin_array();
  for (const auto& k : owned) j.begin_object().field("endpoint_id", k.endpoint_id).field("event_id", k.event_id).end_object();
  j.end_array();
  pg::params args{std::to_string(older_than.count()), j.take(), std::to_string(impl_->options.shard_count),
                  std::to_string(impl_->options.shard_index)};
  auto res = co_await impl_->read(statements::reset_stale_sending, std::move(args));
  if (!res) co_return res.error();
  co_return res->affected();
}

asio::awaitable<boost::system::result<slot_record>> state_store::load_progress(const std::string& slot) {
  pg::params args{slot};
  auto res = co_await impl_->read(statements::load_progress, std::move(args));
  if (!res) co_return res.error();
  if (res->rows() == 0) co_return slot_record{};
  co_return slot_record{lsn::parse(res->value(0, 0)).value_or(lsn{}), std::string(res->value(0, 1)), res->value(0, 2) == "t",
                       res->optional_value(0, 3)};
}

asio::awaitable<boost::system::result<std::pair<std::string, lsn>>> state_store::current_snapshot() {
  auto res = co_await impl_->read(statements::current_snapshot, {});
  if (!res) co_return res.error();
  co_return std::pair<std::string, lsn>{std::string(res->value(0, 0)), lsn::parse(res->value(0, 1)).value_or(lsn{})};
}

asio::awaitable<boost::system::result<std::string>> state_store::import_snapshot(const std::string& name) {
  auto& s = *impl_;
  auto guard = co_await s.reader_mutex.scoped_lock();
  if (!s.reader_conn.is_open()) {
    if (auto ec = co_await open_session(s.reader_conn, s.options.conninfo, s.options.application_name + "-reader", 10s))
      co_return ec;
  }
  // Three commands in one transaction, with the reader to ourselves (the mutex): nothing else
  // may run inside it. Any failure closes the session, so no transaction is left open.
  auto begin = co_await s.reader_conn.async_simple("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", s.options.statement_timeout);
  if (begin) begin = co_await s.reader_conn.async_simple("SET TRANSACTION SNAPSHOT " + pg::quote_literal(name), s.options.statement_timeout);
  if (!begin) {
    s.reader_conn.close();
    co_return begin.error();
  }
  auto snap = co_await s.reader_conn.async_exec("SELECT pg_current_snapshot()::text", {}, s.options.statement_timeout);
  auto commit = co_await s.reader_conn.async_simple("COMMIT", s.options.statement_timeout);
  if (!snap || !commit) {
    s.reader_conn.close();
    co_return snap ? commit.error() : snap.error();
  }
  co_return std::string(snap->value(0, 0));
}

asio::awaitable<boost::system::result<slot_incident>> state_store::begin_slot_incident(
    const std::string& slot, const std::string& reason, const std::string& system_id) {
  pg::params args{slot, reason, system_id};
  auto res = co_await impl_->read(statements::begin_slot_incident, std::move(args));
  if (!res) co_return res.error();
  co_return slot_incident{to_int64(res->value(0, 0)), res->value(0, 1) == "t", res->value(0, 2) == "t"};
}

asio::awaitable<boost::system::error_code> state_store::slot_replaced(const std::string& slot, const std::string& system_id,
                                                                      lsn consistent_point, const std::string& snapshot,
                                                                      std::optional<std::int64_t> incident) {
  pg::params args{slot, system_id, consistent_point.to_string(), snapshot,
                  incident ? std::optional<std::string>(std::to_string(*incident)) : std::nullopt};
  auto res = co_await impl_->read(statements::slot_replaced, std::move(args));
  co_return res ? boost::system::error_code{} : res.error();
}

asio::awaitable<boost::system::result<std::vector<recovery>>> state_store::open_recoveries(const std::string& slot) {
  pg::params args{slot};
  auto res = co_await impl_->read(statements::open_recoveries, std::move(args));
  if (!res) co_return res.error();
  std::vector<recovery> out;
  for (int r = 0; r < res->rows(); ++r)
    out.push_back({to_int64(res->value(r, 0)), std::string(res->value(r, 1)), std::string(res->value(r, 2)),
                   res->optional_value(r, 3), res->optional_value(r, 4), res->optional_value(r, 5),
                   res->optional_value(r, 6), res->optional_value(r, 7),
                   res->is_null(r, 8) ? lsn{} : lsn::parse(res->value(r, 8)).value_or(lsn{})});
  co_return out;
}

asio::awaitable<boost::system::result<std::vector<std::pair<std::int64_t, std::string>>>> state_store::recovery_event_ids(
    std::int64_t id, std::int64_t after, int limit) {
  pg::params args{std::to_string(id), std::to_string(impl_->options.shard_count), std::to_string(impl_->options.shard_index),
                  std::to_string(after), std::to_string(limit)};
  auto res = co_await impl_->read(statements::recovery_event_ids, std::move(args));
  if (!res) co_return res.error();
  std::vector<std::pair<std::int64_t, std::string>> out;
  out.reserve(static_cast<std::size_t>(res->rows()));
  for (int r = 0; r < res->rows(); ++r) out.emplace_back(to_int64(res->value(r, 0)), std::string(res->value(r, 1)));
  co_return out;
}

asio::awaitable<boost::system::result<text_rows>> state_store::recovery_events(std::span<const std::string> ids) {
  std::string array = "{";
  for (const auto& id : ids) {
    if (array.size() > 1) array += ',';
    array += id;  // uuid text: no quoting needed
  }
  array += '}';
  pg::params args{array};
  auto res = co_await impl_->read(statements::recovery_events, std::move(args));
  if (!res) co_return res.error();
  co_return as_text_rows(*res);
}

asio::awaitable<boost::system::result<int>> state_store::shard_count() {
  auto res = co_await impl_->read(statements::shard_layout, {});
  if (!res) co_return res.error();
  co_return std::stoi(std::string(res->value(0, 0)));
}

asio::awaitable<boost::system::error_code> state_store::recovery_done(std::int64_t id, std::int64_t events,
                                                                      std::int64_t deliveries) {
  pg::params args{std::to_string(id), std::to_string(events), std::to_string(deliveries)};
  auto res = co_await impl_->read(statements::recovery_done, std::move(args));
  co_return res ? boost::system::error_code{} : res.error();
}

asio::awaitable<boost::system::result<std::optional<slot_health>>> state_store::load_slot_health(const std::string& slot) {
  pg::params args{slot};
  auto res = co_await impl_->read(statements::slot_health, std::move(args));
  if (!res) co_return res.error();
  if (res->rows() == 0) co_return std::optional<slot_health>{};
  slot_health h;
  h.wal_status = res->value(0, 0);
  if (!res->is_null(0, 1)) h.safe_wal_size = to_int64(res->value(0, 1));
  h.retained_bytes = to_int64(res->value(0, 2));
  co_return std::optional<slot_health>{std::move(h)};
}

asio::awaitable<boost::system::error_code> state_store::clear_removed_endpoints() {
  auto res = co_await impl_->read(statements::clear_removed_endpoints, {});
  co_return res ? boost::system::error_code{} : res.error();
}

asio::awaitable<boost::system::result<long>> state_store::delete_expired(std::chrono::hours age, int batch) {
  pg::params args{std::to_string(age.count()), std::to_string(batch)};
  auto res = co_await impl_->read(statements::delete_expired, std::move(args));
  if (!res) co_return res.error();
  co_return std::stol(std::string(res->value(0, 0)));
}

asio::awaitable<boost::system::result<long>> state_store::drop_expired_secrets() {
  pg::params args{};
  auto res = co_await impl_->read(statements::drop_expired_secrets, std::move(args));
  if (!res) co_return res.error();
  co_return res->affected();
}

asio::awaitable<boost::system::result<std::vector<health_write>>> state_store::load_health() {
  pg::params args{};
  auto res = co_await impl_->read(statements::load_health, std::move(args));
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
    h.endpoint_id = to_int64(res->value(r, 0));
    h.consecutive_failures = std::stoi(std::string(res->value(r, 1)));
    h.first_failure_at = as_time(r, 2);
    h.last_failure_at = as_time(r, 3);
    h.last_success_at = as_time(r, 4);
    if (!res->is_null(r, 5)) h.paused_for = std::chrono::milliseconds{to_int64(res->value(r, 5))};
    h.probe_rounds = std::stoi(std::string(res->value(r, 6)));
    if (!res->is_null(r, 7)) h.last_status = std::stoi(std::string(res->value(r, 7)));
    h.last_error = res->optional_value(r, 8);
    out.push_back(std::move(h));
  }
  co_return out;
}

namespace {
std::string xid_array(const std::vector<std::uint64_t>& xids) {
  std::string out = "{";
  for (auto x : xids) {
    if (out.size() > 1) out += ',';
    out += std::to_string(x);
  }
  return out + '}';
}
}  // namespace

asio::awaitable<boost::system::result<std::vector<std::int64_t>>> state_store::stale_cursors(std::chrono::hours age) {
  pg::params args{std::to_string(age.count())};
  auto res = co_await impl_->read(statements::stale_cursors, std::move(args));
  if (!res) co_return res.error();
  std::vector<std::int64_t> out;
  for (int r = 0; r < res->rows(); ++r) out.push_back(to_int64(res->value(r, 0)));
  co_return out;
}

asio::awaitable<boost::system::result<std::pair<std::string, std::int64_t>>> state_store::give_up_cursor(
    std::int64_t endpoint_id, const std::string& tenant_id, const std::string& covered,
    const std::vector<std::uint64_t>& also, const std::string& reason) {
  pg::params args{std::to_string(endpoint_id), tenant_id, covered, xid_array(also), reason};
  auto res = co_await impl_->read(statements::give_up_cursor, std::move(args));
  if (!res) co_return res.error();
  co_return std::pair<std::string, std::int64_t>{std::string(res->value(0, 0)), to_int64(res->value(0, 1))};
}

asio::awaitable<boost::system::result<std::vector<cursor_row>>> state_store::load_cursors() {
  pg::params args{std::to_string(impl_->options.shard_count), std::to_string(impl_->options.shard_index)};
  auto res = co_await impl_->read(statements::load_cursors, std::move(args));
  if (!res) co_return res.error();
  std::vector<cursor_row> out;
  for (int r = 0; r < res->rows(); ++r) {
    cursor_row c;
    c.endpoint_id = to_int64(res->value(r, 0));
    c.covered = std::string(res->value(r, 1));
    c.also = std::string(res->value(r, 2));
    if (auto w = res->optional_value(r, 3)) c.window_snapshot = std::move(*w);
    c.window_after = to_int64(res->value(r, 4));
    c.tenant_id = std::string(res->value(r, 5));
    if (auto routing = res->optional_value(r, 6)) c.routing = std::move(*routing);
    out.push_back(std::move(c));
  }
  co_return out;
}

asio::awaitable<boost::system::result<text_rows>> state_store::cursor_page(const cursor_page_request& q) {
  pg::params args{q.tenant_id, q.covered, xid_array(q.also), q.window_snapshot, std::to_string(q.after_seq), std::to_string(q.limit),
                  std::to_string(q.endpoint_id)};
  auto res = co_await impl_->read(statements::cursor_page, std::move(args));
  if (!res) co_return res.error();
  co_return as_text_rows(*res);
}

asio::awaitable<boost::system::result<text_rows>> state_store::load_endpoints() {
  pg::params args{std::to_string(impl_->options.shard_count), std::to_string(impl_->options.shard_index)};
  auto res = co_await impl_->read(statements::load_endpoints, std::move(args));
  if (!res) co_return res.error();
  co_return as_text_rows(*res);
}

asio::awaitable<boost::system::result<std::vector<std::pair<std::int64_t, double>>>> state_store::oldest_pending() {
  pg::params args{std::to_string(impl_->options.shard_count), std::to_string(impl_->options.shard_index)};
  auto res = co_await impl_->read(statements::oldest_pending, std::move(args));
  if (!res) co_return res.error();
  std::vector<std::pair<std::int64_t, double>> out;
  for (int r = 0; r < res->rows(); ++r) out.emplace_back(to_int64(res->value(r, 0)), std::stod(std::string(res->value(r, 1))));
  co_return out;
}

}  // namespace walhook::sql
