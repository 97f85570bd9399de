#pragma once
// A request to the admin API and its answer, as much of them as the API looks at (the HTTP
// framing is relay/admin/server.cpp's, Boost.Beast).

#include <string>
#include <string_view>

namespace walhook::relay {

/// A request, as much of it as the API looks at.
struct api_request {
  std::string method;         ///< "GET", "HEAD", "POST", ...
  std::string target;         ///< path and query, e.g. "/api/endpoints/3"
  std::string host;           ///< Host header
  std::string authorization;  ///< Authorization header
  std::string content_type;
  std::string operator_name;  ///< X-Walhook-Operator
  std::string remote;         ///< peer address
  std::string body;
};

struct api_response {
  unsigned status = 200;
  std::string body;  ///< JSON
};

/// {"error": message} with `status`.
api_response error_response(unsigned status, std::string_view message);

}  // namespace walhook::relay
