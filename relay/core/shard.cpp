#include "relay/core/shard.hpp"

#include <fmt/format.h>

#include <charconv>

namespace walhook::relay {

std::optional<shard_spec> parse_shard(std::string_view text, std::string& why) {
  auto slash = text.find('/');
  auto number = [](std::string_view t, int& out) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    return ec == std::errc{} && p == t.data() + t.size() && !t.empty();
  };
  shard_spec s;
  if (slash == std::string_view::npos || !number(text.substr(0, slash), s.index) || !number(text.substr(slash + 1), s.count)) {
    why = fmt::format("--shard takes K/N (this walhook's shard K of N shards, e.g. 0/4), not '{}'", text);
    return std::nullopt;
  }
  if (s.count < 1 || s.count > max_shards) {
    why = fmt::format("--shard {}: N must be 1 to {}", text, max_shards);
    return std::nullopt;
  }
  if (s.index < 0 || s.index >= s.count) {
    why = fmt::format("--shard {}: K must be 0 to {} (shards are numbered from 0)", text, s.count - 1);
    return std::nullopt;
  }
  return s;
}

std::string shard_slot(const std::string& base, shard_spec s) {
  return s.sharded() ? fmt::format("{}_{}_of_{}", base, s.index, s.count) : base;
}

std::string shard_slot_base(const std::string& slot, shard_spec s) {
  if (!s.sharded()) return slot;
  const std::string suffix = fmt::format("_{}_of_{}", s.index, s.count);
  return slot.ends_with(suffix) ? slot.substr(0, slot.size() - suffix.size()) : slot;
}

std::vector<std::string> shard_publications(shard_spec s) {
  if (!s.sharded()) return {"walhook", "walhook_endpoints"};
  return {fmt::format("walhook_{}_of_{}", s.index, s.count), fmt::format("walhook_endpoints_{}_of_{}", s.index, s.count)};
}

std::string shard_predicate(shard_spec s, std::string_view tenant_column) {
  if (!s.sharded()) return "true";
  return fmt::format("(hashtext({}) & 2147483647) % {} = {}", tenant_column, s.count, s.index);
}

std::vector<std::string> shard_publication_ddl(shard_spec s) {
  auto names = shard_publications(s);
  // The endpoints publication is filtered too (walhook.endpoints has REPLICA IDENTITY FULL, so
  // updates and deletes can be): a shard follows only its tenants' endpoints.
  return {fmt::format("CREATE PUBLICATION {} FOR TABLE walhook.outbox WHERE ({}) WITH (publish = 'insert')", names[0],
                      shard_predicate(s)),
          fmt::format("CREATE PUBLICATION {} FOR TABLE walhook.endpoints WHERE ({})", names[1], shard_predicate(s))};
}

}  // namespace walhook::relay
