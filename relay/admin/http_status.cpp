#include "relay/admin/http_status.hpp"

namespace walhook::relay {

unsigned http_status_of(error_kind kind) {
  switch (kind) {
    case error_kind::invalid: return 400;
    case error_kind::not_found: return 404;
    case error_kind::conflict: return 409;
    case error_kind::unavailable: return 503;
    case error_kind::timed_out: return 504;
  }
  return 500;  // not a kind: a bug
}

unsigned status_of_sqlstate(std::string_view sqlstate) { return http_status_of(kind_of_sqlstate(sqlstate)); }

api_response error_response(const user_error& e) { return error_response(http_status_of(e.kind()), e.what()); }

}  // namespace walhook::relay
