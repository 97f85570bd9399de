#pragma once
// The JSON body of an admin API action (POST, Content-Type: application/json): an object whose
// members are strings, integers, booleans, objects (a payload filter) or null. Every refusal throws invalid_input (400), naming the
// member.

#include <simdjson.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::relay {

/// A parsed body; an empty (or blank) body is `{}`.
class json_body {
 public:
  /// Throws invalid_input: not JSON, or not an object.
  explicit json_body(const std::string& text);
  json_body(const json_body&) = delete;
  json_body& operator=(const json_body&) = delete;

  /// Refuses members other than `keys`: a misspelt filter ("sinc") must not widen an action.
  /// Throws invalid_input naming the member and the allowed ones.
  void only(std::initializer_list<std::string_view> keys) const;
  /// A string member; nullopt if absent or null. Throws invalid_input if it is another type.
  std::optional<std::string> text(const char* key) const;
  /// An integer member; nullopt if absent or null. Throws invalid_input if it is another type.
  std::optional<std::int64_t> integer(const char* key) const;
  /// A boolean member; nullopt if absent or null. Throws invalid_input if it is another type.
  std::optional<bool> boolean(const char* key) const;
  /// An array-of-strings member; nullopt if absent or null. Throws invalid_input if it is
  /// another type or holds one.
  std::optional<std::vector<std::string>> strings(const char* key) const;
  /// An object member as its JSON text (a payload filter), or a string holding it; nullopt if
  /// absent or null. Throws invalid_input if it is another type.
  std::optional<std::string> object_text(const char* key) const;

 private:
  simdjson::dom::parser parser_;
  simdjson::dom::element doc_;
};

}  // namespace walhook::relay
