#pragma once
// A minimal streaming JSON writer (RFC 8259) for the few documents walhook builds itself:
// batched rows sent to PostgreSQL as one jsonb parameter, log lines, admin responses.
// It does not validate nesting; callers write well-formed documents. Parsing is simdjson's job.

#include "common/log.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace walhook {

class json_writer {
 public:
  json_writer& begin_object() { sep(); out_ += '{'; first_ = true; return *this; }
  json_writer& end_object() { out_ += '}'; first_ = false; return *this; }
  json_writer& begin_array() { sep(); out_ += '['; first_ = true; return *this; }
  json_writer& end_array() { out_ += ']'; first_ = false; return *this; }
  /// An object key; the next value call writes its value.
  json_writer& key(std::string_view k) {
    sep();
    out_ += '"';
    log::append_json_escaped(out_, k);
    out_ += "\":";
    first_ = true;  // no comma before the value
    return *this;
  }
  json_writer& string(std::string_view v) {
    sep();
    out_ += '"';
    log::append_json_escaped(out_, v);
    out_ += '"';
    return *this;
  }
  json_writer& number(std::int64_t v) { sep(); out_ += std::to_string(v); return *this; }
  /// Shortest round-trip form; NaN and ±infinity (not JSON) are written as null.
  json_writer& number(double v);
  json_writer& boolean(bool v) { sep(); out_ += v ? "true" : "false"; return *this; }
  json_writer& null() { sep(); out_ += "null"; return *this; }
  /// Already-serialized JSON (e.g. a jsonb payload), written unchanged.
  json_writer& raw(std::string_view json) { sep(); out_ += json; return *this; }
  json_writer& optional_string(const std::optional<std::string>& v) { return v ? string(*v) : null(); }

  /// key + value shorthands.
  json_writer& field(std::string_view k, std::string_view v) { return key(k).string(v); }
  json_writer& field(std::string_view k, const char* v) { return key(k).string(v); }
  json_writer& field(std::string_view k, const std::string& v) { return key(k).string(v); }
  json_writer& field(std::string_view k, std::int64_t v) { return key(k).number(v); }
  json_writer& field(std::string_view k, int v) { return key(k).number(static_cast<std::int64_t>(v)); }
  json_writer& field(std::string_view k, long long v) { return key(k).number(static_cast<std::int64_t>(v)); }
  json_writer& field(std::string_view k, bool v) { return key(k).boolean(v); }
  json_writer& field(std::string_view k, const std::optional<std::string>& v) { return key(k).optional_string(v); }
  json_writer& field(std::string_view k, const std::optional<std::int64_t>& v) {
    key(k);
    return v ? number(*v) : null();
  }

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }
  bool empty() const { return out_.empty(); }

 private:
  void sep() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  std::string out_;
  bool first_ = true;
};

}  // namespace walhook
