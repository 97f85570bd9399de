#pragma once
// The Relation messages seen on this replication connection, by OID. Rows are decoded against
// the latest Relation message for their OID — never against the live catalog — and the cache is
// cleared on reconnect, since the server resends Relation messages on every new connection.

#include "wal/pgoutput.hpp"

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>

namespace walhook::wal {

class relation_cache {
 public:
  /// Stores (or replaces) the shape of a relation.
  void apply(const pgoutput::relation& rel) { relations_[rel.oid] = rel; }
  /// The latest Relation for `oid`, or nullptr (a row for it is then a protocol error).
  const pgoutput::relation* find(std::uint32_t oid) const;
  /// Column index of `name` in relation `rel`, or std::nullopt.
  static std::optional<std::size_t> column_index(const pgoutput::relation& rel, std::string_view name);
  /// Follows one decoded message of the stream: a Relation is applied; an Insert, Update, Delete
  /// or Truncate is checked against the cache. Other messages pass. Errors: errc::unknown_relation
  /// (no Relation seen for an OID), errc::column_mismatch (a tuple's column count differs from
  /// its Relation's). On error the cache is unchanged.
  boost::system::error_code observe(const pgoutput::message& m);
  void clear() { relations_.clear(); }
  std::size_t size() const { return relations_.size(); }

 private:
  std::unordered_map<std::uint32_t, pgoutput::relation> relations_;
};

}  // namespace walhook::wal
