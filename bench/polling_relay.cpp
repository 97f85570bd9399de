#include "bench/polling_relay.hpp"

#include "bench/proc_stats.hpp"
#include "common/pg_connection.hpp"
#include "common/time.hpp"
#include "delivery/destination.hpp"
#include "delivery/job.hpp"
#include "delivery/amqp_sink.hpp"
#include "delivery/nats_sink.hpp"
#include "delivery/sink_router.hpp"
#include "delivery/signing.hpp"
#include "relay/operations/blocking_db.hpp"
#include "sql/session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>
#include <libpq-fe.h>

#include <algorithm>
#include <deque>
#include <atomic>
#include <mutex>
#include <random>
#include <unordered_map>

namespace walhook::bench {
namespace asio = boost::asio;
using namespace std::chrono_literals;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

namespace {

constexpr const char* notify_channel = "walhook_bench_deliveries";

// Endpoints (of a given list, in the worker's rotation order) that have due rows.
constexpr const char* poll_sql = R"sql(
SELECT u.id FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, o)
 WHERE EXISTS (SELECT 1 FROM bench.deliveries d
                WHERE d.endpoint_id = u.id AND d.status = 'pending' AND d.next_attempt_at <= now())
 ORDER BY u.o)sql";

// One of the endpoint's max_concurrency slots (transaction-scoped advisory lock), then up to
// $3 due rows with their events, locked; nothing if every slot is taken.
constexpr const char* reserve_sql = R"sql(
WITH slot AS MATERIALIZED (
  SELECT s FROM generate_series(0, $2::int - 1) AS s
   WHERE pg_try_advisory_xact_lock($1::bigint::int, s) LIMIT 1)
SELECT d.id, d.event_id::text, d.attempts, o.tenant_id, o.event_type, o.created_at, o.payload::text
  FROM bench.deliveries d JOIN walhook.outbox o ON o.id = d.event_id
 WHERE EXISTS (SELECT 1 FROM slot)
   AND d.endpoint_id = $1::bigint AND d.status = 'pending' AND d.next_attempt_at <= now()
 ORDER BY d.next_attempt_at
 LIMIT $3::int
   FOR UPDATE OF d SKIP LOCKED)sql";

// The batch's outcome: delivered, rescheduled (pending, later) or dead.
constexpr const char* finish_sql = R"sql(
UPDATE bench.deliveries AS d
   SET status = v.status, attempts = v.attempts, next_attempt_at = v.next_at, last_status = v.last_status,
       delivered_at = CASE WHEN v.status = 'delivered' THEN clock_timestamp() END
  FROM unnest($1::bigint[], $2::text[], $3::int[], $4::timestamptz[], $5::int[])
       AS v(id, status, attempts, next_at, last_status)
 WHERE d.id = v.id)sql";

/// A PostgreSQL array literal, elements double-quoted.
class array_literal {
 public:
  void add(std::string_view v) {
    sep();
    text_ += '"';
    for (char c : v) {
      if (c == '"' || c == '\\') text_ += '\\';
      text_ += c;
    }
    text_ += '"';
  }
  void add_null() {
    sep();
    text_ += "NULL";
  }
  std::string take() { return std::move(text_) + "}"; }

 private:
  void sep() {
    if (!first_) text_ += ',';
    first_ = false;
  }
  std::string text_ = "{";
  bool first_ = true;
};

}  // namespace

std::string polling_relay::schema_sql() {
  return R"sql(
CREATE SCHEMA IF NOT EXISTS bench;
CREATE TABLE bench.deliveries (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  endpoint_id     bigint NOT NULL,
  event_id        uuid NOT NULL,
  status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dead')),
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz DEFAULT now(),
  last_status     integer,
  created_at      timestamptz NOT NULL DEFAULT now(),
  delivered_at    timestamptz,
  UNIQUE (endpoint_id, event_id)
);
CREATE INDEX deliveries_due ON bench.deliveries (endpoint_id, next_attempt_at) WHERE status = 'pending';
)sql";
}

