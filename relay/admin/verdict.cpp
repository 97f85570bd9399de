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
  return std::string("no delivery row and no attempt in this walhook's in-memory record: ") +
         (in_window(f) ? "it is newer than the record's oldest entry, so most likely still queued in memory; "
                         "or merged into a newer event of its merge key, or sent by another walhook instance"
                       : "still queued in memory, merged into a newer event of its merge key, or delivered "
                         "before the in-memory record began (a first-try success leaves no row with --record "
                         "failed; the record is lost at restart)");
}

}  // namespace

endpoint_verdict verdict_for(std::int64_t endpoint_id, const event_facts& facts, const outcome_entry* last) {
  endpoint_verdict v{.endpoint_id = endpoint_id, .routed = false, .routed_reason = no_match_reason,
                     .verdict = "unknown", .reason = std::nullopt};
  bool added_after = false;
  for (const auto& r : facts.routes) {
    if (r.endpoint_id != endpoint_id) continue;
    added_after = r.added_after;
    v.routed = !r.added_after;
    v.routed_reason = r.added_after ? std::optional<std::string>("the endpoint was added after the event (created " +
                                                                 r.endpoint_created_at + "): it never gets it")
                                    : std::nullopt;
  }
  if (auto row = facts.row_status.find(endpoint_id); row != facts.row_status.end()) {
    v.verdict = row->second == "sending" ? "in_flight" : row->second;
  } else if (last) {
    v.verdict = last->result == "retry" ? "pending" : last->result;
  } else if (added_after) {
    v.verdict = "not_routed";
    v.reason = v.routed_reason;
  } else if (auto m = facts.merged_into.find(endpoint_id); m != facts.merged_into.end()) {
    v.verdict = "merged";
    v.reason = fmt::format("merged into a newer event, {}, of the same merge key ({} for this endpoint): only the "
                           "newest state of a merge key is sent",
                           m->second.event_id, m->second.status);
  } else {
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
  return fmt::format("first-try successes leave no row with --record failed; the in-memory record of this "
                     "walhook holds its last {} attempts{} and is lost at restart",
                     window.kept, window.kept ? " since " + format_iso8601(window.oldest) : std::string());
}

}  // namespace walhook::relay
