#pragma once
// An endpoint's payload filter (walhook.endpoints.filter, migration 012; docs/endpoint-policies.md):
// a small JSON match language, checked when it is set and evaluated on each event's webhook body
// before the event is routed to the endpoint. An event it does not match is not a delivery.
//
//   {"data.amount": {"$gte": 100}, "data.currency": {"$in": ["EUR", "USD"]}, "type": "order.paid"}
//
// * The filter is a JSON object; every key is a dotted path into the webhook body
//   {"id","type","timestamp","data"} (so "data.…" is the payload; a segment of digits indexes an
//   array), and every clause must hold.
// * A clause's value is a scalar (equality), or an object of operators, all of which must hold:
//   $eq, $ne, $in / $nin (an array of scalars), $gt / $gte / $lt / $lte (a number or a string;
//   compared with a field of the same type only), $exists (true / false), $not (an object of
//   operators, negated).
// * Numbers compare by value, exactly (1 equals 1.0; 64-bit integers are never rounded; an integer
//   beyond 64 bits, a large numeric, compares as the nearest double), strings by bytes; a name given twice in one object is refused; a missing field matches only $ne,
//   $nin, $exists: false and a $not of what needs it. A field holding an array matches a scalar
//   test if one of its elements does (so {"data.tags": "vip"} finds "vip" among the tags).
// * Limits: 4 KiB of text, 32 clauses, 16 path segments, 256 items in $in / $nin.
//
// Pure; the evaluation parses the body with simdjson (one parser per thread).

#include <boost/system/result.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace walhook::relay {

class payload_filter {
 public:
  /// Compiles a filter's JSON text. Errors (std::errc::invalid_argument): not a JSON object, an
  /// unknown operator, a path outside the body, a value of the wrong shape, over a limit — `why`
  /// (if given) says which, naming the path, e.g. "data.amount: $gte needs a number or a string".
  static boost::system::result<payload_filter> compile(std::string_view text, std::string* why = nullptr);

  enum class result {
    match,
    no_match,
    /// simdjson cannot read the body (a number beyond a double's range, nesting deeper than
    /// 1,024, not JSON): neither a match nor not one — walhook ends the delivery dead with `why`
    /// rather than drop or send the event unfiltered.
    unreadable,
  };
  /// Evaluates the filter on a webhook body (JSON text).
  result evaluate(std::string_view body, std::string* why = nullptr) const;
  /// evaluate(body) == match.
  bool matches(std::string_view body) const { return evaluate(body) == result::match; }

  /// The filter as it was given.
  const std::string& text() const { return text_; }
  std::size_t clauses() const;

  struct compiled;  // payload_filter.cpp

 private:
  payload_filter() = default;
  std::string text_;
  std::shared_ptr<const compiled> program_;  // immutable once compiled: shared by copies
};

}  // namespace walhook::relay
