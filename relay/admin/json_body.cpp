#include "relay/admin/json_body.hpp"

#include "relay/operations/errors.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace walhook::relay {

json_body::json_body(const std::string& text) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    if (parser_.parse(std::string_view("{}")).get(doc_)) throw invalid_input("bad JSON body");
    return;
  }
  if (auto err = parser_.parse(text).get(doc_))
    throw invalid_input(std::string("the body is not valid JSON: ") + simdjson::error_message(err));
  if (!doc_.is_object()) throw invalid_input("the body must be a JSON object");
}

void json_body::only(std::initializer_list<std::string_view> keys) const {
  simdjson::dom::object o;
  if (doc_.get(o)) return;
  for (auto [k, v] : o) {
    if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
    std::string allowed;
    for (auto a : keys) allowed += (allowed.empty() ? "" : ", ") + std::string(a);
    throw invalid_input(
        fmt::format("unknown member \"{}\" in the body (allowed: {})", k, allowed.empty() ? "none" : allowed));
  }
}

std::optional<std::string> json_body::text(const char* key) const {
  simdjson::dom::element v;
  if (doc_[key].get(v) || v.is_null()) return std::nullopt;
  std::string_view s;
  if (v.get(s)) throw invalid_input(fmt::format("\"{}\" must be a string or null", key));
  return std::string(s);
}

std::optional<std::int64_t> json_body::integer(const char* key) const {
  simdjson::dom::element v;
  if (doc_[key].get(v) || v.is_null()) return std::nullopt;
  std::int64_t n = 0;
  if (v.get(n)) throw invalid_input(fmt::format("\"{}\" must be an integer", key));
  return n;
}

std::optional<bool> json_body::boolean(const char* key) const {
  simdjson::dom::element v;
  if (doc_[key].get(v) || v.is_null()) return std::nullopt;
  bool b = false;
  if (v.get(b)) throw invalid_input(fmt::format("\"{}\" must be true, false or null", key));
  return b;
}

std::optional<std::string> json_body::object_text(const char* key) const {
  simdjson::dom::element v;
  if (doc_[key].get(v) || v.is_null()) return std::nullopt;
  if (v.is_object()) return simdjson::minify(v);
  std::string_view s;
  if (v.get(s)) throw invalid_input(fmt::format("\"{}\" must be an object, a string holding one, or null", key));
  return std::string(s);
}

std::optional<std::vector<std::string>> json_body::strings(const char* key) const {
  simdjson::dom::element v;
  if (doc_[key].get(v) || v.is_null()) return std::nullopt;
  simdjson::dom::array items;
  if (v.get(items)) throw invalid_input(fmt::format("\"{}\" must be an array of strings or null", key));
  std::vector<std::string> out;
  for (auto item : items) {
    std::string_view s;
    if (item.get(s)) throw invalid_input(fmt::format("\"{}\" must be an array of strings or null", key));
    out.emplace_back(s);
  }
  return out;
}

}  // namespace walhook::relay
