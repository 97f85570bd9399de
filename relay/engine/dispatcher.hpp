#pragma once
// The delivery side of the engine (docs/architecture.md, Data flow, from the router to the state store): admits routed
// deliveries, schedules them fairly per endpoint, runs attempts through the transport, decides
// their outcomes and writes what must be durable — and tells the LSN tracker when a delivery no
// longer holds its transaction. It also claims persisted work back, and sweeps: an attempt
// running past the hold bound is recorded as 'sending' so its ticket can go; a stalled endpoint's
// queued work goes to PostgreSQL.
//
// Every decision is a pure function (relay/core/decisions.hpp, relay/core/backlog.hpp); apply()
// and the writes it makes are the only code here that writes to the store, releases LSN tickets
// or queues work in the scheduler. One class in four files: relay/engine/dispatcher.cpp (apply,
// sessions, the stop), dispatcher_admission.cpp, dispatcher_attempts.cpp, dispatcher_claims.cpp
// (back-pressure, sweeps, claims) — each of the others reads state, takes jobs out of the
// scheduler and hands what it decided to apply(). The I/O seams are sql::store,
// delivery::transport and clock_source, so tests/unit/relay/engine/dispatcher_test.cpp drives all
// of it with fakes and a manual clock, without sleeping.
//
// Thread affinity: one executor; every call from it.

#include "common/task_group.hpp"
#include "common/time.hpp"
#include "common/wake_signal.hpp"
#include "delivery/oauth2.hpp"
#include "delivery/outcome_class.hpp"
#include "delivery/policy.hpp"
#include "delivery/scheduler.hpp"
#include "delivery/transport.hpp"
#include "relay/core/backlog.hpp"
#include "relay/core/decisions.hpp"
#include "relay/core/endpoint_directory.hpp"
#include "relay/core/lsn_tracker.hpp"
#include "relay/core/notifications.hpp"
#include "relay/core/stats.hpp"
#include "sql/store.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace walhook::relay {

class outcome_log;

/// What an outbox cursor did with a delivery it was offered (relay/engine/cursors.hpp).
enum class follow_result {
  refused,  ///< not taken: the caller writes it to walhook.deliveries as before
  taken,    ///< owed by the endpoint's cursor (its ticket is the cursor's now)
  entered,  ///< taken, and the endpoint just left the stream: its queued work follows
};

struct dispatcher_options {
  /// Attempts in flight and deliveries queued in memory (their defaults: delivery::scheduler_limits).
  delivery::scheduler_limits limits;
  std::chrono::milliseconds max_wait_in_memory{1000}; ///< a queued delivery waiting longer is spilled
  /// An attempt still running after this long is recorded as 'sending' and stops holding its
  /// transaction's LSN (docs/architecture.md, Invariants, 9): no customer holds the acknowledged position.
  std::chrono::milliseconds max_hold{250};
  std::chrono::milliseconds sweep_interval{50};       ///< how often the sweep runs
  std::chrono::milliseconds min_claim_interval{5};    ///< claim rounds are at least this far apart
  admission_policy admission;
  outcome_policy outcomes;
  notification_policy notifications;                  ///< where walhook's notifications go, their rate limits
  std::chrono::milliseconds claim_horizon{500};       ///< claims fetch this much of an endpoint's capacity
  /// Rows one claim takes for one endpoint at most (small transactions keep the walsender from stalling).
  std::size_t max_claim = 200;
  /// Bytes of events in memory (bodies and payloads, each event once) before reading the slot
  /// waits and claims stop: the counts alone let 1,000 events of 900 KB take 375 MB.
  std::size_t max_queued_bytes = std::size_t{256} << 20;
  std::uint64_t seed = 0;                             ///< jitter's random seed; 0 = random_device
  /// A broker publish's whole time, connect included, until the broker confirms it (the HTTP
  /// client has its own, http_client_options::total_deadline; `walhook run --deadline-ms` sets both).
  std::chrono::milliseconds broker_deadline{5000};
  /// Where each finished attempt is noted (the admin API's "did endpoint X get event Y?"); not
  /// owned, on the same executor; nullptr: nowhere.
  outcome_log* recent_outcomes = nullptr;
};

class dispatcher {
 public:
  /// Hooks into the engine: `released` runs when a delivery let go of its LSN ticket (confirm
  /// the new position), `room` when reading the slot may resume (back-pressure eased).
  struct hooks {
    std::function<void()> released;
    std::function<void()> room;
  };