std::string polling_relay::notify_schema_sql() {
  return fmt::format(R"sql(
CREATE FUNCTION bench.notify_deliveries() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  -- One notification per endpoint that got work in this statement, naming it.
  PERFORM pg_notify('{}', e::text) FROM (SELECT DISTINCT endpoint_id FROM new_rows) AS n(e);
  RETURN NULL;
END
$fn$;
CREATE TRIGGER deliveries_notify AFTER INSERT ON bench.deliveries
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION bench.notify_deliveries();
)sql",
                     notify_channel);
}

std::string polling_relay::insert_sql() {
  return R"sql(
WITH e AS (
  INSERT INTO walhook.outbox (tenant_id, event_type, payload)
  SELECT u.t, u.e, u.p FROM unnest($1::text[], $2::jsonb[], $3::text[]) AS u(t, p, e)
  RETURNING id, tenant_id, event_type),
d AS (
  INSERT INTO bench.deliveries (endpoint_id, event_id)
  SELECT ep.id, e.id FROM e JOIN walhook.endpoints ep ON ep.tenant_id = e.tenant_id
   WHERE ep.status = 'active' AND (ep.event_types IS NULL OR e.event_type = ANY (ep.event_types)))
SELECT id, tenant_id, event_type FROM e)sql";
}

struct polling_relay::impl : std::enable_shared_from_this<impl> {
  struct endpoint {
    std::int64_t id = 0;
    std::string pool_key;
    delivery::destination dest;  ///< from its URL: HTTP or a broker
    std::vector<delivery::signing_key> keys;
    int max_concurrency = 4;
    delivery::breaker_state breaker;
  };
  struct counters_t {
    std::atomic<std::uint64_t> polls{0}, empty_polls{0}, batches{0}, busy_slots{0}, attempts{0}, delivered{0},
        failed{0}, notifications{0}, errors{0};
  };

  explicit impl(polling_options o)
      : options(std::move(o)), http(ioc.get_executor(), options.http),
        sinks(std::make_unique<delivery::sink_router>(
            http, std::make_unique<delivery::nats_sink>(ioc.get_executor(), options.broker),
            std::make_unique<delivery::amqp_sink>(ioc.get_executor(), options.broker))),
        stop_timer(ioc.get_executor()), rng(std::random_device{}()) {}

  polling_options options;
  asio::io_context ioc{1};
  delivery::http_client http;
  std::unique_ptr<delivery::sink_router> sinks;  ///< HTTP and the brokers, as in walhook's engine
  asio::steady_timer stop_timer;
  std::mt19937_64 rng;
  std::vector<endpoint> endpoints;
  std::unordered_map<std::int64_t, std::size_t> index;
  std::vector<asio::steady_timer*> idle;  // timers of idle workers, oldest first
  std::deque<std::int64_t> hints;          // endpoints named by notifications, not yet taken
  bool stopping = false;
  int running = 0;
  std::atomic<int> connected{0};
  std::atomic<bool> listening{false};
  PGconn* listen_conn = nullptr;
  std::unique_ptr<asio::posix::stream_descriptor> listen_socket;
  counters_t counters;
  mutable std::mutex error_mutex;
  std::string error;

  void note_error(const std::string& e) {
    ++counters.errors;
    std::lock_guard lock(error_mutex);
    if (error.empty()) error = e;
  }

