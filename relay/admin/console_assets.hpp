#pragma once
// The operator console's files (relay/admin/console/*: HTML, JS, CSS), embedded in the walhook binary
// at build time (relay/CMakeLists.txt), so the console works without internet and without files
// next to the binary.

#include <optional>
#include <span>
#include <string_view>

namespace walhook::relay {

struct console_asset {
  std::string_view path;          ///< "/", "/app.js", "/style.css", ... (as requested under /console)
  std::string_view content_type;  ///< "text/html; charset=utf-8", ...
  std::string_view body;
};

namespace detail {
/// A file embedded by relay/admin/embed_console.cmake, by path ("/app.js").
struct embedded_file {
  std::string_view path;
  std::string_view body;
};
}  // namespace detail

/// The asset served at `path` ("/" is index.html), or nullopt.
std::optional<console_asset> find_console_asset(std::string_view path);
/// The same, among `files` (another embedded folder: the tenant portal's).
std::optional<console_asset> find_embedded_asset(std::span<const detail::embedded_file> files, std::string_view path);

}  // namespace walhook::relay