  /// The outbox cursors' side (relay/engine/cursors.hpp), set once by the engine: `skips` takes a
  /// new stream delivery of an endpoint that follows the outbox; `follow` is offered each
  /// delivery that would be written pending for a reason of its endpoint's; `handled` is told of
  /// each stream delivery handled (delivered, merged away, or durable in walhook.deliveries).
  struct cursor_hooks {
    std::function<bool(delivery::job&)> skips;
    std::function<follow_result(delivery::job&, std::string_view)> follow;
    std::function<void(std::int64_t endpoint_id, const delivery::event&)> handled;
  };

  dispatcher(boost::asio::any_io_executor ex, dispatcher_options options, endpoint_directory& directory,
             lsn_tracker& tracker, sql::store& store, delivery::transport& transport, const clock_source& clock,
             hooks h = {});
  ~dispatcher();
  dispatcher(const dispatcher&) = delete;
  dispatcher& operator=(const dispatcher&) = delete;

  /// An event from the stream, counted in the memory budget (max_queued_bytes) while it lives.
  std::shared_ptr<const delivery::event> track(delivery::event ev) { return events_.track(std::move(ev)); }
  /// Bytes of events in memory.
  std::size_t event_bytes() const { return events_.bytes(); }
  /// A delivery routed from the stream (it holds its transaction's ticket).
  void submit(delivery::job j);
  /// Events the endpoints' payload filters kept from them (walhook_endpoint_filtered_total).
  void count_filtered(const std::vector<std::int64_t>& endpoint_ids) {
    for (auto id : endpoint_ids) ++stats_.endpoints[id].filtered;
  }
  void set_cursor_hooks(cursor_hooks h) { cursor_hooks_ = std::move(h); }
  /// A delivery read back by an outbox cursor (j.drained, holding its window's ticket): admitted
  /// in memory; one its endpoint cannot take now goes back to the cursor.
  void submit_drained(delivery::job j);
  /// Ids of the events of stream transaction `t` whose deliveries to the endpoint were handled
  /// while others of the transaction were still outstanding: an outbox cursor that takes the
  /// rest reads the whole transaction back, and skips these (else they would be sent twice).
  std::vector<std::string> handled_of(lsn_tracker::ticket t, std::int64_t endpoint_id) const;
  /// The commit LSNs and xids of the endpoint's stream deliveries in flight (not yet handled).
  std::vector<std::pair<std::uint32_t, lsn>> in_flight_stream(std::int64_t endpoint_id) const;
  /// How many deliveries a cursor may read back for the endpoint now (its capacity over the
  /// claim horizon, as a claim; 0 while its queue or walhook's memory is too full).
  std::size_t drain_room(std::int64_t endpoint_id) const;
  /// A delivery of an outbox row that cannot become a request (e.g. a created_at RFC 3339 cannot
  /// express): recorded dead with `reason`, never sent; its ticket goes once that is durable.
  void submit_dead(delivery::job j, std::string reason);
  /// An endpoint was added, changed or removed (endpoint_directory's answer): its queued work
  /// leaves memory if it stopped being active, its connections are dropped if its URL changed,
  /// its pending rows are looked for if it became active.
  void endpoint_changed(const endpoint_change& c);
  /// The stream carried the removal of endpoints `ids` (a Delete or a changed id: `endpoint_id`;
  /// a Truncate: empty) in transaction `xid`, which holds `ticket`. They are retired: nothing new
  /// is routed to them, and the work routed before gets one attempt each. Once that work is done
  /// in memory, they leave the directory and walhook.endpoints_removed forgets their copies (and
  /// ends any delivery row of theirs still pending); the ticket goes once that is durable — until
  /// then a crash replays the events and the removal, with the copies still there.
  void removal_streamed(std::vector<std::int64_t> ids, std::optional<std::int64_t> endpoint_id, std::uint32_t xid,
                        lsn_tracker::ticket ticket);
  /// An operator's signal (`walhook replay`, `endpoint resume|enable`): look for the endpoint's
  /// pending rows; `resume` also closes its breaker.
  void wake(std::int64_t endpoint_id, bool resume);

