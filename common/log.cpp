#include "common/log.hpp"

#include "common/time.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <unistd.h>

namespace walhook::log {
namespace {

level initial_level() {
  level l = level::info;
  if (const char* env = std::getenv("WALHOOK_LOG_LEVEL")) parse_level(env, l);
  return l;
}

std::atomic<level>& threshold() {
  static std::atomic<level> value{initial_level()};
  return value;
}

std::string_view name(level l) {
  switch (l) {
    case level::debug: return "debug";
    case level::info: return "info";
    case level::warn: return "warn";
    case level::error: return "error";
  }
  return "info";
}

}  // namespace

field::field(std::string_view k, double v) : key(k), value(fmt::format("{:.6g}", v)), quoted(false) {}

void set_level(level l) { threshold().store(l); }
level current_level() { return threshold().load(); }

bool parse_level(std::string_view text, level& out) {
  if (text == "debug") out = level::debug;
  else if (text == "info") out = level::info;
  else if (text == "warn" || text == "warning") out = level::warn;
  else if (text == "error") out = level::error;
  else return false;
  return true;
}

std::size_t utf8_sequence(std::string_view s) {
  auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  auto cont = [&](std::size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;  // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;  // a continuation byte, 0xC0/0xC1 (overlong), 0xF5..0xFF
}

namespace {

/// The code point of a valid 2- or 3-byte sequence (utf8_sequence said so).
char32_t code_point(std::string_view seq) {
  const auto b = [&](std::size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(seq[i])); };
  if (seq.size() == 2) return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
  return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
}

/// Characters a log line writes as \uXXXX although JSON allows them raw: they are invisible
/// and change how the line reads (C1 controls, bidirectional controls and marks, separators;
/// DEL is handled with the ASCII controls).
bool hidden_in_logs(char32_t c) {
  return (c >= 0x80 && c <= 0x9F) || c == 0x061C || c == 0x200E || c == 0x200F || c == 0x2028 || c == 0x2029 ||
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

void append_escaped(std::string& out, std::string_view text, bool for_log) {
  while (!text.empty()) {
    unsigned char c = static_cast<unsigned char>(text.front());
    if (c >= 0x80) {
      // Text from outside (an HTTP header, a server message) may not be UTF-8; JSON and
      // PostgreSQL need it to be. Invalid bytes become U+FFFD, one each.
      std::size_t n = utf8_sequence(text);
      if (n == 0) {
        out += "\xEF\xBF\xBD";
        n = 1;
      } else if (for_log && n <= 3 && hidden_in_logs(code_point(text.substr(0, n)))) {
        out += fmt::format("\\u{:04x}", static_cast<std::uint32_t>(code_point(text.substr(0, n))));
      } else {
        out.append(text.substr(0, n));
      }
      text.remove_prefix(n);
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (for_log && c == 0x7F)) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
    text.remove_prefix(1);
  }
}

}  // namespace

void append_json_escaped(std::string& out, std::string_view text) { append_escaped(out, text, false); }

void append_log_escaped(std::string& out, std::string_view text) { append_escaped(out, text, true); }

void emit(level l, std::string_view msg, std::initializer_list<field> fields) {
  if (l < current_level()) return;
  std::string line;
  line.reserve(128);
  line += "{\"ts\":\"";
  line += format_iso8601(system_now());
  line += "\",\"level\":\"";
  line += name(l);
  line += "\",\"msg\":\"";
  append_log_escaped(line, msg);
  line += '"';
  for (const field& f : fields) {
    line += ",\"";
    append_log_escaped(line, f.key);
    line += "\":";
    if (f.quoted) {
      line += '"';
      append_log_escaped(line, f.value);
      line += '"';
    } else {
      line += f.value;
    }
  }
  line += "}\n";
  // One write per line keeps lines whole when several threads or processes share stderr.
  std::string_view rest = line;
  while (!rest.empty()) {
    ssize_t n = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (n <= 0) break;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace walhook::log
