#pragma once
// One HTTP/1.1 request to a loopback port and its answer (Boost.Beast), for the tests of walhook's
// listeners: the admin API (tests/integration/admin_api.cpp) and the tenant API.

#include <chrono>
#include <map>
#include <string>

namespace walhook::test {

struct http_answer {
  unsigned status = 0;  ///< 0: no answer (then `body` says why)
  std::string body;
  std::map<std::string, std::string> headers;
};

/// One request to 127.0.0.1:port within `deadline`. `headers` are sent as given (Host defaults
/// to localhost:port); a HEAD's answer is read without a body.
http_answer call(unsigned short port, const std::string& method, const std::string& target,
                 std::map<std::string, std::string> headers = {}, const std::string& body = "",
                 std::chrono::seconds deadline = std::chrono::seconds{5});

/// Sends `bytes` as they are to 127.0.0.1:port and reads until the server closes (5 s): the raw
/// answer ("" if it could not connect).
std::string raw_exchange(unsigned short port, const std::string& bytes);
/// The status of raw_exchange's answer (0 if there is none).
unsigned raw_status(unsigned short port, const std::string& bytes);

}  // namespace walhook::test
