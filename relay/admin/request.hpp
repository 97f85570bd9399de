#pragma once
// A request to the admin API and its answer, as much of them as the API looks at (the HTTP
// framing is relay/admin/server.cpp's, Boost.Beast).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
  std::string cookie;         ///< Cookie header (the tenant portal's session)
  std::string csrf_token;     ///< X-CSRF-Token header (the tenant portal's writes)
  std::string body;
};

struct api_response {
  unsigned status = 200;
  std::string body;  ///< JSON, unless content_type says otherwise
  std::string content_type = "application/json";
  /// More header fields (Retry-After, Location, Set-Cookie, …); Cache-Control no-store unless one
  /// of these sets it.
  std::vector<std::pair<std::string, std::string>> headers{};
};

/// {"error": message} with `status`.
api_response error_response(unsigned status, std::string_view message);

}  // namespace walhook::relay
