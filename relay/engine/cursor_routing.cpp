// What an outbox cursor owes its endpoint (relay/engine/cursors.hpp): the events it reads back
// are routed as the stream would have routed them when they committed — with the event types and
// filter the endpoint had then (relay/core/routing_epoch.hpp) — less those of a transaction the
// stream had sent part of before the rest was taken.
#include "relay/engine/cursors.hpp"

#include "common/log.hpp"
#include "relay/core/endpoint_directory.hpp"
#include "relay/engine/recovery.hpp"

#include <algorithm>

namespace walhook::relay {

dispatcher::cursor_hooks outbox_cursors::hooks() {
  return {[this](delivery::job& j) { return skips(j); },
          [this](delivery::job& j, std::string_view reason) { return follow(j, reason); },
          [this](std::int64_t id, const delivery::event& ev) { handled(id, ev); }};
}

void outbox_cursors::handled(std::int64_t endpoint_id, const delivery::event& ev) {
  auto it = states_.find(endpoint_id);
  if (it == states_.end() || it->second.ph == phase::rejoined) return;
  auto& s = it->second;
  if (s.write_issued && covers(s, ev.xid)) return;  // not read back
  s.sent.insert(ev.id);
}

bool outbox_cursors::owed(const state& s, std::int64_t endpoint_id, const delivery::event& ev, std::uint32_t xid,
                          std::optional<std::string_view> body, std::string& why) const {
  const auto epoch = std::find_if(s.epochs.begin(), s.epochs.end(), [&](const routing_epoch& e) { return e.holds(xid); });
  if (epoch != s.epochs.end() && !ev.endpoint_id) {  // committed before a change: routed as then
    const endpoint* ep = directory_.find(endpoint_id);
    return ep && ep->exists_for(xid) && epoch->routes(ev.type, body, &why);
  }
  endpoint_directory::filtering filtering;
  const auto routes = directory_.route(ev.tenant_id, ev.type, ev.endpoint_id, xid, body, &filtering);
  bool routed = std::find(routes.begin(), routes.end(), endpoint_id) != routes.end();
  for (const auto& [id, reason] : filtering.unreadable)
    if (id == endpoint_id) {  // as the stream does: dead with the reason
      routed = true;
      why = reason;
    }
  return routed;
}

std::vector<routing_epoch> outbox_cursors::take_recent_routing(std::int64_t endpoint_id) {
  auto it = recent_routing_.find(endpoint_id);
  if (it == recent_routing_.end()) return {};
  auto out = std::move(it->second);
  recent_routing_.erase(it);
  return out;
}

void outbox_cursors::routing_changed(const endpoint& before) {
  auto* found = find(before.id);
  if (found && found->ph == phase::rejoined) return;  // a rejoin's last window was read already
  // The transactions committed before the change: those a snapshot recorded before the last
  // streamed Commit shows, and the tenant's streamed since.
  auto text = recovery_.snapshot_before(streamed_until_);
  auto snap = text ? pg_snapshot::parse(*text) : std::nullopt;
  if (!snap) {
    log::error("cursor.routing_unknown", {{"endpoint_id", before.id},
                                          {"note", "no snapshot to bound the change: the new routing decides"}});
    return;
  }
  std::vector<std::uint64_t> also;
  for (const auto& [xid, tenant] : streamed_)
    if ((tenant.empty() || tenant == before.tenant_id) && !snap->visible(snap->widen(xid))) also.push_back(snap->widen(xid));
  auto epoch = routing_epoch::of(before, *snap, *text, std::move(also));
  if (!found) {
    // No cursor yet: its deliveries in memory were routed with `before`. Kept until the delivered
    // snapshot shows them all handled, for a cursor it may enter meanwhile.
    auto& recent = recent_routing_[before.id];
    if (const auto& d = recovery_.last_delivered())
      if (auto delivered = pg_snapshot::parse(*d))
        std::erase_if(recent, [&](const routing_epoch& e) { return e.shown_by(*delivered); });
    if (recent.size() >= 1024) {  // bounded against a script changing it in a loop: never reached by hand
      log::warn("cursor.routing_dropped", {{"endpoint_id", before.id},
                                           {"note", "over 1024 routing changes not yet handled: the oldest is forgotten"}});
      recent.erase(recent.begin());
    }
    recent.push_back(std::move(epoch));
    return;
  }
  auto& s = *found;
  s.epochs.push_back(std::move(epoch));
  log::info("cursor.routing_kept", {{"endpoint_id", before.id}, {"epochs", static_cast<std::uint64_t>(s.epochs.size())},
                                    {"note", "events committed before the change are read back with the routing they had"}});
  if (s.write_issued) {
    s.dirty = true;
    if (s.durable) write_cursor(before.id, s);
  }
}

}  // namespace walhook::relay
