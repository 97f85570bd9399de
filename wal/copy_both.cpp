#include "wal/copy_both.hpp"

#include "wal/cursor.hpp"
#include "wal/errc.hpp"

namespace walhook::wal {

boost::system::result<server_message> parse_server_message(std::span<const std::byte> bytes) {
  cursor c(bytes);
  auto type = static_cast<char>(c.read_u8());
  if (!c.ok()) return errc::truncated;
  switch (type) {
    case 'w': {
      xlog_data m;
      m.wal_start = lsn{c.read_u64()};
      m.wal_end = lsn{c.read_u64()};
      m.send_time_us = c.read_i64();
      if (!c.ok()) return errc::truncated;
      // The payload is one whole pgoutput message, possibly empty; its own decoder checks it.
      m.data = c.rest();
      return m;
    }
    case 'k': {
      primary_keepalive m;
      m.wal_end = lsn{c.read_u64()};
      m.send_time_us = c.read_i64();
      m.reply_requested = c.read_u8() != 0;
      if (!c.ok()) return errc::truncated;
      if (!c.at_end()) return errc::trailing_bytes;
      return m;
    }
    default:
      return errc::unknown_message_type;
  }
}

namespace {

// Writes `v` big-endian at `out`, returns the position after it.
std::byte* put_u64(std::byte* out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) *out++ = static_cast<std::byte>((v >> shift) & 0xFF);
  return out;
}

}  // namespace

std::array<std::byte, 34> standby_status_update(lsn write, lsn flush, lsn apply, std::int64_t client_time_us,
                                                bool reply_requested) {
  std::array<std::byte, 34> out{};
  std::byte* p = out.data();
  *p++ = std::byte{'r'};
  p = put_u64(p, write.value());
  p = put_u64(p, flush.value());
  p = put_u64(p, apply.value());
  p = put_u64(p, static_cast<std::uint64_t>(client_time_us));
  *p = std::byte{reply_requested ? std::uint8_t{1} : std::uint8_t{0}};
  return out;
}

}  // namespace walhook::wal
