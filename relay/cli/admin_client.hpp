#pragma once
// A small blocking HTTP/1.1 client for the CLI to ask a running walhook's admin API
// (`walhook run --admin-listen`, docs/api.md) for its live numbers. Beast stays in the .cpp.
// The token file is read as the listener reads it (relay/admin/access.hpp, read_token_file).

#include <chrono>
#include <string>

namespace walhook::relay {

/// GET `base_url` + `path` (base_url: "http://host:port", a trailing '/' ignored; http only: the
/// admin listener has no TLS), with "Authorization: Bearer <token>" if `token` is not empty.
/// Returns the body of a 200 answer. Throws cli_error with a one-line reason (cannot connect,
/// timeout, HTTP 401 …) on anything else; `timeout` bounds the whole exchange.
std::string admin_get(const std::string& base_url, const std::string& path, const std::string& token,
                      std::chrono::milliseconds timeout = std::chrono::seconds{5});

}  // namespace walhook::relay
