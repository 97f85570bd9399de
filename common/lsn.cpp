#include "common/lsn.hpp"

#include <charconv>
#include <cstdio>

namespace walhook {
namespace {

// pg_lsn accepts 1 to 8 hex digits on each side of the '/' (MAXPG_LSNCOMPONENT in
// src/backend/utils/adt/pg_lsn.c); anything else is rejected.
constexpr std::size_t max_component_digits = 8;

std::optional<std::uint32_t> parse_component(std::string_view text) {
  if (text.empty() || text.size() > max_component_digits) return std::nullopt;
  std::uint32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  // from_chars accepts only hex digits here (no sign, no "0x"), so it must consume everything.
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<lsn> lsn::parse(std::string_view text) {
  auto slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto hi = parse_component(text.substr(0, slash));
  auto lo = parse_component(text.substr(slash + 1));
  if (!hi || !lo) return std::nullopt;
  return lsn{(std::uint64_t{*hi} << 32) | *lo};
}

std::string lsn::to_string() const {
  char buf[2 * max_component_digits + 2];
  int n = std::snprintf(buf, sizeof buf, "%X/%X", static_cast<unsigned>(value_ >> 32),
                        static_cast<unsigned>(value_ & 0xFFFFFFFFu));
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace walhook
