#pragma once
// The JSON side of the inbox's checks (relay/inbox/schemes.hpp): is an authenticated body JSON,
// and what do a source's JSON pointers name in it? Pure; simdjson stays in the .cpp.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::relay::inbox {

/// A body read as JSON.
struct json_read {
  bool is_json = false;  ///< one JSON text (RFC 8259), valid UTF-8, nothing after it
  std::string error;     ///< why not (simdjson's words), when !is_json
  /// One per pointer, in order: a string's contents (unescaped), a number's JSON text as
  /// written ("1E2" stays "1E2"); std::nullopt if the pointer names nothing, an object, an
  /// array, a boolean or null. Empty when !is_json.
  std::vector<std::optional<std::string>> values;
};

/// Checks `body` and reads each of `pointers` (RFC 6901, each starting with "/"). Numbers
/// beyond simdjson's range (a 30-digit integer, 1e999) are valid JSON, as PostgreSQL's jsonb
/// keeps them. Object keys are matched as the body writes them: a key spelled with \u escapes
/// is not found by its unescaped name.
json_read read_json(std::string_view body, std::span<const std::string_view> pointers);

}  // namespace walhook::relay::inbox
