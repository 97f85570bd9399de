#include "relay/operations/errors.hpp"

namespace walhook::relay {

std::string_view to_string(error_kind kind) {
  switch (kind) {
    case error_kind::invalid: return "invalid";
    case error_kind::not_found: return "not_found";
    case error_kind::conflict: return "conflict";
    case error_kind::unavailable: return "unavailable";
    case error_kind::timed_out: return "timed_out";
  }
  return "unavailable";
}

error_kind kind_of_sqlstate(std::string_view sqlstate) {
  if (sqlstate == "57014") return error_kind::timed_out;
  if (sqlstate.starts_with("22")) return error_kind::invalid;
  if (sqlstate.starts_with("23")) return error_kind::conflict;
  return error_kind::unavailable;
}

int exit_code_of(error_kind kind) {
  switch (kind) {
    case error_kind::invalid:
    case error_kind::not_found:
    case error_kind::conflict:
    case error_kind::unavailable:
    case error_kind::timed_out:
      return 1;
  }
  return 1;
}

}  // namespace walhook::relay
