#include "relay/admin/verdict.hpp"

#include <fmt/format.h>

namespace walhook::relay {

namespace {

/// True if the event is newer than the record's oldest attempt: an attempt of it would still be
/// in the record.
bool in_window(const event_facts& f) {
  if (f.window.kept == 0 || !f.created_at) return false;
  const auto created = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(f.created_at->time_since_epoch()));
  return created > f.window.oldest;
}

std::string unknown_reason(const event_facts& f) {
  const auto& s = f.stream;
  if (s.in_delivered_snapshot == false)
    return fmt::format("no delivery row and no attempt in this walhook's in-memory record, and its transaction (xid "
                       "{}) is not in the delivered snapshot of slot {} yet (recorded about every second while "
                       "streaming): most likely still queued in memory or in flight; or merged into a newer event "
                       "of its merge key",
                       s.xid, s.slot);
  if (!s.in_delivered_snapshot && !s.unavailable.empty())
    return fmt::format("no delivery row and no attempt in this walhook's in-memory record, and walhook's records cannot "
                       "tell: {}",
                       s.unavailable);
  if (s.in_delivered_snapshot == true && !s.doubt.empty())
    return fmt::format("no delivery row and no attempt in this walhook's in-memory record; its transaction (xid {}) is "
                       "in the delivered snapshot of slot {}, but {}",
                       s.xid, s.slot, s.doubt);
  return std::string("no delivery row and no attempt in this walhook's in-memory record: ") +
         (in_window(f) ? "it is newer than the record's oldest entry, so most likely still queued in memory; "
                         "or merged into a newer event of its merge key, or sent by another walhook instance"
                       : "still queued in memory, merged into a newer event of its merge key, or delivered "
                         "before the in-memory record began (a first-try success leaves no row with --record "
                         "failed; the record is lost at restart)");
}

/// How walhook's records show the event handled for a routed endpoint without a row (nullopt:
/// they do not): its outbox cursor covers it, or — no cursor — the delivered snapshot shows it
/// without doubt. Handled means delivered or written to walhook.deliveries, and there is no row.
std::optional<std::string> handled_without_row(const event_facts& f, std::int64_t endpoint_id) {
  if (auto c = f.cursors.find(endpoint_id); c != f.cursors.end()) {
    if (c->second.covers != true) return std::nullopt;
    return fmt::format("the outbox cursor it follows since {} covers its transaction (xid {})", c->second.since,
                       f.stream.xid);
  }
  if (f.stream.in_delivered_snapshot != true || !f.stream.doubt.empty()) return std::nullopt;
  return fmt::format("its transaction (xid {}) is in the delivered snapshot of slot {}, where every transaction was "
                     "delivered or written to walhook.deliveries",
                     f.stream.xid, f.stream.slot);
}

/// What walhook's records say for a routed endpoint without a row or an attempt in memory:
/// given up with its cursor's range, owed by its cursor, or inferred delivered. false: nothing.
bool from_records(endpoint_verdict& v, const event_facts& f) {
  const auto id = v.endpoint_id;
  if (!v.routed) return false;
  if (auto d = f.dead_ranges.find(id); d != f.dead_ranges.end()) {
    v.verdict = "dead";
    v.reason = fmt::format("ended dead without a row of its own: the endpoint's outbox cursor was given up at {} with "
                           "the event in its range (walhook.dead_ranges id {}: {})",
                           d->second.at, d->second.id, d->second.reason);
    return true;
  }
  if (auto c = f.cursors.find(id); c != f.cursors.end() && c->second.covers == false) {
    v.verdict = "pending";
    v.reason = fmt::format("owed by its outbox cursor: the endpoint follows walhook.outbox since {} (it was down, "
                           "paused or behind) and gets the event when it can take it",
                           c->second.since);
    return true;
  }
  const auto handled = handled_without_row(f, id);
  if (!handled) return false;
  if (auto n = f.newer_states.find(id); n != f.newer_states.end()) {
    v.verdict = "unknown";
    v.reason = fmt::format("delivered, or merged into a newer event, {}, of the same merge key (only the newest state "
                           "of a merge key is sent): {}, and without a row nothing tells which",
                           n->second, *handled);
    return true;
  }
  v.verdict = "delivered";
  v.reason = fmt::format("inferred from walhook's records: no delivery row (a first-try success leaves none with "
                         "--record failed), routed to it, and {}",
                         *handled);
  return true;
}

}  // namespace

endpoint_verdict verdict_for(std::int64_t endpoint_id, const event_facts& facts, const outcome_entry* last) {
  endpoint_verdict v{.endpoint_id = endpoint_id, .routed = false, .routed_reason = no_match_reason,
                     .verdict = "unknown", .reason = std::nullopt};
  bool added_after = false;
  bool filtered = false;
  for (const auto& r : facts.routes) {
    if (r.endpoint_id != endpoint_id) continue;
    added_after = r.added_after;
    filtered = !added_after && r.filtered;
    v.routed = !r.added_after && !filtered;
    v.routed_reason = r.added_after ? std::optional<std::string>("the endpoint was added after the event (created " +
                                                                 r.endpoint_created_at + "): it never gets it")
                      : filtered    ? std::optional<std::string>("the endpoint's payload filter does not match it: " +
                                                                 *r.filtered)
                                    : std::nullopt;
  }
  if (auto row = facts.row_status.find(endpoint_id); row != facts.row_status.end()) {
    v.verdict = row->second == "sending" ? "in_flight" : row->second;
  } else if (last) {
    v.verdict = last->result == "retry" ? "pending" : last->result;
  } else if (added_after) {
    v.verdict = "not_routed";
    v.reason = v.routed_reason;
  } else if (filtered) {
    v.verdict = "filtered";
    v.reason = v.routed_reason;
  } else if (auto m = facts.merged_into.find(endpoint_id); m != facts.merged_into.end()) {
    v.verdict = "merged";
    v.reason = fmt::format("merged into a newer event, {}, of the same merge key ({} for this endpoint): only the "
                           "newest state of a merge key is sent",
                           m->second.event_id, m->second.status);
  } else if (!from_records(v, facts)) {
    v.reason = unknown_reason(facts);
  }
  return v;
}

std::optional<std::vector<endpoint_verdict>> event_verdicts(const event_facts& facts) {
  std::map<std::int64_t, const outcome_entry*> last;  // by id: the answer's order
  for (const auto& r : facts.routes) last.emplace(r.endpoint_id, nullptr);
  for (const auto& [id, status] : facts.row_status) last.emplace(id, nullptr);
  for (const auto& e : facts.recent) last[e.endpoint_id] = &e;  // oldest first: the newest stays
  if (!facts.outbox_row && last.empty()) return std::nullopt;
  std::vector<endpoint_verdict> out;
  out.reserve(last.size());
  for (const auto& [id, newest] : last) out.push_back(verdict_for(id, facts, newest));
  return out;
}

std::string record_note(const record_window& window) {
  return fmt::format("first-try successes leave no row with --record failed: they are shown from the in-memory "
                     "record of this walhook (its last {} attempts{}, lost at restart), or inferred from walhook's "
                     "delivered snapshot once it covers them",
                     window.kept, window.kept ? " since " + format_iso8601(window.oldest) : std::string());
}

}  // namespace walhook::relay
