#include "relay/inbox/group_commit.hpp"

#include "common/log.hpp"
#include "common/pg_connection.hpp"
#include "common/task_group.hpp"
#include "sql/session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <vector>

namespace walhook::relay::inbox {
namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

namespace {

/// A queued call, parked on its timer until a session completes it.
struct waiter {
  waiter(asio::any_io_executor ex, accept_call c) : timer(std::move(ex)), call(std::move(c)) {}
  asio::steady_timer timer;
  accept_call call;
  clock::time_point queued = clock::now();
  bool taken = false;  ///< a session sent it: only its batch's answer (or the timeout) ends it now
  std::optional<accept_result> result;
  void complete(accept_outcome o, std::string detail = {}) {
    if (result) return;
    result = accept_result{o, std::move(detail)};
    timer.cancel();
  }
};
using waiter_ptr = std::shared_ptr<waiter>;

/// bytea's text input: \x and hex.
std::string bytea_hex(const std::string& raw) {
  std::string out = "\\x";
  out.reserve(2 + raw.size() * 2);
  for (unsigned char c : raw) fmt::format_to(std::back_inserter(out), "{:02x}", c);
  return out;
}

pg::statement statement_of(const accept_call& c) {
  return {"SELECT walhook.inbox_accept($1, $2, $3::bytea, $4, $5, $6::jsonb, $7, $8::boolean)",
          {c.source, c.event_id, bytea_hex(c.fingerprint), c.event_type, c.order_key, c.headers_json, c.body,
           c.body_is_text ? "true" : "false"}};
}

accept_outcome outcome_of(std::string_view text) {
  if (text == "accepted") return accept_outcome::accepted;
  if (text == "duplicate") return accept_outcome::duplicate;
  if (text == "conflict") return accept_outcome::conflict;
  if (text == "unknown_source") return accept_outcome::unknown_source;
  return accept_outcome::failed;
}

}  // namespace

struct group_committer::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor e, group_commit_options o) : ex(e), options(std::move(o)), tasks(e) {}
  asio::any_io_executor ex;
  group_commit_options options;
  std::deque<waiter_ptr> queue;
  std::vector<asio::steady_timer*> idle;  ///< the timers idle sessions wait on; a new call wakes one

  void wake_one() {
    if (idle.empty()) return;
    idle.back()->cancel();
    idle.pop_back();
  }
  task_group tasks;
  bool stopped = false;
  group_commit_stats counters;
  int sessions_failing = 0;  ///< sessions whose last connect failed (in their backoff)

  /// Takes up to max_batch calls; those that waited past shed_after are answered `shed`.
  std::vector<waiter_ptr> take_batch() {
    std::vector<waiter_ptr> batch;
    const auto now = clock::now();
    while (!queue.empty() && batch.size() < options.max_batch) {
      auto w = std::move(queue.front());
      queue.pop_front();
      if (w->result) continue;  // its request gave up waiting
      if (now - w->queued > options.shed_after) {
        w->complete(accept_outcome::shed, "waited too long for a commit");
        continue;
      }
      w->taken = true;
      batch.push_back(std::move(w));
    }
    return batch;
  }

  /// Runs `batch` in one implicit transaction (a pipeline ends with one Sync); on a statement's
  /// error, each call again in a transaction of its own. False if the session is lost.
  asio::awaitable<bool> commit(pg::connection& conn, const std::vector<waiter_ptr>& batch) {
    std::vector<pg::statement> statements;
    statements.reserve(batch.size());
    for (const auto& w : batch) statements.push_back(statement_of(w->call));
    auto res = co_await conn.async_pipeline(statements, options.statement_timeout);
    ++counters.batches;
    counters.calls += batch.size();
    if (res) {
      for (std::size_t i = 0; i < batch.size(); ++i)
        batch[i]->complete(outcome_of((*res)[i].rows() > 0 ? (*res)[i].value(0, 0) : ""));
      co_return true;
    }
    if (res.error() != pg::errc::query_failed || !conn.is_open()) {
      const std::string why = conn.last_error().empty() ? res.error().message() : conn.last_error();
      for (const auto& w : batch) w->complete(accept_outcome::failed, why);
      co_return false;
    }
    // One statement failed: the whole transaction rolled back. Each alone, to find it.
    for (const auto& w : batch) {
      if (batch.size() > 1) ++counters.retried_alone;
      const pg::statement one[] = {statement_of(w->call)};
      auto r = co_await conn.async_pipeline(one, options.statement_timeout);
      if (r) {
        w->complete(outcome_of((*r)[0].rows() > 0 ? (*r)[0].value(0, 0) : ""));
      } else if (r.error() == pg::errc::query_failed && conn.is_open() && conn.last_sqlstate().starts_with("22") &&
                 !w->call.body_is_text) {
        // A data exception: jsonb refused the body (the only cast). Once more, kept as a string.
        w->call.body_is_text = true;
        const pg::statement again[] = {statement_of(w->call)};
        auto t = co_await conn.async_pipeline(again, options.statement_timeout);
        if (t)
          w->complete(outcome_of((*t)[0].rows() > 0 ? (*t)[0].value(0, 0) : ""));
        else
          w->complete(conn.is_open() ? accept_outcome::rejected : accept_outcome::failed, conn.last_error());
        if (!conn.is_open()) co_return false;
      } else if (r.error() == pg::errc::query_failed && conn.is_open()) {
        w->complete(accept_outcome::rejected, conn.last_error());
      } else {
        w->complete(accept_outcome::failed, conn.last_error());
        co_return false;
      }
    }
    co_return true;
  }

  /// One session: connects, then commits batches until stopped.
  asio::awaitable<void> session(int number) {
    auto self = shared_from_this();
    co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
    pg::connection conn(ex);
    asio::steady_timer pause(ex);
    auto backoff = 100ms;
    bool up = false;
    bool failing = false;
    while (!stopped) {
      if (!conn.is_open()) {
        if (up) --counters.sessions_up;
        up = false;
        if (auto ec = co_await sql::open_session(conn, options.database_url, "walhook-ingest", 10s)) {
          if (!failing) ++sessions_failing;
          failing = true;
          log::warn("inbox.db_unavailable", {{"session", number}, {"error", conn.last_error()},
                                             {"retry_ms", static_cast<std::int64_t>(backoff.count())}});
          pause.expires_after(backoff);
          auto [pec] = co_await pause.async_wait(tuple_awaitable);
          if (pec && stopped) break;
          backoff = std::min(backoff * 2, std::chrono::milliseconds(2s));
          continue;
        }
        backoff = 100ms;
        if (failing) --sessions_failing;
        failing = false;
        up = true;
        ++counters.sessions_up;
      }
      while (!stopped && queue.empty()) {
        pause.expires_at(clock::time_point::max());
        idle.push_back(&pause);
        co_await pause.async_wait(tuple_awaitable);
        std::erase(idle, &pause);
      }
      if (stopped) break;
      if (options.window.count() > 0 && queue.size() < options.max_batch) {
        pause.expires_after(options.window);
        co_await pause.async_wait(tuple_awaitable);
      }
      auto batch = take_batch();
      if (batch.empty()) continue;
      if (!co_await commit(conn, batch)) conn.close();
    }
    if (up) --counters.sessions_up;
    if (failing) --sessions_failing;
  }

  void fail_queued() {
    for (auto& w : queue) w->complete(accept_outcome::failed, "the ingest server is stopping");
    queue.clear();
  }
};

