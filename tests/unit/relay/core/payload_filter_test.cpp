// The payload filter (relay/core/payload_filter.hpp): what compiles and what is refused with
// which reason, and a table of bodies each clause matches or not.

#include "relay/core/payload_filter.hpp"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

using walhook::relay::payload_filter;

namespace {

std::string body(const std::string& data, const std::string& type = "order.paid") {
  return R"({"id":"e1","type":")" + type + R"(","timestamp":"2026-12-03T10:00:00Z","data":)" + data + "}";
}

bool matches(const std::string& filter, const std::string& b) {
  std::string why;
  auto f = payload_filter::compile(filter, &why);
  INFO(filter, " → ", why);
  REQUIRE(f.has_value());
  return f->matches(b);
}

std::string refusal(const std::string& filter) {
  std::string why;
  auto f = payload_filter::compile(filter, &why);
  CHECK_FALSE(f.has_value());
  return why;
}

}  // namespace

TEST_CASE("payload filter: the issue's example, clause by clause") {
  const std::string filter = R"({"data.amount": {"$gte": 100}, "data.currency": {"$in": ["EUR", "USD"]}})";
  CHECK(matches(filter, body(R"({"amount": 150, "currency": "EUR"})")));
  CHECK(matches(filter, body(R"({"amount": 100.0, "currency": "USD"})")));  // 100.0 is 100
  CHECK_FALSE(matches(filter, body(R"({"amount": 99.99, "currency": "EUR"})")));
  CHECK_FALSE(matches(filter, body(R"({"amount": 150, "currency": "GBP"})")));
  CHECK_FALSE(matches(filter, body(R"({"amount": "150", "currency": "EUR"})")));  // a string is not a number
  CHECK_FALSE(matches(filter, body(R"({"currency": "EUR"})")));                   // missing
  CHECK_FALSE(matches(filter, "not json"));
}

TEST_CASE("payload filter: operators, paths, arrays and missing fields") {
  struct row {
    const char* filter;
    const char* data;
    bool match;
  };
  const std::vector<row> rows{
      {R"({"data.status": "paid"})", R"({"status": "paid"})", true},
      {R"({"data.status": "paid"})", R"({"status": "open"})", false},
      {R"({"data.status": {"$ne": "paid"}})", R"({"status": "open"})", true},
      {R"({"data.status": {"$ne": "paid"}})", R"({})", true},  // missing is not "paid"
      {R"({"data.status": {"$nin": ["a", "b"]}})", R"({"status": "c"})", true},
      {R"({"data.status": {"$nin": ["a", "b"]}})", R"({"status": "a"})", false},
      {R"({"data.n": {"$gt": 1, "$lt": 3}})", R"({"n": 2})", true},
      {R"({"data.n": {"$gt": 1, "$lt": 3}})", R"({"n": 3})", false},
      {R"({"data.n": {"$lte": -1.5}})", R"({"n": -2})", true},
      {R"({"data.name": {"$gte": "m"}})", R"({"name": "zoe"})", true},
      {R"({"data.name": {"$gte": "m"}})", R"({"name": "adam"})", false},
      {R"({"data.vip": true})", R"({"vip": true})", true},
      {R"({"data.vip": true})", R"({"vip": 1})", false},
      {R"({"data.note": null})", R"({"note": null})", true},
      {R"({"data.note": {"$exists": true}})", R"({"note": null})", true},
      {R"({"data.note": {"$exists": false}})", R"({})", true},
      {R"({"data.note": {"$exists": false}})", R"({"note": 1})", false},
      {R"({"data.customer.country": "FR"})", R"({"customer": {"country": "FR"}})", true},
      {R"({"data.customer.country": "FR"})", R"({"customer": "FR"})", false},
      {R"({"data.items.1.sku": "B"})", R"({"items": [{"sku": "A"}, {"sku": "B"}]})", true},
      {R"({"data.items.2.sku": "B"})", R"({"items": [{"sku": "A"}, {"sku": "B"}]})", false},
      {R"({"data.tags": "vip"})", R"({"tags": ["new", "vip"]})", true},  // any element
      {R"({"data.tags": {"$in": ["x", "new"]}})", R"({"tags": ["new", "vip"]})", true},
      {R"({"data.tags": {"$ne": "vip"}})", R"({"tags": ["new", "vip"]})", false},
      {R"({"data.n": {"$not": {"$in": [1, 2]}}})", R"({"n": 3})", true},
      {R"({"data.n": {"$not": {"$in": [1, 2]}}})", R"({"n": 2})", false},
      {R"({"data.n": {"$not": {"$gt": 5}}})", R"({})", true},
      {R"({"data.obj": "x"})", R"({"obj": {"a": 1}})", false},
      {R"({"data.big": 12345678901234567890})", R"({"big": 12345678901234567890})", true},
  };
  for (const auto& r : rows) {
    INFO(r.filter, " on ", r.data);
    CHECK(matches(r.filter, body(r.data)) == r.match);
  }
  CHECK(matches(R"({"type": "order.paid"})", body("{}")));
  // 64-bit ids are compared exactly: 2^53 + 1 is not its neighbour (a double would merge them).
  CHECK(matches(R"({"data.id": 9007199254740993})", body(R"({"id": 9007199254740993})")));
  CHECK_FALSE(matches(R"({"data.id": 9007199254740993})", body(R"({"id": 9007199254740992})")));
  CHECK(matches(R"({"data.id": {"$gt": 9007199254740992}})", body(R"({"id": 9007199254740993})")));
  CHECK(matches(R"({"data.id": {"$lt": 0}})", body(R"({"id": -9223372036854775808})")));
  CHECK(matches(R"({"data.id": {"$gt": -1}})", body(R"({"id": 18446744073709551615})")));
  CHECK(matches(R"({"data.x": {"$gt": 1.5}})", body(R"({"x": 2})")));
  CHECK_FALSE(matches(R"({"data.x": {"$gt": 2.5}})", body(R"({"x": 2})")));
  CHECK_FALSE(matches(R"({"type": {"$in": ["order.shipped"]}})", body("{}")));
}

