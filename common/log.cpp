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

void append_json_escaped(std::string& out, std::string_view text) {
  for (unsigned char c : text) {
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
