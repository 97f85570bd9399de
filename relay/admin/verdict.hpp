#pragma once
// "Did endpoint X get event Y?" as a pure decision (GET /api/events/{id}, docs/api.md): which
// endpoints the answer shows, whether the routing sends the event there, and the verdict with
// its reason. The facts are plain values read by relay/admin/events.cpp (the outbox row, the
// routing, newer states of the merge key, delivery rows) and taken from the engine (the
// in-memory record of attempts); this decides, the events route writes the JSON. Pure: no I/O,
// no clock (the record's window is a parameter).

#include "common/time.hpp"
#include "relay/core/outcome_log.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace walhook::relay {

/// An endpoint the event's tenant and type (or its direct route) match now.
struct route_match {
  std::int64_t endpoint_id = 0;
  bool added_after = false;        ///< the endpoint was created after the event: the stream never routed it there
  std::string endpoint_created_at; ///< RFC 3339 UTC, for the reason
  /// The endpoint's payload filter (its JSON text) does not match the event: never routed there.
  std::optional<std::string> filtered{};
};

/// A newer event of the same merge key with a delivery row (pending, sending or delivered) for
/// an endpoint: the event was merged into it in memory and never got a row of its own.
struct merge_successor {
  std::string event_id;
  std::string status;  ///< that row's status
};

/// What walhook's own records say of the event's transaction (walhook.outbox.xid), for a
/// first-try success that left no row: the delivered snapshot of the slot that streams the
/// event's tenant (walhook.slot_progress; docs/decisions.md, "Slot loss") holds every
/// transaction walhook has handled — delivered, or written to walhook.deliveries.
struct stream_facts {
  std::string xid;                       ///< walhook.outbox.xid, "" for a row from before schema version 5
  std::string slot;                      ///< the slot that streams the event's tenant (its shard's)
  /// The xid is visible in that slot's delivered snapshot (one recorded by this cluster);
  /// nullopt: no snapshot recorded, or a row from before schema version 5 (no xid).
  std::optional<bool> in_delivered_snapshot;
  /// Why the snapshot does not settle it although it shows the xid, "" if it does: a backfill
  /// of the slot still running, or a slot incident that could not be backfilled.
  std::string doubt;
  /// Why there is no snapshot to ask although the event has an xid, "" otherwise: no slot found
  /// for the tenant's shard, or none recorded for the slot named.
  std::string unavailable;
};

/// An endpoint that follows walhook.outbox by cursor (walhook.endpoint_cursors): whether its
/// cursor covers the event (handled for it: delivered or written) or still owes it.
struct cursor_fact {
  std::optional<bool> covers;  ///< nullopt: no xid to tell (a row from before schema version 5)
  std::string since;           ///< RFC 3339 UTC: when it left the stream
};

/// A range of an endpoint's owed events ended dead at once when its cursor was given up
/// (walhook.dead_ranges), the event among them.
struct dead_range_fact {
  std::int64_t id = 0;
  std::string reason;
  std::string at;  ///< RFC 3339 UTC
};

/// What this walhook's in-memory record of attempts (relay/core/outcome_log.hpp) covers.
struct record_window {
  std::size_t kept = 0;                             ///< attempts kept now
  std::chrono::system_clock::time_point oldest{};   ///< the oldest kept (meaningless if kept is 0)
};

/// Everything known about one event, as values.
struct event_facts {
  bool outbox_row = false;                      ///< walhook.outbox still has the event
  std::optional<sys_micros> created_at;         ///< the event's created_at, if the row is there and it parses
  std::vector<route_match> routes;              ///< the endpoints the routing matches now
  std::map<std::int64_t, merge_successor> merged_into;  ///< endpoint → the newer state it has a row for
  std::map<std::int64_t, std::string> row_status;       ///< endpoint → the status of its delivery row of the event
  std::vector<outcome_entry> recent;            ///< the record's attempts of the event, oldest first
  record_window window;
  stream_facts stream;                          ///< the delivered snapshot's word on it
  std::map<std::int64_t, cursor_fact> cursors;          ///< endpoint → its outbox cursor, if it follows one
  std::map<std::int64_t, dead_range_fact> dead_ranges;  ///< endpoint → the given-up range that holds the event
  /// endpoint → a newer state of the event's merge key routed there (inserted after it): the
  /// event may have been merged into it without a row.
  std::map<std::int64_t, std::string> newer_states;
};

/// One endpoint's line of the answer.
struct endpoint_verdict {
  std::int64_t endpoint_id = 0;
  bool routed = false;                       ///< the routing sends the event there
  std::optional<std::string> routed_reason;  ///< why not, if not
  std::string verdict;                       ///< delivered | pending | dead | in_flight | not_routed | filtered | merged | unknown
  std::optional<std::string> reason;         ///< why, and how it was inferred, when neither a row nor an attempt decides
  bool operator==(const endpoint_verdict&) const = default;
};

/// The reason for an endpoint that does not match the event now (tenant, types, direct route).
inline constexpr const char* no_match_reason = "its tenant, event types or direct route do not match it now";

/// The verdict for one endpoint, in order: its delivery row's status (sending → in_flight);
/// else the newest attempt's result (retry → pending); else not_routed if it was added after
/// the event; else merged if a newer state of the merge key has a row there; else dead if its
/// cursor was given up with the event in the range; else, routed: pending if its outbox cursor
/// owes it, delivered if its cursor covers it or (no cursor) the delivered snapshot shows it
/// handled without doubt — inferred, the reason says from what — unless a newer state of its
/// merge key may have replaced it (then unknown); else unknown, never pending (a promise),
/// with what may have happened. `last` is the newest attempt of the event to that endpoint in
/// the record, if any. An endpoint whose payload filter does not match the event is filtered
/// (after its row or attempt, which a filter set later does not undo).
endpoint_verdict verdict_for(std::int64_t endpoint_id, const event_facts& facts, const outcome_entry* last);

/// The answer's endpoints by id: those the routing matches now, and any other with a delivery
/// row or an attempt in the record (routed false: no_match_reason), each with its verdict.
/// nullopt if nothing knows the event (no outbox row, no row, no attempt): 404.
std::optional<std::vector<endpoint_verdict>> event_verdicts(const event_facts& facts);

/// The answer's note: what the in-memory record covers.
std::string record_note(const record_window& window);

}  // namespace walhook::relay
