#pragma once
// Exactly one active relay per slot (docs/architecture.md, Invariants, 7): the active instance holds a
// session-level advisory lock keyed by the slot's name; a standby blocks on the same lock in the
// server (no polling) and takes over the moment the active one's session ends.
//
// Leadership is lost only when the lock's session is really gone: the server closed it (shut
// down, pg_terminate_backend, restarted) or the socket broke (TCP keepalives find a dead peer).
// A slow server is not a loss — nothing is asked of the lock session while it is held, so
// nothing can time out.
//
// Thread affinity: one executor.

#include "common/pg_connection.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>

namespace walhook::relay {

/// The statement that takes slot $1's leadership lock if it is free, without waiting: one row,
/// 't' if taken (held by the session until it ends), else 'f'. The lock is the two-int4-key
/// advisory lock (sql::advisory_lock_class, hashtext(slot)); `walhook reshard` takes the old
/// slots' with it, so a walhook of the old layout started meanwhile waits as a standby.
std::string try_lock_statement();

struct leadership_options {
  std::string conninfo;
  std::string slot;
  std::string instance_name;  ///< shown to standbys (application_name "walhook-lock <name>")
};

class leadership {
 public:
  leadership(boost::asio::any_io_executor ex, leadership_options options);

  /// Takes the lock, or waits as a hot standby while another instance holds it (logs who).
  /// Errors: pg::errc (connection), pg::errc::cancelled after cancel().
  boost::asio::awaitable<boost::system::error_code> acquire();
  /// Returns when the lock's session is gone (pg::errc::connection_lost), or cancelled.
  boost::asio::awaitable<boost::system::error_code> watch();
  /// Interrupts acquire() or watch().
  void cancel();
  /// Closes the lock's session, which releases the lock.
  void release();
  /// The lock session's last error (for logs).
  const std::string& last_error() const { return conn_.last_error(); }
  /// While waiting: the holder of the lock, if it is not a walhook instance (another role, or
  /// another application_name than walhook's lock sessions use), described for /readyz.
  const std::optional<std::string>& foreign_holder() const { return foreign_; }

 private:
  boost::asio::awaitable<boost::system::error_code> check_holder();

  leadership_options options_;
  pg::connection conn_;
  bool cancelled_ = false;
  std::optional<std::string> foreign_;
  std::string last_holder_pid_;  ///< the holder last logged ("none": free): a log line per change
};


}  // namespace walhook::relay
