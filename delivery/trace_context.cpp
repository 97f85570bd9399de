#include "delivery/trace_context.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace walhook::delivery {

namespace {

bool lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool all_zero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '0'; });
}

}  // namespace

std::optional<trace_parent> parse_traceparent(std::string_view v) {
  // version "-" trace-id "-" parent-id "-" trace-flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
  constexpr std::size_t length = 55;
  if (v.size() < length) return std::nullopt;
  const auto version = v.substr(0, 2);
  if (!lower_hex(version) || version == "ff") return std::nullopt;
  if (version == "00" ? v.size() != length : (v.size() > length && v[length] != '-')) return std::nullopt;
  if (v[2] != '-' || v[35] != '-' || v[52] != '-') return std::nullopt;
  trace_parent p{std::string(v.substr(3, 32)), std::string(v.substr(36, 16)), std::string(v.substr(53, 2))};
  if (!lower_hex(p.trace_id) || !lower_hex(p.parent_id) || !lower_hex(p.flags)) return std::nullopt;
  if (all_zero(p.trace_id) || all_zero(p.parent_id)) return std::nullopt;
  return p;
}

std::string child_traceparent(const trace_parent& parent, std::uint64_t span) {
  return fmt::format("00-{}-{:016x}-{}", parent.trace_id, span == 0 ? 1 : span, parent.flags);
}

}  // namespace walhook::delivery
