#pragma once
// Blocking libpq access for the one-shot CLI commands (migrate, endpoint, send, status, …) that
// run outside any event loop, and the admin API's database worker. Errors throw user errors
// (relay/operations/errors.hpp) with a one-line, human-readable message: `unavailable` if
// PostgreSQL cannot be reached, pg_error (kind by SQLSTATE) if it refuses a statement.

#include "common/pg_connection.hpp"
#include "relay/operations/errors.hpp"

#include <string>

namespace walhook::relay {

/// One blocking libpq connection (TimeZone UTC, DateStyle ISO), used by one thread at a time.
class blocking_db {
 public:
  /// Connects (10 s timeout); `replication`: a walsender session (replication=database) for
  /// replication commands through simple(). Throws unavailable("cannot connect to PostgreSQL: …").
  explicit blocking_db(const std::string& url, const std::string& application_name = "walhook-cli",
                       bool replication = false);
  ~blocking_db();
  blocking_db(const blocking_db&) = delete;
  blocking_db& operator=(const blocking_db&) = delete;

  /// Runs one statement with text parameters. Throws pg_error with the server's message (and
  /// hint), SQLSTATE and constraint name.
  pg::query_result exec(const std::string& sql, const pg::params& params = {});
  /// Runs a command with the simple query protocol (replication commands, SET TRANSACTION
  /// SNAPSHOT). Throws pg_error with the server's message.
  pg::query_result simple(const std::string& sql);
  /// The libpq connection (its status, transaction status); owned by this object.
  PGconn* native() const { return conn_; }

 private:
  PGconn* conn_ = nullptr;
};

/// One transaction on a blocking connection; rolled back unless committed, so a user error
/// thrown halfway leaves the connection usable (the admin API keeps its connection).
class db_transaction {
 public:
  explicit db_transaction(blocking_db& db) : db_(db) { db_.exec("BEGIN"); }
  ~db_transaction() {
    if (open_) try {
        db_.exec("ROLLBACK");
      } catch (...) {  // the connection is gone: nothing to roll back
      }
  }
  db_transaction(const db_transaction&) = delete;
  db_transaction& operator=(const db_transaction&) = delete;
  void commit() {
    db_.exec("COMMIT");
    open_ = false;
  }

 private:
  blocking_db& db_;
  bool open_ = true;
};

/// libpq's message on one line, without the trailing newline.
std::string one_line(std::string text);

}  // namespace walhook::relay
