#pragma once
// Shards (`walhook run --shard K/N`): more than one walhook on one database, PostgreSQL still the
// only coordinator (docs/decisions.md, "Shards"). A tenant belongs to shard
//
//     (hashtext(tenant_id) & 2147483647) % N
//
// — PostgreSQL's own text hash, so the same expression filters the shard's publications (a
// PostgreSQL 15 row filter, evaluated by the walsender) and its reads of walhook's tables. One
// tenant is always on one shard, so its endpoints' concurrency limits stay exact. Shard K of N
// streams its own slot `<slot>_K_of_N` from publications `walhook_K_of_N` (outbox inserts) and
// `walhook_endpoints_K_of_N` (endpoint changes), and has its own hot standby (the advisory lock
// is per slot). Pure: names and SQL text only.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::relay {

struct shard_spec {
  int index = 0;  ///< K, 0 ≤ K < N
  int count = 1;  ///< N; 1 = not sharded (the slot and publications keep their plain names)
  bool sharded() const { return count > 1; }
  bool operator==(const shard_spec&) const = default;
};

/// At most this many shards (each walsender decodes all WAL: more would cost more than it gives).
inline constexpr int max_shards = 64;

/// Parses "K/N" (0 ≤ K < N ≤ max_shards). std::nullopt with `why` set otherwise.
std::optional<shard_spec> parse_shard(std::string_view text, std::string& why);

/// The slot of a shard: `<base>_K_of_N` (`base` when not sharded).
std::string shard_slot(const std::string& base, shard_spec s);
/// The base a shard's slot name was made of (shard_slot's inverse): `slot` without "_K_of_N"
/// (unchanged if not sharded, or if it does not end so). Pure.
std::string shard_slot_base(const std::string& slot, shard_spec s);
/// The publications a shard streams: {outbox, endpoints}.
std::vector<std::string> shard_publications(shard_spec s);
/// SQL boolean: `tenant_column` belongs to the shard ("true" when not sharded).
std::string shard_predicate(shard_spec s, std::string_view tenant_column = "tenant_id");
/// CREATE PUBLICATION statements for a shard's two publications (row-filtered).
std::vector<std::string> shard_publication_ddl(shard_spec s);

}  // namespace walhook::relay
