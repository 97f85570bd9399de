// relay/admin/http_status.hpp as a table: an error kind's HTTP status, once; a user error's
// answer is its kind's status with its message, whatever the message says.

#include "relay/admin/http_status.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace walhook::relay;

TEST_CASE("http_status_of: one row per kind (docs/api.md, Errors)") {
  struct row {
    error_kind kind;
    unsigned status;
  };
  const row rows[] = {
      {error_kind::invalid, 400},     {error_kind::not_found, 404},  {error_kind::conflict, 409},
      {error_kind::unavailable, 503}, {error_kind::timed_out, 504},
  };
  for (const auto& r : rows) {
    CAPTURE(to_string(r.kind));
    CHECK(http_status_of(r.kind) == r.status);
  }
}

TEST_CASE("error_response: by kind; rewording a message never changes the status") {
  struct row {
    const char* what;
    api_response answer;
    unsigned status;
  };
  // Messages that once decided the status by their words ("no " → 404, "in flight" → 409).
  const row rows[] = {
      {"not found, worded otherwise", error_response(not_found("endpoint 7 does not exist")), 404},
      {"invalid, worded like a 404", error_response(invalid_input("no members allowed")), 400},
      {"conflict, worded like a 404", error_response(conflict("no, an attempt runs")), 409},
      {"invalid, worded like a 409", error_response(invalid_input("event x is of tenant 'a', in flight")), 400},
      {"a pg_error of class 22", error_response(pg_error("invalid input syntax for type timestamp", "22007")), 400},
  };
  for (const auto& r : rows) {
    CAPTURE(r.what);
    CHECK(r.answer.status == r.status);
  }
  CHECK(error_response(not_found("no endpoint with id 7")).body == R"({"error":"no endpoint with id 7"})");
}
