#include "relay/core/snapshot.hpp"

#include <algorithm>
#include <charconv>

namespace walhook::relay {
namespace {

bool parse_id(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && end == text.data() + text.size();
}

}  // namespace

std::optional<pg_snapshot> pg_snapshot::parse(std::string_view text) {
  const auto first = text.find(':');
  if (first == std::string_view::npos) return std::nullopt;
  const auto second = text.find(':', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  pg_snapshot s;
  if (!parse_id(text.substr(0, first), s.xmin) || !parse_id(text.substr(first + 1, second - first - 1), s.xmax))
    return std::nullopt;
  if (s.xmin > s.xmax) return std::nullopt;
  std::string_view list = text.substr(second + 1);
  while (!list.empty()) {
    const auto comma = list.find(',');
    std::uint64_t id = 0;
    if (!parse_id(list.substr(0, comma), id)) return std::nullopt;
    if (id < s.xmin || id >= s.xmax || (!s.xip.empty() && id <= s.xip.back())) return std::nullopt;
    s.xip.push_back(id);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
    if (list.empty()) return std::nullopt;  // a trailing comma
  }
  return s;
}

std::string pg_snapshot::to_string() const {
  std::string out = std::to_string(xmin) + ':' + std::to_string(xmax) + ':';
  for (std::size_t i = 0; i < xip.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(xip[i]);
  }
  return out;
}

bool pg_snapshot::visible(std::uint64_t xid) const {
  if (xid < xmin) return true;
  if (xid >= xmax) return false;
  return !std::binary_search(xip.begin(), xip.end(), xid);
}

std::uint64_t pg_snapshot::widen(std::uint32_t xid) const {
  constexpr std::uint64_t epoch = std::uint64_t{1} << 32, half = std::uint64_t{1} << 31;
  std::uint64_t id = (xmax & ~(epoch - 1)) | xid;
  if (id > xmax && id - xmax > half && id >= epoch) id -= epoch;  // from the epoch before xmax's
  else if (id < xmax && xmax - id > half) id += epoch;           // from the epoch after xmax's
  return id;
}

}  // namespace walhook::relay
