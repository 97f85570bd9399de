// Log lines (common/log.hpp): operator-supplied text (endpoint descriptions, instance names, an
// operator's name) cannot hide or reorder what a line says — C1 and bidirectional controls are
// written as \uXXXX — and bytes that are not UTF-8 (stray or missing continuation bytes,
// overlongs, surrogates, truncated sequences) become U+FFFD, one per byte, while the data path
// (append_json_escaped: payloads, API answers) keeps every valid character as it is.

#include "common/log.hpp"

#include <doctest/doctest.h>
#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <unistd.h>

using walhook::log::append_json_escaped;
using walhook::log::append_log_escaped;
using walhook::log::utf8_sequence;

namespace {

std::string logged(std::string_view text) {
  std::string out;
  append_log_escaped(out, text);
  return out;
}

std::string as_data(std::string_view text) {
  std::string out;
  append_json_escaped(out, text);
  return out;
}

/// The JSON string `inside` (without quotes) as a parser reads it back.
std::string parsed(const std::string& inside) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  REQUIRE(parser.parse("\"" + inside + "\"").get(doc) == simdjson::SUCCESS);
  return std::string(std::string_view(doc));
}

const std::string fffd = "\xEF\xBF\xBD";

}  // namespace

TEST_CASE("log lines write C1 controls, bidirectional controls and separators as \\uXXXX") {
  CHECK(logged("\xC2\x80") == "\\u0080");
  CHECK(logged("\xC2\x85") == "\\u0085");  // NEL: a line break for some viewers
  CHECK(logged("\xC2\x9B[31m") == "\\u009b[31m");  // CSI: a terminal escape without ESC
  CHECK(logged("\xC2\x9F") == "\\u009f");
  CHECK(logged("\x7F") == "\\u007f");
  for (char32_t c : {0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0x200E, 0x200F, 0x2028, 0x2029}) {
    CAPTURE(static_cast<unsigned>(c));
    const std::string utf8{static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
                           static_cast<char>(0x80 | (c & 0x3F))};
    char expected[8];
    std::snprintf(expected, sizeof expected, "\\u%04x", static_cast<unsigned>(c));
    CHECK(logged("a" + utf8 + "b") == std::string("a") + expected + "b");
    CHECK(as_data(utf8) == utf8);  // the data path keeps them: they are the customer's text
    CHECK(parsed(logged(utf8)) == utf8);  // and the log line still says which character it was
  }
  CHECK(logged("\xD8\x9C") == "\\u061c");  // ARABIC LETTER MARK
  // "invoice<U+202E>fdp.exe" reads "invoiceexe.pdf" in a viewer; in the log it stays visible.
  CHECK(logged("invoice\xE2\x80\xAE" "fdp.exe") == "invoice\\u202efdp.exe");
  // Their neighbours, and ordinary text, stay as they are.
  for (std::string_view keep : {"\xC2\xA0", "\xC2\xA9", "\xE2\x80\x8D", "\xE2\x80\xA7", "\xE2\x81\xA5", "Zoë ✓ 日本 😀"}) {
    CAPTURE(keep);
    CHECK(logged(keep) == std::string(keep));
  }
  CHECK(logged("\x01\n\"\\") == "\\u0001\\n\\\"\\\\");
}

TEST_CASE("bytes that are not UTF-8 become U+FFFD, each, in log lines and data alike") {
  struct row {
    std::string_view name;
    std::string in, out;
  };
  const std::string r = fffd;
  const row rows[] = {
      {"a stray continuation byte", "a\x80z", "a" + r + "z"},
      {"a lead byte and a non-continuation", "\xC3(", r + "("},
      {"a 3-byte lead, then ASCII", "\xE2\x82x", r + r + "x"},
      {"truncated at the end (2 of 3)", "ok\xE2\x82", "ok" + r + r},
      {"truncated at the end (1 of 4)", "\xF0", r},
      {"a 4-byte sequence with a bad third byte", "\xF0\x9F\x41\x80", r + r + "A" + r},
      {"overlong '/' (2 bytes)", "\xC0\xAF", r + r},
      {"overlong NUL (3 bytes)", "\xE0\x80\x80", r + r + r},
      {"overlong (4 bytes)", "\xF0\x80\x80\xAF", r + r + r + r},
      {"a surrogate", "\xED\xA0\x80", r + r + r},
      {"above U+10FFFF", "\xF4\x90\x80\x80", r + r + r + r},
      {"0xFF", "\xFF", r},
      {"a C1 lead byte alone", "\xC2", r},
  };
  for (const auto& [name, in, out] : rows) {
    CAPTURE(name);
    CHECK(logged(in) == out);
    CHECK(as_data(in) == out);
    CHECK(parsed(logged(in)) == out);  // always valid JSON text
  }
}

TEST_CASE("utf8_sequence checks every continuation byte") {
  CHECK(utf8_sequence("a") == 1);
  CHECK(utf8_sequence("\xC3\xA9") == 2);
  CHECK(utf8_sequence("\xE2\x9C\x93") == 3);
  CHECK(utf8_sequence("\xF0\x9F\x98\x80") == 4);
  CHECK(utf8_sequence("\xC3\x29") == 0);
  CHECK(utf8_sequence("\xE2\x9C\x29") == 0);
  CHECK(utf8_sequence("\xE2\x29\x93") == 0);
  CHECK(utf8_sequence("\xF0\x9F\x98\x29") == 0);
  CHECK(utf8_sequence("\xF0\x9F\x98") == 0);  // truncated
  CHECK(utf8_sequence("\x80") == 0);
  CHECK(utf8_sequence("\xC1\xBF") == 0);  // overlong
}

TEST_CASE("emit writes operator text escaped: one line, valid JSON, no raw controls") {
  char name[] = "/tmp/walhook_log_test_XXXXXX";
  const int fd = ::mkstemp(name);
  REQUIRE(fd >= 0);
  const int saved = ::dup(STDERR_FILENO);
  REQUIRE(::dup2(fd, STDERR_FILENO) >= 0);
  walhook::log::info("endpoint.described", {{"description", "pay\xE2\x80\xAEtxt.exe\xC2\x85next\nline\xC3"},
                                            {"instance", std::string("a\xE2\x81\xA6") + "b"}});
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(fd);
  std::ifstream in(name);
  std::stringstream all;
  all << in.rdbuf();
  std::remove(name);
  const std::string line = all.str();
  CHECK(std::count(line.begin(), line.end(), '\n') == 1);
  CHECK(line.find("pay\\u202etxt.exe\\u0085next\\nline" + fffd + "\"") != std::string::npos);
  CHECK(line.find("a\\u2066b") != std::string::npos);
  CHECK(line.find("\xE2\x80\xAE") == std::string::npos);
  CHECK(line.find("\xC2\x85") == std::string::npos);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  CHECK(parser.parse(line).get(doc) == simdjson::SUCCESS);
}
