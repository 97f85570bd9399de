#include "relay/admin/router.hpp"

#include "relay/admin/http_status.hpp"
#include "relay/operations/operations.hpp"
#include "relay/operations/sources.hpp"

#include <boost/url/parse.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <optional>

namespace walhook::relay {

namespace {

std::optional<std::int64_t> id_of(std::string_view text) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || p != text.data() + text.size() || v <= 0) return std::nullopt;
  return v;
}

api_response wrong_method(const char* allowed) { return error_response(405, fmt::format("use {} here", allowed)); }

api_response invalid(std::string_view message) { return error_response(http_status_of(error_kind::invalid), message); }

/// /api/endpoints/{id}[/action]: seg has at least 3 segments.
std::variant<api_route, api_response> endpoint_route(const std::vector<std::string>& seg, bool read, bool post) {
  auto id = id_of(seg[2]);
  if (!id) return invalid(fmt::format("not an endpoint id: {}", seg[2]));
  if (seg.size() == 3) {
    if (!read) return wrong_method("GET");
    return api_route{.kind = route_kind::endpoint, .endpoint_id = *id, .arg = {}, .page = {}};
  }
  if (seg.size() == 4) {
    static constexpr std::array<std::string_view, 4> statuses{"pause", "resume", "enable", "disable"};
    const bool status = std::find(statuses.begin(), statuses.end(), seg[3]) != statuses.end();
    if ((status || seg[3] == "replay") && !post) return wrong_method("POST");
    if (seg[3] == "replay") return api_route{.kind = route_kind::replay, .endpoint_id = *id, .arg = {}, .page = {}};
    if (status) return api_route{.kind = route_kind::endpoint_status, .endpoint_id = *id, .arg = seg[3], .page = {}};
  }
  return error_response(404, "no such API route (docs/api.md)");
}

std::optional<std::int64_t> int_of(std::string_view text) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || p != text.data() + text.size()) return std::nullopt;
  return v;
}

/// ?limit and ?after of GET /api/endpoints.
std::variant<operations::endpoint_page, api_response> page_of(std::string_view target) {
  operations::endpoint_page page{.after = std::nullopt, .limit = endpoints_page_default};
  auto url = boost::urls::parse_origin_form(target);
  if (!url) return invalid("the request target does not parse");
  for (const auto& param : url->params()) {
    if (param.key == "limit") {
      const auto limit = int_of(param.value);
      if (!limit || *limit < 1 || *limit > endpoints_page_max)
        return invalid(fmt::format("limit must be a whole number from 1 to {}: {}", endpoints_page_max, param.value));
      page.limit = *limit;
    } else if (param.key == "after") {
      page.after = parse_page_cursor(param.value);
      if (!page.after) return invalid(fmt::format("after must be the next of a previous page: {}", param.value));
    }
  }
  return page;
}

}  // namespace

std::string page_cursor(const operations::endpoint_page_key& key) {
  const bool none = key.since_us == std::numeric_limits<std::int64_t>::max();
  return fmt::format("{}.{}.{}.{}", none ? std::string("n") : std::to_string(key.since_us), key.failures, key.dead,
                     key.id);
}

std::optional<operations::endpoint_page_key> parse_page_cursor(std::string_view text) {
  std::optional<std::int64_t> parts[4];
  for (int i = 0; i < 4; ++i) {
    const auto dot = i < 3 ? text.find('.') : text.size();
    if (dot == std::string_view::npos) return std::nullopt;
    const auto part = text.substr(0, dot);
    parts[i] = i == 0 && part == "n" ? std::numeric_limits<std::int64_t>::max() : int_of(part);
    if (!parts[i]) return std::nullopt;
    text.remove_prefix(i < 3 ? dot + 1 : dot);
  }
  if (*parts[1] < 0 || *parts[2] < 0 || *parts[3] <= 0) return std::nullopt;
  return operations::endpoint_page_key{.since_us = *parts[0], .failures = *parts[1], .dead = *parts[2], .id = *parts[3]};
}

std::vector<std::string> segments_of(std::string_view target) {
  target = target.substr(0, target.find('?'));
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i <= target.size()) {
    auto slash = target.find('/', i);
    if (slash == std::string_view::npos) slash = target.size();
    if (slash > i) out.emplace_back(target.substr(i, slash - i));
    i = slash + 1;
  }
  return out;
}

std::variant<api_route, api_response> route_of(std::string_view method, std::string_view target) {
  const auto seg = segments_of(target);  // {"api", ...}
  const bool read = method == "GET" || method == "HEAD";
  const bool post = method == "POST";
  const auto get = [read](route_kind kind, std::string arg = {}) -> std::variant<api_route, api_response> {
    if (!read) return wrong_method("GET");
    return api_route{.kind = kind, .endpoint_id = 0, .arg = std::move(arg), .page = {}};
  };
  if (seg.size() == 2 && seg[1] == "overview") return get(route_kind::overview);
  if (seg.size() == 2 && seg[1] == "endpoints") {
    if (!read) return wrong_method("GET");
    auto page = page_of(target);
    if (auto* refused = std::get_if<api_response>(&page)) return std::move(*refused);
    return api_route{.kind = route_kind::endpoints, .endpoint_id = 0, .arg = {}, .page = std::get<0>(page)};
  }
  if (seg.size() >= 3 && seg[1] == "endpoints") return endpoint_route(seg, read, post);
  if (seg.size() == 3 && seg[1] == "events") {
    if (read && !operations::is_uuid(seg[2])) return invalid(fmt::format("not an event id (a UUID): {}", seg[2]));
    return get(route_kind::event, seg[2]);
  }
  if (seg.size() == 2 && seg[1] == "sources") return get(route_kind::sources);
  if (seg.size() == 3 && seg[1] == "sources") {
    if (read && !operations::is_source_name(seg[2])) return invalid(fmt::format("not a source name: {}", seg[2]));
    return get(route_kind::source, seg[2]);
  }
  if (seg.size() == 3 && seg[1] == "deliveries" && seg[2] == "resend") {
    if (!post) return wrong_method("POST");
    return api_route{.kind = route_kind::resend, .endpoint_id = 0, .arg = {}, .page = {}};
  }
  return error_response(404, "no such API route (docs/api.md)");
}

}  // namespace walhook::relay
