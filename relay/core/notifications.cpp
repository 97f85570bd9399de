#include "relay/core/notifications.hpp"

#include "common/json_writer.hpp"
#include "common/time.hpp"
#include "delivery/url.hpp"

#include <algorithm>

namespace walhook::relay {

bool is_notification_type(std::string_view event_type) { return event_type.starts_with("walhook."); }

namespace {

notice about(std::string_view type, const endpoint& ep) {
  notice n;
  n.type = std::string(type);
  n.endpoint_id = ep.id;
  n.tenant_id = ep.tenant_id;
  n.url = delivery::redact_url(ep.url);
  n.contact_endpoint_id = ep.contact_endpoint_id;
  return n;
}

notice about(std::string_view type, const endpoint& ep, const decision& d) {
  notice n = about(type, ep);
  n.last_status = d.last_status;
  n.last_error = d.last_error;
  return n;
}

bool passed(const std::optional<steady_time>& last, steady_time now, std::chrono::seconds interval) {
  return !last || now - *last >= interval;
}

/// Text a customer's server chose (an error message) as it may travel in a jsonb payload: no NUL
/// (jsonb refuses \u0000), and bounded.
std::string payload_text(std::string_view s) {
  std::string out;
  out.reserve(std::min<std::size_t>(s.size(), 1000));
  for (char c : s.substr(0, 1000))
    if (c != '\0') out += c;
  return out;
}

void put_time(json_writer& j, std::string_view key, const std::optional<sys_time>& t) {
  j.key(key);
  if (t) j.string(format_iso8601(*t));
  else j.null();
}

/// A digest's `data`: what the budget held back in its minute.
std::string digest_payload(const notice& n) {
  json_writer j;
  std::int64_t total = 0;
  for (const auto& [type, count] : n.held_back) total += count;
  j.begin_object().field("interval_s", std::int64_t{60}).field("sent", n.sent);
  j.field("held_back", total).key("by_type").begin_object();
  for (const auto& [type, count] : n.held_back) j.field(type, count);
  j.end_object().field("endpoints", n.endpoints).key("endpoint_ids").begin_array();
  for (auto id : n.sample_endpoint_ids) j.number(id);
  j.end_array().end_object();
  return j.take();
}

std::string payload_of(const notice& n) {
  namespace t = notification_types;
  json_writer j;
  j.begin_object().field("endpoint_id", n.endpoint_id).field("tenant_id", n.tenant_id).field("url", n.url);
  j.key("last_status");
  if (n.last_status) j.number(static_cast<std::int64_t>(*n.last_status));
  else j.null();
  j.key("last_error");
  if (n.last_error) j.string(payload_text(*n.last_error));
  else j.null();
  if (n.type == t::failing || n.type == t::paused || n.type == t::disabled) {
    j.field("consecutive_failures", n.consecutive_failures);
    put_time(j, "failing_since", n.failing_since);
  }
  if (n.type == t::paused) put_time(j, "paused_until", n.paused_until);
  if (n.type == t::dead) j.field("dead_count", n.dead_count).field("last_event_id", n.last_event_id);
  if (n.type == t::paused || n.type == t::disabled || n.type == t::dead) {
    j.key("reason");
    if (n.reason) j.string(payload_text(*n.reason));
    else j.null();
  }
  j.end_object();
  return j.take();
}

}  // namespace

notifier::attempt_notices notifier::after_attempt(const endpoint& ep, const delivery::breaker_state& before,
                                                  const decision& d, bool disabling, bool own_event, steady_time now) {
  namespace t = notification_types;
  attempt_notices out;
  auto& st = state_[ep.id];
  std::vector<notice> found;
  auto failure_fields = [&](notice& n) {
    n.consecutive_failures = d.breaker.consecutive_failures;
    n.failing_since = d.breaker.first_failure_at;
  };
  if (d.result == verdict::delivered) {
    const bool streak = before.consecutive_failures > 0 || before.paused_until.has_value();
    // An announced streak ends with news whichever delivery ends it (a success cannot loop); so
    // does a pause this process did not announce (it began before a restart). It goes where
    // the streak's announcements went.
    if (streak && (st.announced || (!own_event && before.paused_until && !st.last_paused))) {
      found.push_back(about(t::recovered, ep, d));
      found.back().to_contact = !st.announced || st.contact_told;
    }
    st.announced = st.contact_told = false;
    for (auto& n : found) spend(std::move(n), now, out.notices);
    return out;
  }
  // A walhook.* event failing is the contact (or operator) endpoint itself failing on walhook's
  // news: its pause or disable is announced to the operator tenant only, never to a contact.
  if (disabling) {
    notice n = about(t::disabled, ep, d);
    failure_fields(n);
    n.reason = d.disable;
    n.to_contact = !own_event;
    found.push_back(std::move(n));
  }
  // A new streak: consecutive failures went 0 → 1 (a 410 or a dead verdict leaves the breaker).
  // The log line and the notice keep separate clocks: a failing delivery of walhook's own event
  // is logged, and must not silence the next streak's notice.
  if (before.consecutive_failures == 0 && d.breaker.consecutive_failures == 1) {
    st.announced = st.contact_told = false;
    if (passed(st.last_failing_log, now, policy_.failing_interval)) {
      st.last_failing_log = now;
      out.log_failing = true;
    }
    if (!own_event && passed(st.last_failing, now, policy_.failing_interval)) {
      st.last_failing = now;
      notice n = about(t::failing, ep, d);
      failure_fields(n);
      found.push_back(std::move(n));
      st.announced = st.contact_told = true;
    }
  }
  if (!disabling && d.paused_until && !before.paused_until && passed(st.last_paused, now, policy_.paused_interval)) {
    st.last_paused = now;
    notice n = about(t::paused, ep, d);
    failure_fields(n);
    n.paused_until = d.paused_until;
    n.reason = d.retry_after ? "Retry-After" : "circuit breaker";
    n.to_contact = !own_event;
    found.push_back(std::move(n));
    st.announced = true;
    st.contact_told = st.contact_told || !own_event;
  }
  for (auto& n : found) spend(std::move(n), now, out.notices);
  return out;
}

std::vector<notice> notifier::dead(const endpoint& ep, const std::string& event_id, const sql::delivery_outcome& record,
                                   bool own_event, steady_time now) {
  std::vector<notice> out;
  if (own_event) return out;
  auto& st = state_[ep.id];
  std::int64_t earlier = st.dead_counted ? st.dead_counted->dead_count : 0;
  notice n = about(notification_types::dead, ep);
  n.last_status = record.last_status;
  n.last_error = record.last_error;
  n.reason = record.last_error;
  n.last_event_id = event_id;
  n.dead_count = earlier + 1;
  if (passed(st.last_dead, now, policy_.dead_interval)) {
    st.last_dead = now;
    st.dead_counted.reset();
    spend(std::move(n), now, out);
  } else {
    st.dead_counted = std::move(n);
  }
  return out;
}

std::vector<notice> notifier::due(steady_time now, bool all) {
  std::vector<notice> out, counted;
  roll(now, false, out);
  for (auto& [id, st] : state_) {
    if (!st.dead_counted || (!all && !passed(st.last_dead, now, policy_.dead_interval))) continue;
    st.last_dead = now;
    counted.push_back(std::move(*st.dead_counted));
    st.dead_counted.reset();
  }
  // Endpoint order, so what is queued does not depend on the hash map's.
  std::sort(counted.begin(), counted.end(), [](const notice& a, const notice& b) { return a.endpoint_id < b.endpoint_id; });
  for (auto& n : counted) spend(std::move(n), now, out);
  if (all) roll(now, true, out);
  return out;
}

void notifier::roll(steady_time now, bool force, std::vector<notice>& out) {
  if (!window_.start || (!force && now - *window_.start < std::chrono::minutes{1})) return;
  if (!window_.held_back.empty()) {
    notice d;
    d.type = std::string(notification_types::digest);
    d.to_contact = false;
    d.sent = window_.sent;
    d.held_back.assign(window_.held_back.begin(), window_.held_back.end());
    d.endpoints = static_cast<std::int64_t>(window_.endpoints.size());
    for (auto id : window_.endpoints) {
      if (d.sample_endpoint_ids.size() >= policy_.digest_sample) break;
      d.sample_endpoint_ids.push_back(id);
    }
    out.push_back(std::move(d));
  }
  window_ = {};
}

void notifier::spend(notice n, steady_time now, std::vector<notice>& out) {
  if (!policy_.operator_tenant.empty() && n.to_operator) {
    roll(now, false, out);
    if (!window_.start) window_.start = now;
    if (window_.sent < policy_.budget_per_minute) {
      ++window_.sent;
    } else {
      n.to_operator = false;  // counted in the digest instead
      ++window_.held_back[n.type];
      window_.endpoints.insert(n.endpoint_id);
    }
  }
  out.push_back(std::move(n));
}

std::vector<sql::publish_event> rows_of(const notice& n, std::string_view operator_tenant, const endpoint* contact) {
  namespace t = notification_types;
  std::vector<sql::publish_event> out;
  if (n.type == t::digest) {  // about many tenants' endpoints: the operator tenant's alone
    if (!operator_tenant.empty())
      out.push_back({.tenant_id = std::string(operator_tenant),
                     .event_type = n.type,
                     .aggregate_id = "walhook.endpoints",
                     .merge_key = std::nullopt,
                     .payload = digest_payload(n),
                     .endpoint_id = std::nullopt});
    return out;
  }
  const std::string key = "walhook.endpoint:" + std::to_string(n.endpoint_id);
  const bool state = n.type == t::failing || n.type == t::paused || n.type == t::recovered;
  sql::publish_event row{.tenant_id = "",
                         .event_type = n.type,
                         .aggregate_id = key,
                         .merge_key = state ? std::optional<std::string>(key) : std::nullopt,
                         .payload = payload_of(n),
                         .endpoint_id = std::nullopt};
  const bool to_operator = n.to_operator && !operator_tenant.empty();
  if (to_operator) {
    out.push_back(row);
    out.back().tenant_id = std::string(operator_tenant);
  }
  // The contact endpoint, directly — unless that is the endpoint itself (no loop), or it gets
  // the operator's row anyway. Only one of the endpoint's own tenant: the notice carries the
  // endpoint's URL and errors (migration 008 refuses another tenant's contact; this holds for rows
  // written before it).
  const bool has_contact = contact && n.contact_endpoint_id && contact->id == *n.contact_endpoint_id &&
                           contact->tenant_id == n.tenant_id;
  if (n.to_contact && has_contact && contact->id != n.endpoint_id && !contact->retired &&
      !(to_operator && contact->tenant_id == operator_tenant && contact->subscribed(n.type))) {
    row.tenant_id = contact->tenant_id;
    row.endpoint_id = contact->id;
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace walhook::relay
