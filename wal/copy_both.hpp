#pragma once
// Framing of the streaming replication protocol inside CopyBoth (PostgreSQL 15 docs, 55.4
// "Streaming Replication Protocol"): XLogData ('w') and primary keepalive ('k') from the server,
// standby status update ('r') from walhook. Pure: bytes in, values out.

#include "common/lsn.hpp"

#include <boost/system/result.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

namespace walhook::wal {

/// 'w' XLogData: `data` is one pgoutput message; it points into the received buffer.
struct xlog_data {
  lsn wal_start;  ///< start of the WAL data in this message
  lsn wal_end;    ///< current end of WAL on the server
  std::int64_t send_time_us = 0;  ///< µs since 2000-01-01 UTC
  std::span<const std::byte> data;
};

/// 'k' Primary keepalive message.
struct primary_keepalive {
  lsn wal_end;  ///< current end of WAL on the server
  std::int64_t send_time_us = 0;
  bool reply_requested = false;  ///< answer with a standby status update at once
  bool operator==(const primary_keepalive&) const = default;
};

using server_message = std::variant<xlog_data, primary_keepalive>;

/// Parses one CopyData payload sent by the walsender. Errors: errc::truncated,
/// errc::unknown_message_type, errc::trailing_bytes (keepalive).
boost::system::result<server_message> parse_server_message(std::span<const std::byte> bytes);

/// 'r' Standby status update, 34 bytes: written, flushed and applied LSNs (the slot's
/// confirmed_flush_lsn follows `flush`), client time in µs since 2000-01-01 UTC, reply flag.
std::array<std::byte, 34> standby_status_update(lsn write, lsn flush, lsn apply, std::int64_t client_time_us,
                                                bool reply_requested);

}  // namespace walhook::wal
