#pragma once
// The one mapping of an error kind (relay/operations/errors.hpp) to the admin API's HTTP status
// (docs/api.md, Errors). The CLI's is relay/operations/errors.hpp's exit_code_of.

#include "relay/admin/request.hpp"
#include "relay/operations/errors.hpp"

#include <string_view>

namespace walhook::relay {

/// invalid → 400, not_found → 404, conflict → 409, unavailable → 503, timed_out → 504. Pure.
unsigned http_status_of(error_kind kind);

/// The status of a database error by its SQLSTATE: http_status_of(kind_of_sqlstate(sqlstate)),
/// i.e. 504 for 57014 (statement timeout), 400 for class 22 (data exception: the caller's text
/// did not parse, e.g. a bad timestamptz), 409 for class 23 (a constraint: a concurrent
/// change), 503 for anything else (the server's trouble, never the caller's input). Pure.
unsigned status_of_sqlstate(std::string_view sqlstate);

/// {"error": e.what()} with the status of e's kind.
api_response error_response(const user_error& e);

}  // namespace walhook::relay
