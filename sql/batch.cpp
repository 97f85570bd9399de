#include "sql/batch.hpp"

#include "common/json_writer.hpp"
#include "sql/statements.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace walhook::sql {

std::string_view to_string(delivery_status s) {
  switch (s) {
    case delivery_status::pending: return "pending";
    case delivery_status::sending: return "sending";
    case delivery_status::delivered: return "delivered";
    case delivery_status::dead: return "dead";
  }
  return "pending";
}

namespace {

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

void put_outcome(json_writer& j, const delivery_outcome& o) {
  j.field("status", to_string(o.status)).field("attempts", o.attempts);
  j.key("next_attempt_in_ms");
  if (o.next_attempt_in) j.number(static_cast<std::int64_t>(std::max<std::int64_t>(0, o.next_attempt_in->count())));
  else j.null();
  put_time(j, "last_attempt_at", o.last_attempt_at);
  put_int(j, "last_status", o.last_status);
  j.field("last_error", o.last_error);
  j.field("deferrals", static_cast<std::int64_t>(o.deferrals));
}

bool is_mergeable(const upsert_delivery& u) { return u.merge_key && u.outcome.status == delivery_status::pending; }

}  // namespace

std::vector<pg::statement> build_batch(std::span<const write> writes) {
  json_writer upserts, updates, health, published;
  upserts.begin_array();
  updates.begin_array();
  health.begin_array();
  published.begin_array();
  bool any_upsert = false, any_update = false, any_published = false;
  // The last health write per endpoint, the highest progress per (slot, system, timeline).
  std::map<std::int64_t, const health_write*> latest_health;
  std::map<std::tuple<std::string, std::string, int>, std::pair<lsn, std::optional<std::string>>> latest_progress;
  std::vector<const removal_streamed*> removals;
  std::vector<const write*> cursors;  // in queue order, after the deliveries they cover
  // Merge within the batch: of several pending upserts with one (endpoint, merge key), only the
  // newest event is written — by commit LSN, since failures of attempts that ran at the same
  // time are queued in the order the attempts ended, not in commit order; queue order breaks ties.
  std::map<std::pair<std::int64_t, std::string>, std::size_t> newest_by_key;
  for (std::size_t i = 0; i < writes.size(); ++i) {
    const auto* u = std::get_if<upsert_delivery>(&writes[i]);
    if (!u || !is_mergeable(*u)) continue;
    auto [it, fresh] = newest_by_key.try_emplace({u->endpoint_id, *u->merge_key}, i);
    if (fresh) continue;
    const auto& held = std::get<upsert_delivery>(writes[it->second]);
    if (!u->commit_lsn.valid() || !held.commit_lsn.valid() || u->commit_lsn >= held.commit_lsn) it->second = i;
  }

  for (std::size_t i = 0; i < writes.size(); ++i) {
    const auto ord = static_cast<std::int64_t>(i);
    if (const auto* u = std::get_if<upsert_delivery>(&writes[i])) {
      if (is_mergeable(*u) && newest_by_key[{u->endpoint_id, *u->merge_key}] != i) continue;
      any_upsert = true;
      upserts.begin_object()
          .field("ord", ord)
          .field("endpoint_id", u->endpoint_id)
          .field("event_id", u->event_id)
          .field("aggregate_id", u->aggregate_id)
          .field("merge_key", u->merge_key)
          .field("event_created_at", u->event_created_at);
      upserts.key("commit_lsn");
      if (u->commit_lsn.valid()) upserts.string(u->commit_lsn.to_string());
      else upserts.null();
      put_outcome(upserts, u->outcome);
      upserts.end_object();
    } else if (const auto* d = std::get_if<update_delivery>(&writes[i])) {
      any_update = true;
      updates.begin_object().field("ord", ord);
      updates.key("id");
      if (d->row_id) {
        updates.number(*d->row_id);
        updates.key("endpoint_id").null().key("event_id").null();
      } else {
        updates.null();
        updates.field("endpoint_id", d->key.endpoint_id).field("event_id", d->key.event_id);
      }
      put_outcome(updates, d->outcome);
      updates.end_object();
    } else if (const auto* h = std::get_if<health_write>(&writes[i])) {
      latest_health[h->endpoint_id] = h;
    } else if (const auto* p = std::get_if<progress_write>(&writes[i])) {
      auto& [position, snapshot] = latest_progress[{p->slot, p->system_id, p->timeline}];
      position = std::max(position, p->confirmed_lsn);
      if (p->delivered_snapshot) snapshot = p->delivered_snapshot;  // queued later: taken later
    } else if (const auto* r = std::get_if<removal_streamed>(&writes[i])) {
      removals.push_back(r);
    } else if (const auto* e = std::get_if<publish_event>(&writes[i])) {
      any_published = true;
      published.begin_object()
          .field("ord", ord)
          .field("tenant_id", e->tenant_id)
          .field("event_type", e->event_type)
          .field("aggregate_id", e->aggregate_id)
          .field("merge_key", e->merge_key);
      published.key("payload").raw(e->payload);
      published.key("endpoint_id");
      if (e->endpoint_id) published.number(*e->endpoint_id);
      else published.null();
      published.end_object();
    } else if (std::holds_alternative<cursor_write>(writes[i]) || std::holds_alternative<cursor_delete>(writes[i])) {
      cursors.push_back(&writes[i]);
    }
  }
  std::string disable = "{";
  for (const auto& [id, h] : latest_health) {
    health.begin_object().field("endpoint_id", h->endpoint_id).field("consecutive_failures", h->consecutive_failures);
    put_time(health, "first_failure_at", h->first_failure_at);
    put_time(health, "last_failure_at", h->last_failure_at);
    put_time(health, "last_success_at", h->last_success_at);
    health.key("paused_for_ms");
    if (h->paused_for) health.number(static_cast<std::int64_t>(std::max<std::int64_t>(0, h->paused_for->count())));
    else health.null();
    health.field("probe_rounds", h->probe_rounds);
    put_int(health, "last_status", h->last_status);
    health.field("last_error", h->last_error).field("disable", h->disable).field("disabled_reason", h->disabled_reason);
    health.end_object();
    if (h->disable) {
      if (disable.size() > 1) disable += ',';
      disable += std::to_string(h->endpoint_id);
    }
  }
  disable += '}';
  upserts.end_array();
  updates.end_array();
  health.end_array();
  published.end_array();

  // One implicit transaction: everything up to the pipeline's sync commits or none of it does.
  std::vector<pg::statement> out;
  if (any_upsert) out.push_back({std::string(statements::upsert_deliveries), {upserts.take()}});
  if (any_update) out.push_back({std::string(statements::update_deliveries), {updates.take()}});
  if (!latest_health.empty()) out.push_back({std::string(statements::write_health), {health.take()}});
  if (disable.size() > 2) out.push_back({std::string(statements::disable_endpoints), {disable}});
  if (any_published) out.push_back({std::string(statements::publish_events), {published.take()}});
  for (const auto* r : removals) {
    auto id = r->endpoint_id ? std::optional<std::string>(std::to_string(*r->endpoint_id)) : std::nullopt;
    out.push_back({std::string(statements::await_removal), {id}});
    out.push_back({std::string(statements::forget_removed_endpoint), {id, std::to_string(r->xid)}});
  }
  for (const auto* w : cursors) {
    if (const auto* c = std::get_if<cursor_write>(w)) {
      std::string also = "{";
      for (auto x : c->also) {
        if (also.size() > 1) also += ',';
        also += std::to_string(x);
      }
      also += '}';
      out.push_back({std::string(statements::write_cursor),
                     {std::to_string(c->endpoint_id), c->covered, also, c->window_snapshot,
                      std::to_string(c->window_after), c->reason, std::to_string(c->drained), c->tenant_id, c->routing}});
    } else {
      out.push_back({std::string(statements::delete_cursor), {std::to_string(std::get<cursor_delete>(*w).endpoint_id)}});
    }
  }
  for (const auto& [key, progress] : latest_progress)
    out.push_back({std::string(statements::record_progress),
                   {std::get<0>(key), std::get<1>(key), progress.first.to_string(), progress.second,
                    std::to_string(std::get<2>(key))}});
  return out;
}

}  // namespace walhook::sql
