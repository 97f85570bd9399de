#pragma once
// Blocking libpq access for the one-shot CLI commands (migrate, endpoint, send, status, …) that
// run outside any event loop. Errors throw cli_error with a one-line, human-readable message.

#include "common/pg_connection.hpp"

#include <stdexcept>
#include <string>

namespace walhook::relay {

/// A failure to report to the user as "walhook: <message>" with exit code 1.
class cli_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A statement PostgreSQL refused, with its SQLSTATE (PostgreSQL docs, Appendix A), so callers
/// can tell the caller's bad input (class 22) from the server's trouble (57014 statement
/// timeout, 53 resources, 42501 privileges, …) by kind rather than by message.
class pg_error : public cli_error {
 public:
  pg_error(const std::string& message, std::string sqlstate) : cli_error(message), sqlstate_(std::move(sqlstate)) {}
  /// Five characters, or "" if libpq gave none (e.g. the connection broke).
  const std::string& sqlstate() const { return sqlstate_; }

 private:
  std::string sqlstate_;
};

class blocking_db {
 public:
  /// Connects (10 s timeout); `replication`: a walsender session (replication=database) for
  /// replication commands through simple(). Throws cli_error("cannot connect to PostgreSQL: …").
  explicit blocking_db(const std::string& url, const std::string& application_name = "walhook-cli",
                       bool replication = false);
  ~blocking_db();
  blocking_db(const blocking_db&) = delete;
  blocking_db& operator=(const blocking_db&) = delete;

  /// Runs one statement with text parameters. Throws pg_error with the server's message.
  pg::query_result exec(const std::string& sql, const pg::params& params = {});
  /// Runs a command with the simple query protocol (replication commands, SET TRANSACTION
  /// SNAPSHOT). Throws pg_error with the server's message.
  pg::query_result simple(const std::string& sql);
  PGconn* native() const { return conn_; }

 private:
  PGconn* conn_ = nullptr;
};

/// libpq's message on one line, without the trailing newline.
std::string one_line(std::string text);

}  // namespace walhook::relay