  double unit_random() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }

  /// Wakes up to n idle workers, longest idle first.
  void wake(std::size_t n) {
    while (n-- > 0 && !idle.empty()) {
      idle.front()->cancel();
      idle.erase(idle.begin());
    }
  }

  asio::awaitable<void> idle_wait(asio::steady_timer& timer) {
    timer.expires_after(options.idle_interval);
    idle.push_back(&timer);
    co_await timer.async_wait(tuple_awaitable);
    std::erase(idle, &timer);
  }

  void begin_stop() {
    if (stopping) return;
    stopping = true;
    wake(idle.size());
    if (listen_socket) {
      boost::system::error_code ignored;
      listen_socket->cancel(ignored);
    }
    // Batches in flight get the HTTP deadline to finish, then the client is shut down.
    stop_timer.expires_after(options.http.total_deadline + 1s);
    stop_timer.async_wait([self = shared_from_this()](boost::system::error_code) { self->sinks->shutdown(); });
  }

  void worker_done() {
    if (--running == 0) {
      stop_timer.cancel();
      sinks->shutdown();
      if (listen_socket) {
        boost::system::error_code ignored;
        listen_socket->cancel(ignored);
      }
    }
  }

  asio::awaitable<void> listen() {
    auto self = shared_from_this();
    while (!stopping) {
      auto [ec] = co_await listen_socket->async_wait(asio::posix::stream_descriptor::wait_read, tuple_awaitable);
      if (ec || stopping) break;
      if (!PQconsumeInput(listen_conn)) {
        note_error("LISTEN connection: " + relay::one_line(PQerrorMessage(listen_conn)));
        break;
      }
      while (PGnotify* note = PQnotifies(listen_conn)) {
        ++counters.notifications;
        std::int64_t id = std::strtoll(note->extra, nullptr, 10);
        PQfreemem(note);
        if (std::find(hints.begin(), hints.end(), id) != hints.end()) continue;
        hints.push_back(id);
        wake(1);
      }
    }
  }

  /// One reserved row of a batch, from its reservation to its outcome.
  struct batch_row {
    std::string row_id;
    delivery::event ev;
    int attempts = 0;
    std::string created_text;
    bool skipped = false;                        ///< paused by the breaker or shutting down: back to pending
    std::optional<delivery::post_result> result; ///< the attempt's answer
    delivery::broker_message message;            ///< broker endpoints: what was published (lives until confirmed)
  };

  /// Signs as walhook does (Standard Webhooks) at send time.
  std::vector<std::pair<std::string, std::string>> signed_headers(const endpoint& ep, const delivery::event& ev,
                                                                  const std::string& body) {
    auto ts = unix_seconds(system_now());
    return {{"webhook-id", ev.id},
            {"webhook-timestamp", std::to_string(ts)},
            {"webhook-signature", delivery::signature_header(ep.keys, ev.id, ts, body)}};
  }

  /// HTTP: one POST.
  asio::awaitable<void> post_one(endpoint& ep, batch_row& row) {
    delivery::http_request req;
    req.body = row.ev.body;
    req.headers = signed_headers(ep, row.ev, req.body);
    ++counters.attempts;
    row.result = co_await sinks->async_post(ep.pool_key, ep.dest.http, req);
  }

  /// A broker: every row of the batch published at once (pipelined), then every confirmation
  /// awaited; the batch is as slow as its slowest confirmation, bounded by the deadline.
  asio::awaitable<void> publish_all(endpoint& ep, std::vector<batch_row>& rows) {
    struct join_state {
      explicit join_state(asio::any_io_executor ex) : done(std::move(ex)) {}
      std::size_t left = 0;
      asio::steady_timer done;
    };
    auto join = std::make_shared<join_state>(ioc.get_executor());
    join->done.expires_at(asio::steady_timer::time_point::max());
    const bool paused = stopping || delivery::mode(ep.breaker, system_now()) == delivery::breaker_mode::paused;
    for (auto& row : rows) {
      if (paused) {
        row.skipped = true;
        continue;
      }
      auto subject = delivery::render_template(ep.dest.broker.subject, {row.ev.type, row.ev.tenant_id, std::nullopt, std::nullopt},
                                               ep.dest.kind == delivery::sink_kind::nats);
      if (!subject) {
        row.result = delivery::transport_error(delivery::transport_errc::bad_message, subject.error().message);
        continue;
      }
      row.message.subject = std::move(*subject);
      row.message.message_id = row.ev.id;
      row.message.body = row.ev.body;
      row.message.headers = signed_headers(ep, row.ev, row.message.body);
      row.message.headers.emplace_back("walhook-event-type", row.ev.type);
      row.message.headers.emplace_back("walhook-tenant-id", row.ev.tenant_id);
      ++counters.attempts;
      ++join->left;
      asio::co_spawn(ioc, sinks->async_publish(ep.pool_key, ep.dest.broker, row.message, options.http.total_deadline),
                     [join, &row](std::exception_ptr e, delivery::post_result r) {
                       row.result = e ? delivery::post_result(delivery::transport_error(delivery::transport_errc::protocol_error,
                                                                                        "publish threw"))
                                      : std::move(r);
                       if (--join->left == 0) join->done.cancel();
                     });
    }
    // Each publish ends by its deadline, so this wait is bounded; rows outlive it.
    if (join->left > 0) co_await join->done.async_wait(tuple_awaitable);
  }

  /// One reservation transaction on one endpoint: the rows handled (0: none or no free slot),
  /// or −1 if the connection failed.
  asio::awaitable<int> run_batch(pg::connection& conn, endpoint& ep) {
    std::vector<pg::statement> open;
    open.push_back(pg::statement{"BEGIN", {}});
    open.push_back(pg::statement{reserve_sql, {std::to_string(ep.id), std::to_string(ep.max_concurrency),
                                               std::to_string(options.batch)}});
    auto reserved = co_await conn.async_pipeline(open, 30s);
    if (!reserved) {
      note_error("reserve: " + conn.last_error());
      if (!conn.is_open()) co_return -1;
      co_await conn.async_simple("ROLLBACK", 30s);
      co_return 0;
    }
    const pg::query_result& found = (*reserved)[1];
    if (found.rows() == 0) {
      ++counters.busy_slots;
      auto done = co_await conn.async_simple("COMMIT", 30s);
      co_return done ? 0 : -1;
    }
    ++counters.batches;
    std::vector<batch_row> rows(static_cast<std::size_t>(found.rows()));
    for (int r = 0; r < found.rows(); ++r) {
      auto& row = rows[static_cast<std::size_t>(r)];
      row.row_id = std::string(found.value(r, 0));
      row.ev.id = std::string(found.value(r, 1));
      row.attempts = std::stoi(std::string(found.value(r, 2)));
      row.ev.tenant_id = std::string(found.value(r, 3));
      row.ev.type = std::string(found.value(r, 4));
      row.created_text = std::string(found.value(r, 5));
      row.ev.created_at = pg_timestamptz_to_iso8601(row.created_text).value_or(format_iso8601(system_now()));
      row.ev.payload = std::string(found.value(r, 6));
      row.ev.body = delivery::make_body(row.ev);
    }
    array_literal ids, statuses, attempts_out, next_at, last_status;
    if (ep.dest.kind == delivery::sink_kind::http) {
      // One POST after another; the breaker learns from each before the next is sent.
      for (auto& row : rows) {
        row.skipped = stopping || delivery::mode(ep.breaker, system_now()) == delivery::breaker_mode::paused;
        if (!row.skipped) co_await post_one(ep, row);
        ids.add(row.row_id);
        outcome_of(ep, row, statuses, attempts_out, next_at, last_status);
      }
    } else {
      co_await publish_all(ep, rows);
      for (auto& row : rows) {
        ids.add(row.row_id);
        outcome_of(ep, row, statuses, attempts_out, next_at, last_status);
      }
    }
    std::vector<pg::statement> close;
    close.push_back(pg::statement{finish_sql, {ids.take(), statuses.take(), attempts_out.take(), next_at.take(),
                                               last_status.take()}});
    close.push_back(pg::statement{"COMMIT", {}});
    auto finished = co_await conn.async_pipeline(close, 30s);
    if (!finished) {
      note_error("finish: " + conn.last_error());
      if (!conn.is_open()) co_return -1;
      co_await conn.async_simple("ROLLBACK", 30s);
    }
    co_return found.rows();
  }

  /// A row's outcome into the batch's UPDATE arrays: delivered, rescheduled (walhook's backoff,
  /// Retry-After, give-up and breaker rules) or dead; skipped rows go back to pending untouched.
  void outcome_of(endpoint& ep, batch_row& row, array_literal& statuses, array_literal& attempts_out,
                  array_literal& next_at, array_literal& last_status) {
    auto now = system_now();
    if (row.skipped || !row.result) {
      statuses.add("pending");
      attempts_out.add(std::to_string(row.attempts));
      next_at.add(format_iso8601(ep.breaker.paused_until.value_or(now)));
      last_status.add_null();
      return;
    }
    auto outcome = delivery::classify(*row.result, now, options.retry);
    const int attempts = row.attempts + 1;
    attempts_out.add(std::to_string(attempts));
    if (outcome.status) last_status.add(std::to_string(outcome.status));
    else last_status.add_null();
    switch (outcome.kind) {
      case delivery::verdict::delivered:
        ++counters.delivered;
        delivery::record_success(ep.breaker, now);
        statuses.add("delivered");
        next_at.add_null();
        break;
      case delivery::verdict::dead:
      case delivery::verdict::gone:
        ++counters.failed;
        statuses.add("dead");
        next_at.add_null();
        break;
      case delivery::verdict::retry: {
        ++counters.failed;
        auto created = parse_pg_timestamptz(row.created_text);
        std::optional<system_clock::time_point> created_at;
        if (created) created_at = std::chrono::time_point_cast<system_clock::duration>(*created);
        auto decision = delivery::next_attempt(attempts, now, created_at, outcome.retry_after, options.retry, unit_random());
        delivery::record_failure(ep.breaker, now, options.breaker);
        if (decision.give_up) {
          statuses.add("dead");
          next_at.add_null();
        } else {
          auto at = decision.next_attempt_at;
          if (ep.breaker.paused_until && *ep.breaker.paused_until > at) at = *ep.breaker.paused_until;
          statuses.add("pending");
          next_at.add(format_iso8601(at));
        }
        break;
      }
    }
  }

  asio::awaitable<void> worker(int w) {
    auto self = shared_from_this();
    pg::connection conn(ioc.get_executor());
    asio::steady_timer timer(ioc.get_executor());
    std::size_t rr = static_cast<std::size_t>(w);
    bool counted = false;
    while (!stopping) {
      if (!conn.is_open()) {
        auto ec = co_await sql::open_session(conn, options.conninfo, "walhook-bench-poller", 10s);
        if (ec) {
          note_error("connect: " + conn.last_error());
          conn.close();
          timer.expires_after(200ms);
          co_await timer.async_wait(tuple_awaitable);
          continue;
        }
        if (!counted) ++connected;
        counted = true;
      }
      // Notified endpoints first (notify variant): straight to the reservation, no poll.
      if (!hints.empty()) {
        std::int64_t id = hints.front();
        hints.pop_front();
        auto it = index.find(id);
        if (it == index.end()) continue;
        int n = co_await run_batch(conn, endpoints[it->second]);
        if (n < 0) conn.close();
        continue;
      }
      // The endpoints to ask about, rotated per worker so workers spread over endpoints;
      // endpoints paused by the breaker are skipped.
      auto now = system_now();
      array_literal ids;
      for (std::size_t i = 0; i < endpoints.size(); ++i) {
        const auto& e = endpoints[(rr + i) % endpoints.size()];
        if (delivery::mode(e.breaker, now) != delivery::breaker_mode::paused) ids.add(std::to_string(e.id));
      }
      ++rr;
      pg::params p{ids.take()};
      auto due = co_await conn.async_exec(poll_sql, p, 30s);
      if (!due) {
        note_error("poll: " + conn.last_error());
        conn.close();
        continue;
      }
      ++counters.polls;
      bool worked = false;
      for (int r = 0; r < due->rows() && !stopping; ++r) {
        auto it = index.find(std::stoll(std::string(due->value(r, 0))));
        if (it == index.end()) continue;
        int n = co_await run_batch(conn, endpoints[it->second]);
        if (n < 0) {
          conn.close();
          break;
        }
        if (n > 0) worked = true;
      }
      if (!worked && !stopping) {
        ++counters.empty_polls;
        co_await idle_wait(timer);
      }
    }
    conn.close();
  }
};

