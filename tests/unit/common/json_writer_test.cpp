// The streaming JSON writer (common/json_writer.hpp): commas at every nesting level, string
// escaping (RFC 8259 §7), and output that a real parser (simdjson) accepts and reads back.

#include "common/json_writer.hpp"

#include <doctest/doctest.h>
#include <simdjson.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

using walhook::json_writer;

namespace {

bool parses(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  return parser.parse(json).get(doc) == simdjson::SUCCESS;
}

/// Writes `s` as a JSON string and reads it back with simdjson.
std::optional<std::string> round_trip(std::string_view s) {
  json_writer w;
  w.begin_array().string(s).end_array();
  simdjson::dom::parser parser;
  simdjson::dom::array arr;
  if (parser.parse(w.str()).get(arr) != simdjson::SUCCESS) return std::nullopt;
  std::string_view out;
  if (arr.at(0).get(out) != simdjson::SUCCESS) return std::nullopt;
  return std::string(out);
}

}  // namespace

TEST_CASE("json_writer: empty containers") {
  CHECK(json_writer{}.begin_object().end_object().str() == "{}");
  CHECK(json_writer{}.begin_array().end_array().str() == "[]");
  CHECK(json_writer{}.empty());
  CHECK_FALSE(json_writer{}.null().empty());
}

TEST_CASE("json_writer: commas between members and elements, none after keys or openers") {
  json_writer w;
  w.begin_object()
      .field("a", 1)
      .field("b", "two")
      .key("c")
      .begin_array()
      .number(std::int64_t{1})
      .number(std::int64_t{2})
      .begin_object()
      .end_object()
      .begin_array()
      .end_array()
      .null()
      .end_array()
      .key("d")
      .begin_object()
      .field("e", true)
      .key("f")
      .begin_object()
      .field("g", false)
      .end_object()
      .end_object()
      .field("h", std::string("last"))
      .end_object();
  CHECK(w.str() == R"({"a":1,"b":"two","c":[1,2,{},[],null],"d":{"e":true,"f":{"g":false}},"h":"last"})");
  CHECK(parses(w.str()));
}

TEST_CASE("json_writer: arrays of objects and nested arrays") {
  json_writer w;
  w.begin_array();
  for (int i = 0; i < 3; ++i) w.begin_object().field("i", i).end_object();
  w.begin_array().begin_array().end_array().begin_array().number(std::int64_t{7}).end_array().end_array();
  w.end_array();
  CHECK(w.str() == R"([{"i":0},{"i":1},{"i":2},[[],[7]]])");
  CHECK(parses(w.str()));
}

TEST_CASE("json_writer: a value right after a closed container gets a comma") {
  json_writer w;
  w.begin_object().key("a").begin_object().end_object().key("b").begin_array().end_array().field("c", 3).end_object();
  CHECK(w.str() == R"({"a":{},"b":[],"c":3})");
}

TEST_CASE("json_writer: string escaping") {
  CHECK(json_writer{}.string("plain").str() == R"("plain")");
  CHECK(json_writer{}.string("").str() == R"("")");
  CHECK(json_writer{}.string("a\"b").str() == R"("a\"b")");
  CHECK(json_writer{}.string("a\\b").str() == R"("a\\b")");
  CHECK(json_writer{}.string("\n\r\t\b\f").str() == R"("\n\r\t\b\f")");
  CHECK(json_writer{}.string(std::string_view("\x00", 1)).str() == R"("\u0000")");
  CHECK(json_writer{}.string("\x01\x1f").str() == R"("\u0001\u001f")");
  CHECK(json_writer{}.string("/ and \x7f stay").str() == "\"/ and \x7f stay\"");
  CHECK(json_writer{}.string("ünïcode ✓ 日本").str() == "\"ünïcode ✓ 日本\"");
  CHECK(json_writer{}.string("</script>").str() == R"("</script>")");
}

TEST_CASE("json_writer: keys are escaped like strings") {
  json_writer w;
  w.begin_object().field("we\"ird\nkey", "v").end_object();
  CHECK(w.str() == R"({"we\"ird\nkey":"v"})");
  CHECK(parses(w.str()));
}

