#include "relay/inbox/body_json.hpp"

#include <simdjson.h>

#include <cstddef>

namespace walhook::relay::inbox {
namespace {

namespace od = simdjson::ondemand;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string_view trim_trailing_blanks(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n'))
    s.remove_prefix(1);
  return trim_trailing_blanks(s);
}

/// RFC 8259 §6: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? — the grammar alone, any magnitude.
bool is_json_number(std::string_view s) {
  std::size_t i = 0;
  auto digits = [&] {
    const std::size_t start = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    return i > start;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

/// Every value under `v` read once, so each atom is checked (the On-Demand API checks only what
/// is read). Only for bodies the DOM parser refused for a number out of its range.
simdjson::error_code check_value(od::value v) {
  od::json_type type;
  if (auto e = v.type().get(type)) return e;
  switch (type) {
    case od::json_type::array: {
      od::array a;
      if (auto e = v.get_array().get(a)) return e;
      for (auto element : a) {
        od::value child;
        if (auto e = element.get(child)) return e;
        if (auto e = check_value(child)) return e;
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::object: {
      od::object o;
      if (auto e = v.get_object().get(o)) return e;
      for (auto field : o) {
        std::string_view key;
        if (auto e = field.unescaped_key().get(key)) return e;
        od::value child;
        if (auto e = field.value().get(child)) return e;
        if (auto e = check_value(child)) return e;
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::number:
      return is_json_number(trim_trailing_blanks(v.raw_json_token())) ? simdjson::SUCCESS : simdjson::NUMBER_ERROR;
    case od::json_type::string: {
      std::string_view s;
      return v.get_string().get(s);
    }
    case od::json_type::boolean: {
      bool b = false;
      return v.get_bool().get(b);
    }
    case od::json_type::null: {
      bool null = false;
      if (auto e = v.is_null().get(null)) return e;
      return null ? simdjson::SUCCESS : simdjson::N_ATOM_ERROR;
    }
  }
  return simdjson::INCORRECT_TYPE;
}

/// The whole document checked value by value (see check_value), then nothing after it.
simdjson::error_code check_document(od::parser& parser, const simdjson::padded_string& text) {
  od::document doc;
  if (auto e = parser.iterate(text).get(doc)) return e;
  bool scalar = false;
  if (auto e = doc.is_scalar().get(scalar)) return e;
  if (scalar) {
    // A number alone (the only scalar the DOM parser refuses for its range), with nothing but
    // blanks around it.
    std::string_view raw;
    if (auto e = doc.raw_json_token().get(raw)) return e;
    const auto number = trim_trailing_blanks(raw);
    return is_json_number(number) && trim_blanks(std::string_view(text.data(), text.size())) == number
               ? simdjson::SUCCESS
               : simdjson::NUMBER_ERROR;
  }
  od::value root;
  if (auto e = doc.get_value().get(root)) return e;
  if (auto e = check_value(root)) return e;
  // Past the last token the iterator reports OUT_OF_BOUNDS; any other answer is a token after the value.
  const char* rest = nullptr;
  return doc.current_location().get(rest) == simdjson::OUT_OF_BOUNDS ? simdjson::SUCCESS : simdjson::TRAILING_CONTENT;
}

bool out_of_range(simdjson::error_code e) {
  return e == simdjson::NUMBER_ERROR || e == simdjson::NUMBER_OUT_OF_RANGE;
}

std::optional<std::string> text_at(od::parser& parser, const simdjson::padded_string& text, std::string_view pointer) {
  od::document doc;
  od::value v;
  od::json_type type;
  if (parser.iterate(text).get(doc) || doc.at_pointer(pointer).get(v) || v.type().get(type)) return std::nullopt;
  if (type == od::json_type::number) return std::string(trim_trailing_blanks(v.raw_json_token()));
  std::string_view s;
  if (type == od::json_type::string && !v.get_string().get(s)) return std::string(s);
  return std::nullopt;
}

}  // namespace

json_read read_json(std::string_view body, std::span<const std::string_view> pointers) {
  json_read out;
  const simdjson::padded_string text(body);
  // The DOM parser checks the whole document (structure, UTF-8, every atom) in one pass.
  simdjson::dom::parser dom;
  simdjson::dom::element root;
  auto error = dom.parse(text).get(root);
  od::parser parser;
  if (out_of_range(error)) error = check_document(parser, text);
  if (error) {
    out.error = simdjson::error_message(error);
    return out;
  }
  out.is_json = true;
  // The On-Demand API for the values: it gives a number's text as written, which the DOM's
  // tape (binary numbers) cannot.
  for (auto pointer : pointers) out.values.push_back(text_at(parser, text, pointer));
  return out;
}

}  // namespace walhook::relay::inbox