group_committer::group_committer(asio::any_io_executor ex, group_commit_options options)
    : impl_(std::make_shared<impl>(ex, std::move(options))) {
  for (int i = 0; i < std::max(impl_->options.sessions, 1); ++i)
    impl_->tasks.spawn(impl_->session(i), "inbox commit session");
}

group_committer::~group_committer() { stop(); }

asio::awaitable<accept_result> group_committer::accept(accept_call call) {
  auto self = impl_;
  if (self->stopped) co_return accept_result{accept_outcome::failed, "the ingest server is stopping"};
  // Every session failed its last connect: the database is down; say so now rather than after
  // the request's whole wait.
  if (self->sessions_failing >= std::max(self->options.sessions, 1))
    co_return accept_result{accept_outcome::failed, "the database is unavailable"};
  if (self->queue.size() >= self->options.max_queue)
    co_return accept_result{accept_outcome::shed, fmt::format("{} requests already wait for a commit", self->queue.size())};
  auto w = std::make_shared<waiter>(self->ex, std::move(call));
  w->timer.expires_after(self->options.shed_after);
  self->queue.push_back(w);
  self->wake_one();
  co_await w->timer.async_wait(tuple_awaitable);
  // Not taken within shed_after: the database is slow or stalled; the sender retries later
  // (take_batch skips it). Taken: its batch is out; wait for its answer a bounded while more.
  if (!w->result && !w->taken) w->complete(accept_outcome::shed, "no database session was free in time");
  if (!w->result) {
    w->timer.expires_after(self->options.statement_timeout + 1s);
    co_await w->timer.async_wait(tuple_awaitable);
  }
  if (!w->result) w->complete(accept_outcome::failed, "no answer from the database in time");
  co_return *w->result;
}

group_commit_stats group_committer::stats() const {
  auto s = impl_->counters;
  s.queued = impl_->queue.size();
  return s;
}

void group_committer::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->fail_queued();
  for (auto* t : impl_->idle) t->cancel();
  impl_->idle.clear();
  impl_->tasks.emit(asio::cancellation_type::terminal);
}

}  // namespace walhook::relay::inbox
