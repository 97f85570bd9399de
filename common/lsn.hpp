#pragma once
// Log Sequence Number: a byte position in PostgreSQL's write-ahead log (XLogRecPtr).
// Text form "X/Y": high and low 32 bits in upper-case hex, as pg_lsn prints it.

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace walhook {

class lsn {
 public:
  constexpr lsn() = default;
  constexpr explicit lsn(std::uint64_t v) : value_(v) {}

  constexpr std::uint64_t value() const { return value_; }
  /// InvalidXLogRecPtr is 0; walhook never acknowledges it.
  constexpr bool valid() const { return value_ != 0; }
  constexpr auto operator<=>(const lsn&) const = default;

  /// Parses "16/B374D848". Returns std::nullopt for anything else.
  static std::optional<lsn> parse(std::string_view text);
  /// "16/B374D848".
  std::string to_string() const;

 private:
  std::uint64_t value_ = 0;
};

/// Bytes between two positions (a − b), 0 if b is ahead.
constexpr std::uint64_t bytes_between(lsn a, lsn b) { return a > b ? a.value() - b.value() : 0; }

}  // namespace walhook
