#pragma once
// "Did endpoint X get event Y?" answered from the database and a record of attempts: the facts
// read (the outbox row, the routing now, newer states of its merge key, its delivery rows, the
// delivered snapshot of the slot that streams its tenant, outbox cursors and given-up ranges),
// the verdicts of relay/admin/verdict.hpp, and the answer's JSON (docs/api.md, GET
// /api/events/{id}). One code path for the admin API (relay/admin/events.cpp, with this
// walhook's in-memory record) and `walhook event` (relay/cli/event.cpp, without one).

#include "relay/admin/verdict.hpp"
#include "relay/admin/views.hpp"
#include "relay/operations/blocking_db.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace walhook::relay {

/// The event's walhook.outbox row.
struct outbox_event {
  std::string id;
  std::string tenant_id;
  std::string event_type;
  std::optional<std::string> created_at;   ///< RFC 3339 UTC
  std::optional<std::int64_t> endpoint_id; ///< the direct route, if any
};

/// The answer: what the database knows of the event, each shown endpoint's verdict, their URLs.
struct event_answer {
  std::optional<outbox_event> event;          ///< nullopt: the outbox row is gone (retention)
  std::map<std::int64_t, delivery_row> rows;  ///< endpoint → its delivery row of the event
  event_facts facts;
  std::vector<endpoint_verdict> verdicts;     ///< by endpoint id
  std::map<std::int64_t, std::string> urls;   ///< endpoint → its URL, redacted; none if removed since
  std::string note;                           ///< what the record of attempts covers
};

/// Reads the facts of event `event_id` (a UUID: the caller checks), adds the record's part
/// (`recent`: its attempts of the event, oldest first; `window`), and decides. `slot_base` is
/// the base name of walhook's slots (`--slot`, without a shard's `_K_of_N`): the tenant's
/// shard picks its slot; "" finds it in walhook.slot_progress (the one slot of this cluster
/// for that shard, if there is exactly one). nullopt if nothing knows the event (no outbox
/// row, no delivery row, no attempt): a 404. Throws pg_error.
std::optional<event_answer> answer_event(blocking_db& db, const std::string& event_id, const std::string& slot_base,
                                         std::vector<outcome_entry> recent, record_window window);

/// The JSON of GET /api/events/{event_id} (docs/api.md): event, endpoints (each with its url,
/// routing, delivery row, attempts in the record, verdict and reason) and note.
std::string event_json(const event_answer& a);

}  // namespace walhook::relay
