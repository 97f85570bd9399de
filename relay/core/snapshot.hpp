#pragma once
// A PostgreSQL snapshot as walhook's outbox cursors record it (pg_snapshot, PostgreSQL docs 9.27.6
// "Transaction ID and Snapshot Information Functions"), and the visibility test of
// pg_visible_in_snapshot() applied in C++ to the transaction of a pgoutput Begin message — so
// the stream can tell which transactions a cursor already covers (docs/decisions.md, "The outbox
// as a log"). Pure.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::relay {

/// `xmin:xmax:xip,…` of pg_snapshot's text form; transaction ids are 64-bit (xid8: epoch << 32 | xid).
struct pg_snapshot {
  std::uint64_t xmin = 0;         ///< every transaction below it had ended when the snapshot was taken
  std::uint64_t xmax = 0;         ///< every transaction at or above it had not started yet
  std::vector<std::uint64_t> xip; ///< in progress then (xmin ≤ id < xmax), ascending

  /// Parses pg_snapshot's text form; nullopt unless xmin ≤ xmax and every xip is in [xmin, xmax),
  /// ascending and unique (what PostgreSQL prints).
  static std::optional<pg_snapshot> parse(std::string_view text);
  /// The text form, as PostgreSQL prints it (accepted by ::pg_snapshot).
  std::string to_string() const;

  /// pg_visible_in_snapshot(xid, this): the transaction had committed when the snapshot was
  /// taken — below xmin, or below xmax and not in progress.
  bool visible(std::uint64_t xid) const;

  /// The 64-bit id of a 32-bit xid (pgoutput Begin): the one nearest to xmax, so any transaction
  /// within 2^31 ids of the snapshot — all that can still be streamed — is widened correctly
  /// across an epoch boundary (as PostgreSQL widens a recent xid against its next id).
  std::uint64_t widen(std::uint32_t xid) const;

  bool operator==(const pg_snapshot&) const = default;
};

}  // namespace walhook::relay
