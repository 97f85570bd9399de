#pragma once
// The replication connection: a libpq connection in `replication=database` mode that streams a
// logical slot with pgoutput and keeps the slot acknowledged (PostgreSQL 15 docs, 55.4
// "Streaming Replication Protocol").
//
//   async_start(): connect, IDENTIFY_SYSTEM, check wal_level, find the slot (creating it if it
//                  does not exist and create_slot is set), START_REPLICATION SLOT … LOGICAL
//                  <confirmed_flush_lsn> (proto_version '1', publication_names '…').
//   async_create_slot(): CREATE_REPLICATION_SLOT … LOGICAL pgoutput (SNAPSHOT 'export') on the
//                  connection async_start() left open after errc::slot_missing or
//                  errc::slot_invalidated (dropping the old slot first): the caller imports the
//                  snapshot (SET TRANSACTION SNAPSHOT) on another session before the next call.
//   async_next():  the next decoded pgoutput message or keepalive. Sends standby status updates
//                  on its own: at once when a keepalive requests a reply, whenever the confirmed
//                  position moved (at most once per min_status_interval), and at least every
//                  status_interval even if nothing happens (a server with wal_sender_timeout = 0
//                  never asks).
//   async_hold():  waits without reading (back-pressure) while still sending status updates.
//   confirm():     the flush LSN to report; never goes backwards, never 0.
//
// Thread affinity: one executor; one operation at a time.

#include "common/lsn.hpp"
#include "common/time.hpp"
#include "wal/pgoutput.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace walhook::wal {

struct stream_options {
  std::string conninfo;  ///< libpq URL or key=value; replication=database is added
  std::string slot = "walhook";
  std::vector<std::string> publications{"walhook", "walhook_endpoints"};
  bool create_slot = true;  ///< false: a missing slot is errc::slot_missing (the caller decides)
  bool messages = true;  ///< also stream pg_logical_emit_message() records (operator signals)
  std::chrono::milliseconds status_interval{10000};     ///< status update at least this often
  std::chrono::milliseconds min_status_interval{50};   ///< …and at most this often when confirm() moves
  std::chrono::milliseconds server_silence_timeout{60000};  ///< nothing from the server this long → lost
  std::chrono::milliseconds connect_timeout{10000};
  std::string application_name = "walhook";
  const clock_source* clock = &real_clock::instance();  ///< status-update and silence timing
};

/// IDENTIFY_SYSTEM's answer and where streaming started.
struct system_info {
  std::string system_id;
  int timeline = 0;
  lsn server_flush;   ///< xlogpos at IDENTIFY_SYSTEM
  lsn slot_confirmed; ///< the slot's confirmed_flush_lsn at start
  lsn start;          ///< where streaming started: max(slot_confirmed, resume_from())
  bool slot_created = false;
};

/// One pgoutput message with the WAL position of the XLogData that carried it.
struct change {
  lsn wal_start;
  pgoutput::message message;
};

/// A primary keepalive: the server's WAL end. Safe to acknowledge when nothing is outstanding.
struct keepalive {
  lsn wal_end;
};

using stream_event = std::variant<change, keepalive>;

/// CREATE_REPLICATION_SLOT's answer (SNAPSHOT 'export').
struct created_slot {
  lsn consistent_point;       ///< transactions committing after it are in the slot, earlier ones are not
  std::string snapshot_name;  ///< for SET TRANSACTION SNAPSHOT, valid until this connection's next command
};

class replication_stream {
 public:
  replication_stream(boost::asio::any_io_executor ex, stream_options options);
  ~replication_stream();

  /// Connects and inspects (IDENTIFY_SYSTEM, wal_level, the slot) without streaming; info() is
  /// filled. Same errors as async_start() but slot_in_use. async_start() streams from here.
  boost::asio::awaitable<boost::system::error_code> async_open();
  /// Errors: pg::errc (connection), errc::not_logical, errc::slot_in_use (SQLSTATE 55006: another
  /// walsender streams the slot), errc::slot_missing (create_slot off), errc::slot_invalidated
  /// (the last two leave the connection open for async_create_slot(); info() is filled),
  /// errc::server_error (last_error() says why).
  boost::asio::awaitable<boost::system::error_code> async_start();
  /// Creates the slot (pgoutput, exporting its snapshot), dropping an existing one first (an
  /// invalidated slot, or one a replacement interrupted by a crash left behind), on the connection
  /// async_open() or a failed async_start() left open (opening one if there is none). The
  /// connection then stays idle until close() or async_start(), which streams the new slot:
  /// import the snapshot before either. Errors: pg::errc, errc::server_error.
  boost::asio::awaitable<boost::system::result<created_slot>> async_create_slot();
  const system_info& info() const;

  /// Resume no earlier than this LSN on the next async_start(): streaming starts at the greater
  /// of it and the slot's confirmed_flush_lsn (transactions that committed before it are not
  /// sent again). Used with walhook's own record of its acknowledged position; ignored (with a
  /// warning) when it was recorded on another cluster (`system_id` differs from IDENTIFY_SYSTEM's)
  /// or lies beyond the server's WAL.
  void resume_from(lsn position, std::string system_id);

  /// The next message. Errors: pg::errc::connection_lost / copy_done / timeout (server silent
  /// past server_silence_timeout), or a decoding error (wal::errc) — the stream must then be
  /// restarted; nothing past the failing message has been acknowledged.
  boost::asio::awaitable<boost::system::result<stream_event>> async_next();
  /// async_next(), giving up with pg::errc::timeout (the stream still usable) when nothing
  /// arrives within `max_wait`.
  boost::asio::awaitable<boost::system::result<stream_event>> async_next(std::chrono::milliseconds max_wait);

  /// Back-pressure: returns after `max_wait` or wake(), sending status updates meanwhile.
  boost::asio::awaitable<boost::system::error_code> async_hold(std::chrono::milliseconds max_wait);
  void wake();

  /// Sets the flush LSN reported to the server (the slot's confirmed_flush_lsn).
  void confirm(lsn flush);
  lsn confirmed() const;
  /// Highest WAL position received.
  lsn received() const;

  /// Sends a status update now.
  boost::asio::awaitable<boost::system::error_code> async_send_status(bool reply_requested = false);
  /// Makes a pending async_next()/async_hold() return pg::errc::cancelled (shutdown).
  void interrupt();
  /// Final status update, then close.
  boost::asio::awaitable<void> async_stop();
  void close();

  const std::string& last_error() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace walhook::wal
