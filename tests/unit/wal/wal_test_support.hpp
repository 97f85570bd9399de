#pragma once
// Helpers for the wal unit tests: fixture loading, a byte builder for hand-made messages, and
// printing of decoded values so doctest shows them on failure.

#include "common/lsn.hpp"
#include "wal/pgoutput.hpp"

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::wal::test {

using bytes = std::vector<std::byte>;

/// One line of a fixture under tests/fixtures/pgoutput/: the LSN column of
/// pg_logical_slot_peek_binary_changes(), the comment naming it, and the message bytes.
struct fixture_message {
  lsn row_lsn;
  std::string name;
  bytes data;
};

/// Directory holding the captured fixtures (with a trailing '/').
std::string fixture_dir();
/// Loads `<fixture_dir()>/<file>`; throws std::runtime_error if it is missing or malformed.
std::vector<fixture_message> load_fixture(std::string_view file);
/// Names of every *.txt fixture, sorted.
std::vector<std::string> fixture_files();

/// Hex ("4e00") to bytes; throws std::invalid_argument on odd length or non-hex characters.
bytes from_hex(std::string_view hex);

/// Builds a message field by field, big-endian, like pq_sendint*/pq_sendstring do.
class builder {
 public:
  builder& u8(std::uint8_t v);
  builder& ch(char c) { return u8(static_cast<std::uint8_t>(c)); }
  builder& u16(std::uint16_t v);
  builder& u32(std::uint32_t v);
  builder& u64(std::uint64_t v);
  /// The characters of `s` followed by a NUL (String in the PostgreSQL docs).
  builder& cstr(std::string_view s);
  /// The characters of `s`, no terminator (Byten).
  builder& raw(std::string_view s);
  const bytes& get() const { return bytes_; }

 private:
  bytes bytes_;
};

/// The decoded message, failing the test (via exception) if decoding failed.
pgoutput::message decode_ok(const bytes& data);

}  // namespace walhook::wal::test

namespace walhook::wal {
std::ostream& operator<<(std::ostream& os, const lsn& l);
}

namespace walhook::wal::pgoutput {
std::ostream& operator<<(std::ostream& os, const tuple_value& v);
std::ostream& operator<<(std::ostream& os, const tuple& t);
std::ostream& operator<<(std::ostream& os, const column& c);
}  // namespace walhook::wal::pgoutput
