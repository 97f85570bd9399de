// relay/operations/errors.hpp as tables: every user error carries its kind (its type says it,
// not its message), a SQLSTATE gives a kind, and every kind has its exit code (1, as walhook
// always exited on a user error).

#include "relay/operations/errors.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace walhook::relay;

namespace {

/// The kind of what `f` throws, caught as a user error (cli_error is the same type).
template <class F>
error_kind kind_thrown(F f) {
  try {
    f();
  } catch (const cli_error& e) {
    return e.kind();
  }
  FAIL("nothing thrown");
  return error_kind::unavailable;
}

}  // namespace

TEST_CASE("user errors: each type carries its kind; the message plays no part") {
  struct row {
    const char* what;
    error_kind thrown;
    error_kind kind;
  };
  const row rows[] = {
      {"invalid_input", kind_thrown([] { throw invalid_input("no endpoint with id 7"); }), error_kind::invalid},
      {"not_found", kind_thrown([] { throw not_found("an attempt is in flight"); }), error_kind::not_found},
      {"conflict", kind_thrown([] { throw conflict("no such thing"); }), error_kind::conflict},
      {"unavailable", kind_thrown([] { throw unavailable("cannot connect to PostgreSQL: x"); }),
       error_kind::unavailable},
      {"cli_error with a message only (relay/cli/)", kind_thrown([] { throw cli_error("no endpoint with id 7"); }),
       error_kind::invalid},
      {"a kind given", kind_thrown([] { throw user_error(error_kind::conflict, "x"); }), error_kind::conflict},
      {"pg_error: by SQLSTATE", kind_thrown([] { throw pg_error("no endpoint", "23505", "some_index"); }),
       error_kind::conflict},
  };
  for (const auto& r : rows) {
    CAPTURE(r.what);
    CHECK(r.thrown == r.kind);
  }
}

TEST_CASE("kind_of_sqlstate: the table (PostgreSQL docs, Appendix A)") {
  struct row {
    const char* sqlstate;
    error_kind kind;
  };
  const row rows[] = {
      {"57014", error_kind::timed_out},    // query_canceled: statement_timeout
      {"22007", error_kind::invalid},      // invalid_datetime_format: a bad since/until
      {"22P02", error_kind::invalid},      // invalid_text_representation
      {"23505", error_kind::conflict},     // unique_violation: a concurrent change
      {"23503", error_kind::conflict},     // foreign_key_violation
      {"42501", error_kind::unavailable},  // insufficient_privilege: the server's setup, not the input
      {"53100", error_kind::unavailable},  // disk_full
      {"57P01", error_kind::unavailable},  // admin_shutdown
      {"40001", error_kind::unavailable},  // serialization_failure
      {"08006", error_kind::unavailable},  // connection_failure
      {"XX000", error_kind::unavailable},  // internal_error
      {"", error_kind::unavailable},       // no SQLSTATE: the connection broke
  };
  for (const auto& r : rows) {
    CAPTURE(r.sqlstate);
    CHECK(kind_of_sqlstate(r.sqlstate) == r.kind);
    CHECK(pg_error("m", r.sqlstate).kind() == r.kind);
  }
  const pg_error e("duplicate key value", "23505", "deliveries_pending_merge_key");
  CHECK(e.sqlstate() == "23505");
  CHECK(e.constraint() == "deliveries_pending_merge_key");
}

TEST_CASE("exit_code_of: one row per kind, every user error exits 1 as before") {
  struct row {
    error_kind kind;
    const char* name;
    int exit_code;
  };
  const row rows[] = {
      {error_kind::invalid, "invalid", 1},         {error_kind::not_found, "not_found", 1},
      {error_kind::conflict, "conflict", 1},       {error_kind::unavailable, "unavailable", 1},
      {error_kind::timed_out, "timed_out", 1},
  };
  for (const auto& r : rows) {
    CAPTURE(r.name);
    CHECK(to_string(r.kind) == r.name);
    CHECK(exit_code_of(r.kind) == r.exit_code);
  }
}