  /// Session start (this instance leads and streams): these endpoints have rows in
  /// walhook.deliveries; claims, sweeps and new attempts may run.
  void start_session(const std::vector<std::int64_t>& with_rows);
  /// Session end (the stream broke, or leadership is gone): nothing new is claimed, marked or
  /// started; claimed deliveries waiting in memory go back to pending, stream deliveries are
  /// dropped (their transactions were not acknowledged: the next session streams them again).
  /// Attempts in flight are abandoned: their connections closed at once, their outcomes never
  /// written, their breaker effects dropped (issue 19: another instance may take over now).
  void end_session();
  /// Between start_session() and end_session().
  bool active() const { return active_; }
  /// The rows this process owns — claimed or marked 'sending', with an attempt or an outcome
  /// write still on its way — which a reset of stale 'sending' rows must leave alone.
  std::vector<sql::delivery_key> owned() const;

  /// Well below the memory caps (no endpoint's queue full, a quarter of the queue cap and of the
  /// byte budget): room an operator's backfill may use without making the stream wait.
  bool has_headroom() const;
  /// Back-pressure: true while reading the slot must wait — an endpoint in the memory lane that
  /// keeps up has a full queue, or memory is at its cap (deliveries, or max_queued_bytes). An endpoint with a full queue that does
  /// not keep up is moved to the table lane instead (its new work is spilled); one in backlog
  /// mode never holds the stream (claims fill its queue; a full queue spills new work).
  bool must_hold();

  /// One sweep: attempts past the hold bound are recorded 'sending' (their tickets go once that
  /// is durable); a stalled endpoint's queued deliveries and any delivery queued longer than
  /// max_wait_in_memory are spilled, and those endpoints move to the table lane.
  void sweep();
  /// One claim round: claims due rows for endpoints in backlog mode (sized by their capacity),
  /// admits them, and checks which endpoints left backlog mode. Returns when the next round is
  /// due at the latest (a notification may bring it forward).
  boost::asio::awaitable<std::chrono::steady_clock::time_point> claim_round();

  /// Starts the sweep and claim loops in `group` (they stop on total cancellation).
  void start(task_group& group);

  /// A stop has begun while the stream finishes its open transaction: no more claims, and new
  /// deliveries from the stream go straight to PostgreSQL (pending) instead of memory, so reading
  /// to the transaction's Commit never waits for customers and nothing is sent twice.
  void begin_stop();

  /// Graceful stop: queued deliveries go to PostgreSQL; attempts get until `deadline`, then the
  /// transport is shut down (they end 'cancelled' and are written pending).
  boost::asio::awaitable<void> shutdown(std::chrono::steady_clock::time_point deadline);

  const dispatcher_stats& stats() const { return stats_; }
  const delivery::scheduler& scheduler() const { return sched_; }
  const backlog_controller& backlog() const { return backlog_; }
  /// Attempts in flight (running coroutines).
  std::size_t attempts_running() const { return attempts_.size(); }

 private:
  struct running;

  // apply() and the writes it makes (dispatcher.cpp): the only code that writes to the store,
  // releases LSN tickets or queues work in the scheduler.
  void apply(delivery::job j, const admission& a);
  void apply(delivery::job j, const decision& d);
  void queue(delivery::job j);
  void write(delivery::job j, sql::delivery_outcome record);
  /// Lets go of the job's LSN ticket; `handled`: the delivery was handled (delivered, merged
  /// away), not abandoned with its session — the cursors are told (note_handled()).
  void release(delivery::job& j, bool handled = true);
  /// A stream delivery's ticket `t` went (released): the cursors are told, and it is kept while
  /// its transaction has other deliveries outstanding (handled_of()).
  void note_handled(lsn_tracker::ticket t, std::int64_t endpoint_id, const delivery::event& ev);
  /// The endpoint's queue leaves memory: to its outbox cursor if `follow` (a reason of the
  /// endpoint's) and it takes them, else written pending.
  void spill_queue(std::int64_t endpoint_id, std::optional<sys_time> next_at, std::string reason, bool follow = true);
  /// Writes a job that leaves memory without an attempt: `pending`, or dead for a retired endpoint.
  void spill(delivery::job j, sql::delivery_outcome pending);
  /// Offers a delivery leaving memory to its endpoint's outbox cursor; true if taken (when the
  /// endpoint just left the stream, its queued work is offered too).
  bool try_follow(delivery::job& j, std::string_view reason);
  void mark_sending(const std::shared_ptr<running>& r);
  /// /metrics: one attempt's outcome class and duration, globally and for its endpoint. Returns
  /// the class (the outcome log records it too).
  delivery::outcome_class count_attempt(std::int64_t endpoint_id, const delivery::post_result& response,
                                        steady_time::duration took);
  /// The endpoint's counters if it is (still) in the directory; nullptr otherwise.
  endpoint_counters* counters_of(std::int64_t endpoint_id);
  /// Queues the outbox rows of `n` (right behind the write that caused it: the same transaction).
  void publish(const notice& n);
  /// Writes the streamed removals whose endpoints' work is done in memory, in stream order; each
  /// one's ticket goes once that is durable.
  void finish_removals();
  void own(const sql::delivery_key& k);
  void disown(const sql::delivery_key& k);