polling_relay::polling_relay(polling_options options) : impl_(std::make_shared<impl>(std::move(options))) {}

polling_relay::~polling_relay() { stop(); }

void polling_relay::start() {
  auto& s = *impl_;
  {
    relay::blocking_db db(s.options.conninfo, "walhook-bench-poller");
    auto r = db.exec("SELECT id, url, secret, max_concurrency FROM walhook.endpoints WHERE status = 'active' ORDER BY id");
    for (int i = 0; i < r.rows(); ++i) {
      impl::endpoint e;
      e.id = std::stoll(std::string(r.value(i, 0)));
      e.pool_key = std::to_string(e.id);
      auto dest = delivery::parse_destination(r.value(i, 1));
      if (!dest) throw std::runtime_error("endpoint URL: " + std::string(r.value(i, 1)) + ": " + dest.error().text());
      e.dest = *dest;
      auto keys = delivery::parse_secrets(r.value(i, 2));
      if (keys) e.keys = *keys;
      e.max_concurrency = std::stoi(std::string(r.value(i, 3)));
      s.index[e.id] = s.endpoints.size();
      s.endpoints.push_back(std::move(e));
    }
  }
  if (s.options.notify) {
    s.listen_conn = PQconnectdb(s.options.conninfo.c_str());
    if (PQstatus(s.listen_conn) != CONNECTION_OK)
      throw std::runtime_error("LISTEN connection: " + relay::one_line(PQerrorMessage(s.listen_conn)));
    PGresult* r = PQexec(s.listen_conn, fmt::format("LISTEN {}", notify_channel).c_str());
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) throw std::runtime_error("LISTEN: " + relay::one_line(PQerrorMessage(s.listen_conn)));
    PQsetnonblocking(s.listen_conn, 1);
    s.listen_socket = std::make_unique<asio::posix::stream_descriptor>(s.ioc, PQsocket(s.listen_conn));
    s.listening = true;
  }
  for (int w = 0; w < s.options.workers; ++w) {
    ++s.running;
    asio::co_spawn(s.ioc, s.worker(w), [self = impl_](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          self->note_error(std::string("worker crashed: ") + ex.what());
        }
      }
      self->worker_done();
    });
  }
  if (s.options.notify)
    asio::co_spawn(s.ioc, s.listen(), [self = impl_](std::exception_ptr e) {
      if (e) self->note_error("listener crashed");
    });
  thread_ = std::thread([self = impl_] { self->ioc.run(); });
  thread_handle_ = thread_.native_handle();
}

