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
  auto emit = [&](notice n) { out.notices.push_back(std::move(n)); };
  auto failure_fields = [&](notice& n) {
    n.consecutive_failures = d.breaker.consecutive_failures;
    n.failing_since = d.breaker.first_failure_at;
  };
  if (d.result == verdict::delivered) {
    const bool streak = before.consecutive_failures > 0 || before.paused_until.has_value();
    // An announced streak ends with news whichever delivery ends it (only deliveries of other
    // events announce, so this cannot loop); so does a pause this process did not announce (it
    // began before a restart).
    if (streak && (st.announced || (!own_event && before.paused_until && !st.last_paused)))
      emit(about(t::recovered, ep, d));
    st.announced = false;
    return out;
  }
  if (disabling && !own_event) {
    notice n = about(t::disabled, ep, d);
    failure_fields(n);
    n.reason = d.disable;
    emit(std::move(n));
  }
  // A new streak: consecutive failures went 0 → 1 (a 410 or a dead verdict leaves the breaker).
  // The log line and the notice keep separate clocks: a failing delivery of walhook's own event
  // is logged, and must not silence the next streak's notice.
  if (before.consecutive_failures == 0 && d.breaker.consecutive_failures == 1) {
    st.announced = false;
    if (passed(st.last_failing_log, now, policy_.failing_interval)) {
      st.last_failing_log = now;
      out.log_failing = true;
    }
    if (!own_event && passed(st.last_failing, now, policy_.failing_interval)) {
      st.last_failing = now;
      notice n = about(t::failing, ep, d);
      failure_fields(n);
      emit(std::move(n));
      st.announced = true;
    }
  }
  if (!own_event && !disabling && d.paused_until && !before.paused_until &&
      passed(st.last_paused, now, policy_.paused_interval)) {
    st.last_paused = now;
    notice n = about(t::paused, ep, d);
    failure_fields(n);
    n.paused_until = d.paused_until;
    n.reason = d.retry_after ? "Retry-After" : "circuit breaker";
    emit(std::move(n));
    st.announced = true;
  }
  return out;
}

std::optional<notice> notifier::dead(const endpoint& ep, const std::string& event_id, const sql::delivery_outcome& record,
                                     bool own_event, steady_time now) {
  if (own_event) return std::nullopt;
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
    return n;
  }
  st.dead_counted = std::move(n);
  return std::nullopt;
}

std::vector<notice> notifier::due(steady_time now, bool all) {
  std::vector<notice> out;
  for (auto& [id, st] : state_) {
    if (!st.dead_counted || (!all && !passed(st.last_dead, now, policy_.dead_interval))) continue;
    st.last_dead = now;
    out.push_back(std::move(*st.dead_counted));
    st.dead_counted.reset();
  }
  // Endpoint order, so what is queued does not depend on the hash map's.
  std::sort(out.begin(), out.end(), [](const notice& a, const notice& b) { return a.endpoint_id < b.endpoint_id; });
  return out;
}

std::vector<sql::publish_event> rows_of(const notice& n, std::string_view operator_tenant, const endpoint* contact) {
  namespace t = notification_types;
  std::vector<sql::publish_event> out;
  const std::string key = "walhook.endpoint:" + std::to_string(n.endpoint_id);
  const bool state = n.type == t::failing || n.type == t::paused || n.type == t::recovered;
  sql::publish_event row{.tenant_id = "",
                         .event_type = n.type,
                         .aggregate_id = key,
                         .merge_key = state ? std::optional<std::string>(key) : std::nullopt,
                         .payload = payload_of(n),
                         .endpoint_id = std::nullopt};
  if (!operator_tenant.empty()) {
    out.push_back(row);
    out.back().tenant_id = std::string(operator_tenant);
  }
  // The contact endpoint, directly — unless that is the endpoint itself (no loop), or it would
  // get the operator's row anyway. Only one of the endpoint's own tenant: the notice carries the
  // endpoint's URL and errors (migration 008 refuses another tenant's contact; this holds for rows
  // written before it).
  const bool has_contact = contact && n.contact_endpoint_id && contact->id == *n.contact_endpoint_id &&
                           contact->tenant_id == n.tenant_id;
  if (has_contact && contact->id != n.endpoint_id && !contact->retired &&
      !(contact->tenant_id == operator_tenant && contact->subscribed(n.type))) {
    row.tenant_id = contact->tenant_id;
    row.endpoint_id = contact->id;
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace walhook::relay
