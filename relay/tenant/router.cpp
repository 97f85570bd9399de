#include "relay/tenant/router.hpp"

#include "delivery/signing.hpp"
#include "relay/admin/router.hpp"
#include "relay/operations/operations.hpp"
#include "relay/operations/tenants.hpp"

#include <boost/url/parse.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <limits>
#include <vector>

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

/// A cursor holds two snapshots, whose lists of transactions in progress grow with the writers
/// busy at once: some 300 of them still fit the request line (the listener's limit is 16 KiB).
constexpr std::size_t max_cursor_size = 6000;

std::optional<std::string> from_base64url(std::string_view text) {
  if (text.size() > max_cursor_size || text.find_first_of("+/=") != std::string_view::npos) return std::nullopt;
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

namespace {

/// An RFC 3339 date-time or full-date, as far as its characters go: a date first, then only
/// digits, "T", ":", ".", a "Z" or an offset (PostgreSQL checks the rest). PostgreSQL's words
/// ("now", "today", "epoch") and zone names are not: a relative since would mean another time
/// on each page and resume of a reading, and events would fall between.
bool is_date_time(std::string_view text) {
  if (text.size() < 10 || text.size() > 40) return false;
  for (std::size_t i = 0; i < 10; ++i)
    if ((i == 4 || i == 7) ? text[i] != '-' : !std::isdigit(static_cast<unsigned char>(text[i]))) return false;
  return text.substr(10).find_first_not_of("0123456789Tt:.+-Zz ") == std::string_view::npos;  // a space: "+" (below)
}

}  // namespace

std::variant<events_query, api_response> events_query_of(std::string_view target) {
  events_query q;
  auto url = boost::urls::parse_origin_form(target);
  if (!url) return invalid("the request target does not parse");
  for (const auto& param : url->params()) {
    if (param.key == "since" || param.key == "until") {
      if (!is_date_time(param.value))
        return invalid(fmt::format("{} must be an RFC 3339 date-time, like 2026-12-01T00:00:00Z", std::string(param.key)));
      // A "+" of an offset left unencoded arrives as a space (form encoding): after the date
      // (and its separator), a space can be nothing else.
      std::string value = param.value;
      if (value.size() > 11) std::replace(value.begin() + 11, value.end(), ' ', '+');
      (param.key == "since" ? q.since : q.until) = std::move(value);
    } else if (param.key.empty() && param.value.empty()) {
      continue;  // "/v1/events?" or "a=1&&b=2": an empty parameter
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
      q.cursor = parse_events_cursor(param.value);
      if (!q.cursor) return invalid("cursor must be the next_cursor or resume_cursor of a previous page");
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

namespace {

/// An xid8 as pg_snapshot_in reads it: decimal, at most 2^63 - 1.
std::optional<std::uint64_t> xid_of(std::string_view text) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || p != text.data() + text.size()) return std::nullopt;
  if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
  return v;
}

/// The three fields of a snapshot's text (it has two colons: checked or PostgreSQL's).
std::array<std::string_view, 3> snapshot_fields(std::string_view snapshot) {
  const auto c1 = snapshot.find(':');
  const auto c2 = snapshot.find(':', c1 + 1);
  return {snapshot.substr(0, c1), snapshot.substr(c1 + 1, c2 - c1 - 1), snapshot.substr(c2 + 1)};
}

/// "xmin:xmax:xip,…" with xmin ≤ xmax and each xip in [xmin, xmax), ascending: what
/// pg_snapshot_in accepts (it would refuse the rest with an error, not a 400).
bool is_snapshot(std::string_view text) {
  const auto c1 = text.find(':');
  const auto c2 = c1 == std::string_view::npos ? c1 : text.find(':', c1 + 1);
  if (c2 == std::string_view::npos) return false;
  const auto xmin = xid_of(text.substr(0, c1));
  const auto xmax = xid_of(text.substr(c1 + 1, c2 - c1 - 1));
  if (!xmin || !xmax || *xmin == 0 || *xmin > *xmax) return false;
  std::string_view rest = text.substr(c2 + 1);
  std::uint64_t last = 0;
  while (!rest.empty()) {
    const auto comma = std::min(rest.find(','), rest.size());
    const auto xip = xid_of(rest.substr(0, comma));
    if (!xip || *xip < *xmin || *xip >= *xmax || *xip < last) return false;
    last = *xip;
    rest.remove_prefix(comma);
    if (!rest.empty()) {
      rest.remove_prefix(1);
      if (rest.empty()) return false;  // a trailing comma
    }
  }
  return true;
}

}  // namespace

std::string events_cursor(const events_cursor_state& state) {
  return operations::base64url_encode(fmt::format("c3|{}|{}|{}|{}|{}|{}", state.history, state.lower, state.upper,
                                                  state.after ? state.after->first : "",
                                                  state.after ? std::to_string(state.after->second) : "",
                                                  state.filters));
}

namespace {

/// "<system identifier>.<timeline>" as list_events reads it: decimal digits, a dot, 8 hex digits.
bool is_history(std::string_view text) {
  const auto dot = text.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 20 || text.size() != dot + 9) return false;
  return text.substr(0, dot).find_first_not_of("0123456789") == std::string_view::npos &&
         text.substr(dot + 1).find_first_not_of("0123456789ABCDEF") == std::string_view::npos;
}

}  // namespace

std::optional<events_cursor_state> parse_events_cursor(std::string_view text) {
  const auto raw = from_base64url(text);
  // c3 carries the database's history; c2 (walhook before it) does not, and is still read.
  const bool c3 = raw && raw->starts_with("c3|");
  if (!raw || (!c3 && !raw->starts_with("c2|"))) return std::nullopt;
  std::vector<std::string_view> fields;
  if (!c3) fields.emplace_back();
  std::string_view rest = std::string_view(*raw).substr(3);
  for (;;) {
    const auto bar = rest.find('|');
    fields.push_back(rest.substr(0, bar));
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  if (fields.size() != 6) return std::nullopt;
  const std::string_view history = fields[0], lower = fields[1], upper = fields[2], at = fields[3], seq_text = fields[4],
                         digest = fields[5];
  if (c3 && !is_history(history)) return std::nullopt;
  if ((!lower.empty() && !is_snapshot(lower)) || (!upper.empty() && !is_snapshot(upper))) return std::nullopt;
  if (digest.size() != 16 || digest.find_first_not_of("0123456789abcdef") != std::string_view::npos) return std::nullopt;
  events_cursor_state state{std::string(lower), std::string(upper), std::nullopt, std::string(digest), std::string(history)};
  if (upper.empty()) {
    // A resume_cursor: the view it follows, nothing of the next one shown yet.
    return !lower.empty() && at.empty() && seq_text.empty() ? std::optional(state) : std::nullopt;
  }
  // A timestamp as PostgreSQL writes it (BC, infinity too): nothing else reaches the query.
  if (at.empty() || at.size() > 40 || at.find_first_not_of("0123456789-:. +TZBCinfty") != std::string_view::npos)
    return std::nullopt;
  const auto seq = integer_of(seq_text);
  if (!seq || *seq <= 0) return std::nullopt;
  state.after = std::pair{std::string(at), *seq};
  return state;
}

std::string filters_digest(const events_query& q) {
  std::string text = fmt::format("{}\x1f{}\x1f", q.since.value_or("\x1e"), q.until.value_or("\x1e"));
  for (const auto& t : q.types) text += t + '\x1f';
  return operations::sha256_hex(text).substr(0, 16);
}

std::uint64_t snapshot_xmax(std::string_view snapshot) { return xid_of(snapshot_fields(snapshot)[1]).value_or(0); }

std::string snapshot_xip_array(std::string_view snapshot) { return fmt::format("{{{}}}", snapshot_fields(snapshot)[2]); }

std::string bounded_snapshot(std::string_view snapshot, std::size_t max_size) {
  if (snapshot.size() <= max_size) return std::string(snapshot);
  const auto [xmin, xmax, xip] = snapshot_fields(snapshot);
  std::vector<std::string_view> xips;
  for (std::string_view rest = xip; !rest.empty();) {
    const auto comma = std::min(rest.find(','), rest.size());
    xips.push_back(rest.substr(0, comma));
    rest.remove_prefix(std::min(comma + 1, rest.size()));
  }
  // Keep the first k xips that fit; xips[k], the first left out, becomes xmax: every
  // transaction below it and not among those k had ended when the snapshot was taken. An xip is
  // no longer than xmax, so the text stays within max_size.
  if (xips.empty()) return std::string(snapshot);  // 40 digits at most: never over a max_size in use
  std::size_t k = 0, size = xmin.size() + xmax.size() + 2;
  while (k + 1 < xips.size()) {
    const std::size_t add = xips[k].size() + (k > 0 ? 1 : 0);
    if (size + add > max_size) break;
    size += add;
    ++k;
  }
  std::string out = fmt::format("{}:{}:", xmin, xips.at(k));
  for (std::size_t i = 0; i < k; ++i) out += fmt::format("{}{}", i > 0 ? "," : "", xips[i]);
  return out;
}

std::string next_view(std::string_view now, std::string_view lower) {
  auto view = bounded_snapshot(now, view_snapshot_max);
  if (!lower.empty() && snapshot_xmax(view) < snapshot_xmax(lower)) return std::string(lower);
  return view;
}

}  // namespace walhook::relay::tenant