bool polling_relay::ready() const {
  return impl_->connected.load() == impl_->options.workers && (!impl_->options.notify || impl_->listening.load());
}

void polling_relay::stop() {
  if (!thread_.joinable()) return;
  final_cpu_ = thread_cpu_seconds(thread_.native_handle());
  asio::post(impl_->ioc, [self = impl_] { self->begin_stop(); });
  thread_.join();
  if (impl_->listen_socket) impl_->listen_socket->release();
  impl_->listen_socket.reset();
  if (impl_->listen_conn) PQfinish(impl_->listen_conn);
  impl_->listen_conn = nullptr;
}

double polling_relay::cpu_seconds() const {
  if (thread_.joinable()) return thread_cpu_seconds(thread_handle_);
  return final_cpu_ < 0 ? 0 : final_cpu_;
}

polling_stats polling_relay::stats() const {
  const auto& c = impl_->counters;
  polling_stats s;
  s.polls = c.polls;
  s.empty_polls = c.empty_polls;
  s.batches = c.batches;
  s.busy_slots = c.busy_slots;
  s.attempts = c.attempts;
  s.delivered = c.delivered;
  s.failed = c.failed;
  s.notifications = c.notifications;
  s.errors = c.errors;
  return s;
}

std::string polling_relay::first_error() const {
  std::lock_guard lock(impl_->error_mutex);
  return impl_->error;
}

}  // namespace walhook::bench
