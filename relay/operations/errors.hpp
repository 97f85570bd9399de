#pragma once
// The errors an operator's request can meet, as kinds (STYLE.md: a kind is mapped once to an
// HTTP status, in relay/admin/http_status.hpp, and once to an exit code, exit_code_of below;
// rewording a message never changes either). Every user error is a user_error with one of the
// kinds; throw the kind's own type (invalid_input, not_found, conflict, unavailable), or a
// pg_error, whose kind comes from PostgreSQL's SQLSTATE. Programmer errors and fatal setup stay
// other exceptions (std::runtime_error, …): the admin API answers those 500.

#include <stdexcept>
#include <string>
#include <string_view>

namespace walhook::relay {

/// What went wrong, as the caller can act on it.
enum class error_kind {
  /// The request, a flag or a body is wrong (a bad URL, an empty range, an unknown member, a
  /// value out of range, a timestamp PostgreSQL cannot parse): the same request fails again.
  invalid,
  /// What the request names does not exist (no endpoint with that id, no such event).
  not_found,
  /// The request is well-formed but the state forbids it now: an attempt in flight, a newer
  /// state of the merge key pending, a concurrent change (SQLSTATE class 23), a database not
  /// prepared for it (no schema, another shard layout, wal_level). It may succeed later.
  conflict,
  /// PostgreSQL cannot be reached or failed on its side (connection refused or broken, out of
  /// resources, privileges): not the caller's input.
  unavailable,
  /// PostgreSQL did not answer in time (SQLSTATE 57014, statement_timeout).
  timed_out,
};

/// "invalid", "not_found", "conflict", "unavailable", "timed_out". Pure.
std::string_view to_string(error_kind kind);

/// A failure to report to the user as "walhook: <message>" (the CLI) or {"error": message} (the
/// admin API), one line, with its kind. Catch this to catch every user error.
class user_error : public std::runtime_error {
 public:
  user_error(error_kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  /// An `invalid` error: what `throw cli_error("…")` in relay/cli/ means.
  explicit user_error(const std::string& message) : user_error(error_kind::invalid, message) {}
  error_kind kind() const noexcept { return kind_; }

 private:
  error_kind kind_;
};

/// The name relay/cli/ throws and catches: every user error; thrown with a message only, an
/// `invalid` one.
using cli_error = user_error;

/// error_kind::invalid: the request, a flag or a body is wrong.
class invalid_input : public user_error {
 public:
  explicit invalid_input(const std::string& message) : user_error(error_kind::invalid, message) {}
};

/// error_kind::not_found: what the request names does not exist.
class not_found : public user_error {
 public:
  explicit not_found(const std::string& message) : user_error(error_kind::not_found, message) {}
};

/// error_kind::conflict: the state forbids the request now.
class conflict : public user_error {
 public:
  explicit conflict(const std::string& message) : user_error(error_kind::conflict, message) {}
};

/// error_kind::unavailable: PostgreSQL cannot be reached (e.g. "cannot connect to PostgreSQL: …").
class unavailable : public user_error {
 public:
  explicit unavailable(const std::string& message) : user_error(error_kind::unavailable, message) {}
};

/// The kind of a SQLSTATE (PostgreSQL docs, Appendix A "PostgreSQL Error Codes"): 57014
/// (query_canceled: statement_timeout) → timed_out; class 22 (data exception: the caller's
/// text did not parse, e.g. a bad timestamptz) → invalid; class 23 (integrity constraint
/// violation: a concurrent change) → conflict; anything else, "" included (no SQLSTATE: the
/// connection broke) → unavailable, the server's trouble, never the caller's input. Pure.
error_kind kind_of_sqlstate(std::string_view sqlstate);

/// A statement PostgreSQL refused, with its SQLSTATE and, for a constraint violation, the
/// constraint's (or unique index's) name; its kind is kind_of_sqlstate(sqlstate).
class pg_error : public user_error {
 public:
  pg_error(const std::string& message, std::string sqlstate, std::string constraint = {})
      : user_error(kind_of_sqlstate(sqlstate), message),
        sqlstate_(std::move(sqlstate)),
        constraint_(std::move(constraint)) {}
  /// Five characters, or "" if libpq gave none (e.g. the connection broke).
  const std::string& sqlstate() const { return sqlstate_; }
  /// PG_DIAG_CONSTRAINT_NAME: "" unless PostgreSQL named one (classes 23, some of 22).
  const std::string& constraint() const { return constraint_; }

 private:
  std::string sqlstate_;
  std::string constraint_;
};

/// The exit code of a walhook command that ended with a user error of `kind`: 1 for every kind,
/// the code walhook has always exited with ("walhook: <message>" on stderr); outside scripts
/// rely on it. CLI11's usage errors keep their own codes. Pure.
int exit_code_of(error_kind kind);

}  // namespace walhook::relay
