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

namespace {

/// Length of the valid UTF-8 sequence at the start of `s` (RFC 3629: no overlongs, no
/// surrogates, nothing above U+10FFFF), or 0 if it is not one.
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
  return 0;
}

}  // namespace

void append_json_escaped(std::string& out, std::string_view text) {
  while (!text.empty()) {
    unsigned char c = static_cast<unsigned char>(text.front());
    if (c >= 0x80) {
      // Text from outside (an HTTP header, a server message) may not be UTF-8; JSON and
      // PostgreSQL need it to be. Invalid bytes become U+FFFD.
      std::size_t n = utf8_sequence(text);
      if (n == 0) {
        out += "\xEF\xBF\xBD";
        text.remove_prefix(1);
      } else {
        out.append(text.substr(0, n));
        text.remove_prefix(n);
      }
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
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
    text.remove_prefix(1);
  }
}

void emit(level l, std::string_view msg, std::initializer_list<field> fields) {
  if (l < current_level()) return;
  std::string line;
  line.reserve(128);
  line += "{\"ts\":\"";
  line += format_iso8601(system_now());
  line += "\",\"level\":\"";
  line += name(l);
  line += "\",\"msg\":\"";
  append_json_escaped(line, msg);
  line += '"';
  for (const field& f : fields) {
    line += ",\"";
    append_json_escaped(line, f.key);
    line += "\":";
    if (f.quoted) {
      line += '"';
      append_json_escaped(line, f.value);
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
