#pragma once
// A bounds-checked reader over a message's bytes. Integers are big-endian (network order), as in
// every PostgreSQL protocol message. Every read checks what is left; a short read sets the
// cursor's error to errc::truncated and returns a zero value, so decoders can read a whole
// message and check ok() once (odyssey's kiwi style), never reading out of bounds.

#include "wal/errc.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace walhook::wal {

class cursor {
 public:
  explicit cursor(std::span<const std::byte> bytes) : bytes_(bytes) {}

  bool ok() const { return !failed_; }
  std::size_t remaining() const { return failed_ ? 0 : bytes_.size() - pos_; }
  bool at_end() const { return remaining() == 0; }
  std::size_t position() const { return pos_; }

  std::uint8_t read_u8();
  std::uint16_t read_u16();
  std::uint32_t read_u32();
  std::uint64_t read_u64();
  std::int16_t read_i16() { return static_cast<std::int16_t>(read_u16()); }
  std::int32_t read_i32() { return static_cast<std::int32_t>(read_u32()); }
  std::int64_t read_i64() { return static_cast<std::int64_t>(read_u64()); }
  /// A NUL-terminated string (String in the PostgreSQL docs); truncated if no NUL is left.
  std::string read_cstr();
  /// `n` raw bytes (Byten); truncated if fewer are left.
  std::string read_bytes(std::size_t n);
  /// The rest of the buffer, without copying; consumes it (at_end() is then true). Empty after a
  /// failed read.
  std::span<const std::byte> rest();

 private:
  bool need(std::size_t n);
  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace walhook::wal
