#include "relay/admin/request.hpp"

#include "common/json_writer.hpp"

namespace walhook::relay {

api_response error_response(unsigned status, std::string_view message) {
  json_writer j;
  j.begin_object().field("error", message).end_object();
  return {status, j.take()};
}

}  // namespace walhook::relay