  // dispatcher_admission.cpp
  void admit_job(delivery::job j);
  void admit_claimed(sql::claimed_delivery c);
  // dispatcher_attempts.cpp
  void dispatch();
  boost::asio::awaitable<void> attempt(std::shared_ptr<running> r);
  /// Signs and sends one event to one endpoint: a POST, or a publish to the endpoint's broker
  /// (subject or routing key rendered from the event; a value it lacks is bad_message).
  boost::asio::awaitable<delivery::post_result> send(std::int64_t id, const endpoint& ep, const delivery::event& ev,
                                                     sys_time sent_at);
  /// The POST with an OAuth2 bearer token for `client` (delivery/oauth2.hpp); on a 401, once more
  /// with a new token. No token: transport_errc::auth_failed.
  boost::asio::awaitable<delivery::post_result> send_with_token(std::int64_t id, delivery::oauth2_client client,
                                                                delivery::http_target target, delivery::http_request req);
  endpoint_load load_of(std::int64_t id) const;
  void finished(std::int64_t endpoint_id, steady_time now, std::optional<steady_time::duration> took);
  // dispatcher_claims.cpp
  boost::asio::awaitable<void> sweep_loop();
  boost::asio::awaitable<void> claim_loop();
  /// Dispatches again when an endpoint held back by its rate limit may start (dispatch() wakes
  /// it when that moment moves earlier).
  boost::asio::awaitable<void> rate_loop();

  boost::asio::any_io_executor executor_;
  dispatcher_options options_;
  endpoint_directory& directory_;
  lsn_tracker& tracker_;
  sql::store& store_;
  delivery::transport& transport_;
  const clock_source& clock_;
  delivery::oauth2_tokens tokens_{clock_};  ///< endpoints' OAuth2 access tokens (migration 014)
  hooks hooks_;
  cursor_hooks cursor_hooks_;
  delivery::event_budget events_;
  delivery::scheduler sched_;
  backlog_controller backlog_;
  notifier notifier_;
  task_group attempts_;
  wake_signal claims_wake_;
  wake_signal rate_wake_;
  steady_time rate_deadline_ = steady_time::max();  ///< when rate_loop wakes next (clock_'s time)
  std::mt19937_64 rng_;
  std::uint64_t next_attempt_id_ = 1;
  std::uint64_t session_ = 0;  ///< counts end_session(): an attempt of an earlier one is abandoned
  std::unordered_map<std::uint64_t, std::shared_ptr<running>> running_;
  /// Open stream transactions → (endpoint, event id) of deliveries handled (note_handled()).
  std::map<lsn_tracker::ticket, std::vector<std::pair<std::int64_t, std::string>>> handled_open_;
  std::unordered_map<std::int64_t, steady_time> last_started_;  ///< per endpoint, its latest attempt's start
  /// Wakes to repeat (endpoint → when, and how many are left): a wake read from the stream can
  /// arrive a moment before the transaction that made its rows pending is visible to the claim
  /// (whose SKIP LOCKED then passes over them), so it is repeated 1 s and 5 s later.
  std::unordered_map<std::int64_t, std::pair<steady_time, int>> rewake_;
  std::map<std::pair<std::int64_t, std::string>, int> owned_;
  dispatcher_stats stats_;
  bool active_ = false;
  bool stopping_ = false;  ///< begin_stop() was called
  struct removal {
    std::vector<std::int64_t> ids;             ///< retired endpoints whose work is finishing
    std::optional<std::int64_t> endpoint_id;   ///< empty: a Truncate
    std::uint32_t xid = 0;
    lsn_tracker::ticket ticket = 0;
  };
  std::vector<removal> removals_;  ///< streamed removals not yet written, in stream order
};

}  // namespace walhook::relay
