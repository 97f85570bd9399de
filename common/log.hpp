#pragma once
// Structured logging: one JSON object per line on standard error (docs/architecture.md, Operating).
//
//   log::info("slot.acknowledged", {{"lsn", "0/16B3748"}, {"deliveries", 12}});
//   → {"ts":"2026-11-30T03:23:51.123Z","level":"info","msg":"slot.acknowledged","lsn":"0/16B3748","deliveries":12}
//
// Thread-safe (one write(2) per line). Secrets must never be passed as field values.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace walhook::log {

enum class level { debug = 0, info = 1, warn = 2, error = 3 };

/// One key/value of a log line. Numbers and booleans are written as JSON numbers/booleans,
/// everything else as a JSON string (escaped).
struct field {
  field(std::string_view k, std::string_view v) : key(k), value(v), quoted(true) {}
  field(std::string_view k, const std::string& v) : key(k), value(v), quoted(true) {}
  field(std::string_view k, const char* v) : key(k), value(v), quoted(true) {}
  field(std::string_view k, std::int64_t v) : key(k), value(std::to_string(v)), quoted(false) {}
  field(std::string_view k, std::uint64_t v) : key(k), value(std::to_string(v)), quoted(false) {}
  field(std::string_view k, int v) : key(k), value(std::to_string(v)), quoted(false) {}
  field(std::string_view k, unsigned v) : key(k), value(std::to_string(v)), quoted(false) {}
  field(std::string_view k, double v);
  field(std::string_view k, bool v) : key(k), value(v ? "true" : "false"), quoted(false) {}

  std::string_view key;
  std::string value;
  bool quoted;
};

/// Lines below this level are dropped. Default: info (or WALHOOK_LOG_LEVEL=debug|info|warn|error).
void set_level(level l);
level current_level();
/// Parses "debug", "info", "warn", "error"; returns false on anything else.
bool parse_level(std::string_view text, level& out);

void emit(level l, std::string_view msg, std::initializer_list<field> fields);

inline void debug(std::string_view msg, std::initializer_list<field> f = {}) { emit(level::debug, msg, f); }
inline void info(std::string_view msg, std::initializer_list<field> f = {}) { emit(level::info, msg, f); }
inline void warn(std::string_view msg, std::initializer_list<field> f = {}) { emit(level::warn, msg, f); }
inline void error(std::string_view msg, std::initializer_list<field> f = {}) { emit(level::error, msg, f); }

/// Appends `text` to `out` as the inside of a JSON string (RFC 8259 §7 escaping), without quotes.
/// Bytes that are not valid UTF-8 (RFC 3629) become U+FFFD, so the result is always valid JSON
/// text for PostgreSQL even when `text` came from a misbehaving HTTP server. Other characters
/// are kept as they are (the data's own: payloads, API answers).
void append_json_escaped(std::string& out, std::string_view text);

/// As append_json_escaped, for a log line: also writes as \uXXXX the characters that change
/// how a terminal or a viewer shows the line without being seen — DEL, C1 controls (U+0080..U+009F),
/// the bidirectional controls (U+202A..U+202E, U+2066..U+2069, and the marks U+061C, U+200E,
/// U+200F) and the line and paragraph separators (U+2028, U+2029) — so an operator-supplied name
/// ("\u202Egnp.exe") cannot reorder or hide what the line says.
void append_log_escaped(std::string& out, std::string_view text);

/// The length of the valid UTF-8 sequence (RFC 3629) at the start of `text`: 1 to 4, or 0 if
/// it starts with a byte that is not one (a stray continuation byte, a lead byte without its
/// continuation bytes, an overlong form, a surrogate, above U+10FFFF). `text` is not empty. Pure.
std::size_t utf8_sequence(std::string_view text);

}  // namespace walhook::log