TEST_CASE("json_writer: every ASCII character round-trips through a JSON parser") {
  for (int c = 0; c < 128; ++c) {
    CAPTURE(c);
    const std::string s = "x" + std::string(1, static_cast<char>(c)) + "y";
    CHECK(round_trip(s) == s);
  }
  const std::string all = [] {
    std::string s;
    for (int c = 0; c < 128; ++c) s += static_cast<char>(c);
    return s + "ünïcode ✓";
  }();
  CHECK(round_trip(all) == all);
}

TEST_CASE("json_writer: integers") {
  CHECK(json_writer{}.number(std::int64_t{0}).str() == "0");
  CHECK(json_writer{}.number(std::int64_t{-42}).str() == "-42");
  CHECK(json_writer{}.number(std::numeric_limits<std::int64_t>::max()).str() == "9223372036854775807");
  CHECK(json_writer{}.number(std::numeric_limits<std::int64_t>::min()).str() == "-9223372036854775808");
  json_writer w;
  w.begin_object().field("int", 5).field("ll", 6LL).field("i64", std::int64_t{7}).end_object();
  CHECK(w.str() == R"({"int":5,"ll":6,"i64":7})");
}

TEST_CASE("json_writer: doubles are valid JSON numbers; non-finite values become null") {
  CHECK(json_writer{}.number(1.5).str() == "1.5");
  CHECK(json_writer{}.number(0.1).str() == "0.1");
  CHECK(json_writer{}.number(-2.0).str() == "-2");
  for (double v : {0.0, -0.0, 1e20, 1e-7, 123456.789, std::numeric_limits<double>::max(),
                   std::numeric_limits<double>::denorm_min()}) {
    CAPTURE(v);
    json_writer w;
    w.begin_array().number(v).end_array();
    CHECK(parses(w.str()));
    simdjson::dom::parser parser;
    simdjson::dom::array arr;
    REQUIRE(parser.parse(w.str()).get(arr) == simdjson::SUCCESS);
    double back = 0;
    REQUIRE(arr.at(0).get(back) == simdjson::SUCCESS);
    CHECK(back == v);
  }
  for (double v : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity()}) {
    CAPTURE(v);
    json_writer w;
    w.begin_object().key("v").number(v).end_object();
    CHECK(w.str() == R"({"v":null})");
  }
}

TEST_CASE("json_writer: booleans, null, raw JSON and optionals") {
  json_writer w;
  w.begin_array()
      .boolean(true)
      .boolean(false)
      .null()
      .raw(R"({"already": ["json"]})")
      .optional_string(std::nullopt)
      .optional_string(std::string("s"))
      .end_array();
  CHECK(w.str() == R"([true,false,null,{"already": ["json"]},null,"s"])");
  CHECK(parses(w.str()));

  json_writer o;
  o.begin_object()
      .field("s", std::optional<std::string>{})
      .field("t", std::optional<std::string>{"x"})
      .field("n", std::optional<std::int64_t>{})
      .field("m", std::optional<std::int64_t>{-1})
      .field("b", false)
      .field("sv", std::string_view("view"))
      .end_object();
  CHECK(o.str() == R"({"s":null,"t":"x","n":null,"m":-1,"b":false,"sv":"view"})");
}

TEST_CASE("json_writer: take() moves the document out") {
  json_writer w;
  w.begin_object().field("a", 1).end_object();
  std::string doc = w.take();
  CHECK(doc == R"({"a":1})");
}

TEST_CASE("text that is not UTF-8 becomes U+FFFD, so the JSON stays valid for PostgreSQL") {
  std::string out;
  walhook::log::append_json_escaped(out, std::string("caf\xe9\xff ok \xc3\xa9 \xed\xa0\x80 \xf0\x9f\x98\x80 \xc0\xaf"));
  CHECK(out == "caf\xEF\xBF\xBD\xEF\xBF\xBD ok \xc3\xa9 \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD \xf0\x9f\x98\x80 \xEF\xBF\xBD\xEF\xBF\xBD");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  CHECK(parser.parse("\"" + out + "\"").get(doc) == simdjson::SUCCESS);
}
