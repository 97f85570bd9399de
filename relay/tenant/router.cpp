#include "relay/tenant/router.hpp"

#include "delivery/signing.hpp"
#include "relay/admin/router.hpp"
#include "relay/operations/operations.hpp"
#include "relay/operations/tenants.hpp"

#include <boost/url/parse.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace walhook::relay::tenant {

namespace {

constexpr std::array<route_spec, 14> table{{
    {"GET", "/v1/events", route_kind::events, false},
    {"GET", "/v1/events/{event_id}", route_kind::event, false},
    {"GET", "/v1/endpoints", route_kind::endpoints, false},
    {"POST", "/v1/endpoints", route_kind::create_endpoint, true},
    {"GET", "/v1/endpoints/{endpoint_id}", route_kind::endpoint, false},
    {"PATCH", "/v1/endpoints/{endpoint_id}", route_kind::update_endpoint, true},
    {"DELETE", "/v1/endpoints/{endpoint_id}", route_kind::delete_endpoint, true},
    {"POST", "/v1/endpoints/{endpoint_id}/pause", route_kind::pause, true},
    {"POST", "/v1/endpoints/{endpoint_id}/resume", route_kind::resume, true},
    {"POST", "/v1/endpoints/{endpoint_id}/rotate-secret", route_kind::rotate_secret, true},
    {"POST", "/v1/endpoints/{endpoint_id}/test", route_kind::test_send, true},
    {"GET", "/v1/endpoints/{endpoint_id}/deliveries", route_kind::deliveries, false},
    {"POST", "/v1/endpoints/{endpoint_id}/resend", route_kind::resend, true},
    {"POST", "/v1/endpoints/{endpoint_id}/replay", route_kind::replay, true},
}};

api_response invalid(std::string message) { return error_response(400, message); }

std::optional<std::int64_t> integer_of(std::string_view text) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || p != text.data() + text.size()) return std::nullopt;
  return v;
}

/// Whether the path's segments fit a template's ("{…}" fits any one segment).
bool fits(const std::vector<std::string>& seg, std::string_view path) {
  const auto want = segments_of(path);
  if (want.size() != seg.size()) return false;
  for (std::size_t i = 0; i < seg.size(); ++i)
    if (!want[i].starts_with('{') && want[i] != seg[i]) return false;
  return true;
}

std::optional<std::string> from_base64url(std::string_view text) {
  if (text.size() > 200 || text.find_first_of("+/=") != std::string_view::npos) return std::nullopt;
  std::string std_text(text);
  std::replace(std_text.begin(), std_text.end(), '-', '+');
  std::replace(std_text.begin(), std_text.end(), '_', '/');
  while (std_text.size() % 4 != 0) std_text += '=';
  return delivery::base64_decode(std_text);
}

}  // namespace

std::span<const route_spec> routes() { return table; }

std::variant<route, api_response> route_of(std::string_view method, std::string_view target) {
  const auto seg = segments_of(target);
  const std::string_view asked = method == "HEAD" ? std::string_view("GET") : method;
  std::string allowed;
  for (const auto& spec : table) {
    if (!fits(seg, spec.path)) continue;
    if (spec.method != asked) {
      allowed += allowed.empty() ? "" : ", ";
      allowed += spec.method;
      continue;
    }
    route r{.kind = spec.kind, .changes = spec.changes, .endpoint_id = 0, .event_id = {}};
    if (spec.path.find("{endpoint_id}") != std::string_view::npos) {
      const auto id = integer_of(seg[2]);
      if (!id || *id <= 0) return invalid(fmt::format("not an endpoint id: {}", seg[2].substr(0, 40)));
      r.endpoint_id = *id;
    }
    if (spec.path.find("{event_id}") != std::string_view::npos) {
      if (!operations::is_uuid(seg[2])) return invalid(fmt::format("not an event id (a UUID): {}", seg[2].substr(0, 40)));
      r.event_id = seg[2];
    }
    return r;
  }
  if (!allowed.empty()) return error_response(405, fmt::format("use {} here", allowed));
  return error_response(404, "no such route of the tenant API (docs/tenant-api.md)");
}

std::variant<events_query, api_response> events_query_of(std::string_view target) {
  events_query q;
  auto url = boost::urls::parse_origin_form(target);
  if (!url) return invalid("the request target does not parse");
  for (const auto& param : url->params()) {
    if (param.key == "since") {
      q.since = param.value;
    } else if (param.key == "until") {
      q.until = param.value;
    } else if (param.key == "type") {
      std::string_view rest = param.value;
      while (!rest.empty()) {
        const auto comma = std::min(rest.find(','), rest.size());
        auto t = std::string(rest.substr(0, comma));
        t.erase(0, t.find_first_not_of(' '));
        t.erase(t.find_last_not_of(' ') + 1);
        if (!t.empty()) q.types.push_back(std::move(t));
        rest.remove_prefix(std::min(comma + 1, rest.size()));
      }
    } else if (param.key == "limit") {
      const auto n = integer_of(param.value);
      if (!n || *n < 1 || *n > events_page_max)
        return invalid(fmt::format("limit must be a whole number from 1 to {}", events_page_max));
      q.limit = *n;
    } else if (param.key == "cursor") {
      q.after = parse_events_cursor(param.value);
      if (!q.after) return invalid("cursor must be the next_cursor of a previous page");
    } else {
      return invalid(fmt::format("unknown parameter '{}': since, until, type, limit and cursor are",
                                 std::string(param.key).substr(0, 40)));
    }
  }
  if (q.types.size() > 100) return invalid("at most 100 event types");
  return q;
}

std::variant<deliveries_query, api_response> deliveries_query_of(std::string_view target) {
  deliveries_query q;
  auto url = boost::urls::parse_origin_form(target);
  if (!url) return invalid("the request target does not parse");
  for (const auto& param : url->params()) {
    if (param.key == "status") {
      static constexpr std::array<std::string_view, 4> statuses{"pending", "sending", "delivered", "dead"};
      if (std::find(statuses.begin(), statuses.end(), param.value) == statuses.end())
        return invalid("status must be pending, sending, delivered or dead");
      q.status = param.value;
    } else if (param.key == "limit") {
      const auto n = integer_of(param.value);
      if (!n || *n < 1 || *n > 500) return invalid("limit must be a whole number from 1 to 500");
      q.limit = *n;
    } else {
      return invalid(fmt::format("unknown parameter '{}': status and limit are", std::string(param.key).substr(0, 40)));
    }
  }
  return q;
}

std::string events_cursor(std::string_view created_at, std::int64_t seq) {
  return operations::base64url_encode(fmt::format("c1|{}|{}", created_at, seq));
}

std::optional<std::pair<std::string, std::int64_t>> parse_events_cursor(std::string_view text) {
  const auto raw = from_base64url(text);
  if (!raw || !raw->starts_with("c1|")) return std::nullopt;
  const std::string_view rest = std::string_view(*raw).substr(3);
  const auto bar = rest.find('|');
  if (bar == std::string_view::npos || bar == 0 || bar > 40) return std::nullopt;
  const auto at = rest.substr(0, bar);
  // A timestamp as PostgreSQL writes it: nothing else reaches the query.
  if (at.find_first_not_of("0123456789-:. +TZ") != std::string_view::npos) return std::nullopt;
  const auto seq = integer_of(rest.substr(bar + 1));
  if (!seq || *seq <= 0) return std::nullopt;
  return std::pair{std::string(at), *seq};
}

}  // namespace walhook::relay::tenant