TEST_CASE("payload filter: a body it cannot read is neither a match nor not one") {
  std::string why;
  auto f = payload_filter::compile(R"({"data.amount": {"$gte": 100}})");
  REQUIRE(f.has_value());
  // Valid JSON that simdjson does not take: a number beyond a double's range.
  CHECK(f->evaluate(body(R"({"amount": 1e400})"), &why) == payload_filter::result::unreadable);
  CHECK(why.find("cannot read the webhook body") != std::string::npos);
  CHECK(f->evaluate(body(R"({"amount": 150})")) == payload_filter::result::match);
  CHECK(f->evaluate(body(R"({"amount": 50})")) == payload_filter::result::no_match);
}

TEST_CASE("payload filter: an integer beyond 64 bits (a large numeric) compares as the nearest double, wherever it is") {
  // PostgreSQL's numeric prints so; simdjson's DOM refuses the whole body for one of them.
  const std::string big = "123456789012345678901234567890";
  CHECK(matches(R"({"data.amount": {"$gte": 100}})", body(R"({"ledger": )" + big + R"(, "amount": 150})")));
  CHECK_FALSE(matches(R"({"data.amount": {"$gte": 100}})", body(R"({"ledger": -)" + big + R"(, "amount": 50})")));
  CHECK(matches(R"({"data.ledger": {"$gt": 1e29, "$lt": 2e29}})", body(R"({"ledger": )" + big + "}")));
  CHECK(matches(R"({"data.items.1": {"$gt": 1.8e19}})", body(R"({"items": [1, 18446744073709551616]})")));
  // 64-bit integers themselves stay exact; digits in strings (an escaped quote included) are left alone.
  CHECK(matches(R"({"data.max": 18446744073709551615})", body(R"({"max": 18446744073709551615, "x": )" + big + "}")));
  CHECK(matches(R"({"data.s": "a\"123456789012345678901234567890"})",
                body(R"({"s": "a\"123456789012345678901234567890", "x": )" + big + "}")));
}

TEST_CASE("payload filter: what is refused, and why") {
  CHECK(refusal(R"({"data.amount": {"$gte": 100}, "data.amount": {"$lt": 1000}})").find("given twice") != std::string::npos);
  CHECK(refusal(R"({"data.amount": {"$gte": 100, "$gte": 5}})").find("$gte is given twice") != std::string::npos);
  CHECK(refusal("[1]").find("a JSON object of paths") != std::string::npos);
  CHECK(refusal("{").find("not JSON") != std::string::npos);
  CHECK(refusal("{}").find("empty filter") != std::string::npos);
  CHECK(refusal(R"({"amount": 1})").find("data.amount") != std::string::npos);
  CHECK(refusal(R"({"data.x": {"$regex": "a"}})").find("unknown operator $regex") != std::string::npos);
  CHECK(refusal(R"({"data.x": {"$gt": true}})").find("$gt needs a number or a string") != std::string::npos);
  CHECK(refusal(R"({"data.x": {"$in": "a"}})").find("$in needs an array") != std::string::npos);
  CHECK(refusal(R"({"data.x": {"$in": [[1]]}})").find("items of $in") != std::string::npos);
  CHECK(refusal(R"({"data.x": {"$exists": 1}})").find("$exists needs true or false") != std::string::npos);
  CHECK(refusal(R"({"data.x": {"$not": 1}})").find("$not needs an object") != std::string::npos);
  CHECK(payload_filter::compile(R"({"data.x": {"$not": {"$not": {"$not": {"$not": {"$not": {"$eq": 1}}}}}}})").has_value());
  CHECK(refusal(R"({"data.x": {"$not": {"$not": {"$not": {"$not": {"$not": {"$not": {"$eq": 1}}}}}}}})")
            .find("$not nested more than 5 deep") != std::string::npos);
  CHECK(refusal(R"({"data.x": [1, 2]})").find("$in") != std::string::npos);
  CHECK(refusal(R"({"data..x": 1})").find("empty path segment") != std::string::npos);
  CHECK(refusal(R"({"$or": []})").find("operators go under a path") != std::string::npos);
  CHECK(refusal(R"({"data.x": {}})").find("empty object of operators") != std::string::npos);
  std::string many = "{";
  for (int i = 0; i < 33; ++i) many += (i ? "," : "") + std::string("\"data.f") + std::to_string(i) + "\": 1";
  many += "}";
  CHECK(refusal(many).find("at most 32") != std::string::npos);
  CHECK(refusal(std::string(5000, ' ') + "{}").find("at most 4096 bytes") != std::string::npos);
}
