#include "relay/core/endpoint_directory.hpp"

#include <algorithm>
#include <unordered_set>

namespace walhook::relay {

void endpoint_directory::index(const endpoint& e) {
  auto& ids = tenants_[e.tenant_id];
  if (std::find(ids.begin(), ids.end(), e.id) == ids.end()) ids.push_back(e.id);
}

void endpoint_directory::unindex(const endpoint& e) {
  auto t = tenants_.find(e.tenant_id);
  if (t == tenants_.end()) return;
  std::erase(t->second, e.id);
  if (t->second.empty()) tenants_.erase(t);
}

endpoint_change endpoint_directory::apply(endpoint e) {
  endpoint_change c;
  c.id = e.id;
  e.retired = false;  // a row of walhook.endpoints is live (it may reuse a retired one's id)
  bool active = e.status == endpoint_status::active;
  auto old = endpoints_.find(e.id);
  if (old == endpoints_.end()) {
    c.added = true;
    c.activated = active;
  } else {
    bool was_active = old->second.status == endpoint_status::active;
    // The target too: a tenant moved out of "inbox:" loses the SSRF exemption its pooled
    // connections were opened with (rows.hpp, resolve_endpoint).
    c.url_changed = old->second.url != e.url || old->second.target != e.target;
    c.deactivated = was_active && !active;
    c.activated = !was_active && active;
    unindex(old->second);
  }
  // Resumed or enabled by an operator: forget the breaker's streak.
  if (c.activated && !c.added) health_.erase(e.id);
  index(e);
  std::int64_t id = e.id;
  endpoints_[id] = std::move(e);
  return c;
}

std::optional<endpoint_change> endpoint_directory::remove(std::int64_t id) {
  auto it = endpoints_.find(id);
  if (it == endpoints_.end()) return std::nullopt;
  endpoint_change c;
  c.id = id;
  c.removed = true;
  c.deactivated = it->second.status == endpoint_status::active;
  unindex(it->second);
  endpoints_.erase(it);
  health_.erase(id);
  return c;
}

bool endpoint_directory::retire(std::int64_t id) {
  auto it = endpoints_.find(id);
  if (it == endpoints_.end()) return false;
  unindex(it->second);
  it->second.retired = true;
  health_.erase(id);
  return true;
}

std::vector<endpoint_change> endpoint_directory::replace_all(std::vector<endpoint> all) {
  std::vector<endpoint_change> out;
  std::unordered_set<std::int64_t> seen;
  for (auto& e : all) {
    seen.insert(e.id);
    out.push_back(apply(std::move(e)));
  }
  for (auto id : ids())
    if (!seen.contains(id))
      if (auto c = remove(id)) out.push_back(*c);
  return out;
}

const endpoint* endpoint_directory::find(std::int64_t id) const {
  auto it = endpoints_.find(id);
  return it == endpoints_.end() ? nullptr : &it->second;
}

std::vector<std::int64_t> endpoint_directory::ids() const {
  std::vector<std::int64_t> out;
  out.reserve(endpoints_.size());
  for (const auto& [id, e] : endpoints_) out.push_back(id);
  return out;
}

std::vector<std::int64_t> endpoint_directory::route(std::string_view tenant_id, std::string_view event_type,
                                                    std::optional<std::int64_t> direct, std::uint32_t xid,
                                                    std::optional<std::string_view> body,
                                                    filtering* filtering_out) const {
  std::vector<std::int64_t> out;
  if (direct) {
    // Tenants never cross (docs/architecture.md, Invariants, 8), whoever wrote the row.
    if (const endpoint* e = find(*direct); e && !e->retired && e->tenant_id == tenant_id) out.push_back(*direct);
    return out;
  }
  auto t = tenants_.find(std::string(tenant_id));
  if (t == tenants_.end()) return out;
  for (std::int64_t id : t->second) {
    const endpoint* e = find(id);
    if (!e || !e->subscribed(event_type) || !e->exists_for(xid)) continue;
    if (body && e->filter) {
      std::string why;
      const auto r = e->filter->evaluate(*body, &why);
      if (r == payload_filter::result::no_match) {
        if (filtering_out) filtering_out->filtered.push_back(id);
        continue;
      }
      if (r == payload_filter::result::unreadable) {
        if (filtering_out) filtering_out->unreadable.emplace_back(id, std::move(why));
        continue;
      }
    }
    out.push_back(id);
  }
  return out;
}

delivery::breaker_state endpoint_directory::health(std::int64_t id) const {
  auto it = health_.find(id);
  return it == health_.end() ? delivery::breaker_state{} : it->second;
}

void endpoint_directory::set_health(std::int64_t id, const delivery::breaker_state& s) { health_[id] = s; }

bool endpoint_directory::reset_health(std::int64_t id) { return health_.erase(id) > 0; }

}  // namespace walhook::relay
