#pragma once
// Private to the dispatcher's own files (relay/engine/dispatcher*.cpp, one class in four files):
// the record of an attempt in flight, and the conversions between jobs and rows of
// walhook.deliveries that more than one of them makes. Nothing else includes it.

#include "delivery/trace_context.hpp"
#include "relay/engine/dispatcher.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace walhook::relay {

/// An attempt in flight. The sweep may mark it 'sending' meanwhile: whoever first takes the job's
/// ticket (the mark once durable, or the attempt's end) releases it, exactly once.
struct dispatcher::running {
  std::uint64_t id = 0;
  delivery::job j;
  steady_time started{};
  sys_time started_at{};
  bool marked = false;
  std::uint64_t session = 0;  ///< the dispatcher's session it started in (end_session abandons it)
};

namespace dispatcher_detail {

/// Failed attempts in a row after which an endpoint's failed deliveries are owed by its outbox
/// cursor rather than written as retry rows (relay/engine/cursors.hpp).
inline constexpr int failures_to_follow = 5;

/// The row of walhook.deliveries a job is (endpoint, event).
inline sql::delivery_key key_of(const delivery::job& j) { return {j.endpoint_id, j.ev->id}; }

/// A delivery known only in memory, as a row of walhook.deliveries with this outcome.
inline sql::upsert_delivery upsert_of(const delivery::job& j, sql::delivery_outcome outcome) {
  sql::upsert_delivery w;
  w.endpoint_id = j.endpoint_id;
  w.event_id = j.ev->id;
  w.aggregate_id = j.ev->aggregate_id;
  w.merge_key = j.ev->merge_key;
  w.event_created_at = j.ev->created_at;
  w.commit_lsn = j.ev->commit_lsn;
  w.outcome = std::move(outcome);
  return w;
}

/// The identity of a claimed row's event (its payload and body are the caller's to add).
/// The event's trace id for log lines (its traceparent's, migration 012), "-" if it has none.
inline std::string trace_id_of(const delivery::event& ev) {
  auto p = ev.traceparent ? delivery::parse_traceparent(*ev.traceparent) : std::nullopt;
  return p ? p->trace_id : std::string("-");
}

inline delivery::event event_of(const sql::claimed_delivery& c) {
  delivery::event ev;
  ev.id = c.event_id;
  ev.merge_key = c.merge_key;
  ev.aggregate_id = c.aggregate_id;
  ev.aggregate_type = c.aggregate_type;
  ev.traceparent = c.traceparent;
  ev.commit_lsn = c.commit_lsn;
  return ev;
}

/// A claimed row as a job, enqueued at `now`.
inline delivery::job job_of(const sql::claimed_delivery& c, std::shared_ptr<const delivery::event> ev,
                            steady_time now) {
  delivery::job j;
  j.ev = std::move(ev);
  j.endpoint_id = c.endpoint_id;
  j.row_id = c.row_id;
  j.attempts = c.attempts;
  j.deferrals = c.deferrals;
  j.enqueued_at = now;
  return j;
}

}  // namespace dispatcher_detail
}  // namespace walhook::relay
