#include "relay/core/payload_filter.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <array>
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

namespace walhook::relay {

namespace {

namespace dom = simdjson::dom;

constexpr std::size_t max_text = 4096;
constexpr std::size_t max_clauses = 32;
constexpr std::size_t max_segments = 16;
constexpr std::size_t max_items = 256;

/// An operand or a field's value: null, a boolean, a number — an integer (signed or unsigned 64
/// bits, exact) or a double — or a string.
struct scalar {
  std::variant<std::monostate, bool, std::int64_t, std::uint64_t, double, std::string> v;
  bool number() const { return v.index() >= 2 && v.index() <= 4; }
};

enum class op { eq, ne, in, nin, gt, gte, lt, lte, exists, negate };

struct condition {
  op kind = op::eq;
  scalar value{};                  ///< eq, ne, gt, gte, lt, lte
  std::vector<scalar> set{};       ///< in, nin
  bool exists = true;              ///< exists
  std::vector<condition> inner{};  ///< negate: all of these, negated
};

struct clause {
  std::string path;  ///< as given, for messages
  std::vector<std::string> segments;
  std::vector<condition> all;
};

}  // namespace

struct payload_filter::compiled {
  std::vector<clause> clauses;
};

namespace {

struct compile_error {
  std::string why;
};

std::optional<scalar> scalar_of(dom::element e) {
  switch (e.type()) {
    case dom::element_type::NULL_VALUE: return scalar{};
    case dom::element_type::BOOL: return scalar{bool(e.get_bool().value_unsafe())};
    case dom::element_type::INT64: return scalar{e.get_int64().value_unsafe()};
    case dom::element_type::UINT64: return scalar{e.get_uint64().value_unsafe()};
    case dom::element_type::DOUBLE: return scalar{e.get_double().value_unsafe()};
    case dom::element_type::STRING: return scalar{std::string(e.get_string().value_unsafe())};
    default: return std::nullopt;
  }
}

std::optional<op> op_named(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, op>, 10> ops{{{"$eq", op::eq},
                                                                         {"$ne", op::ne},
                                                                         {"$in", op::in},
                                                                         {"$nin", op::nin},
                                                                         {"$gt", op::gt},
                                                                         {"$gte", op::gte},
                                                                         {"$lt", op::lt},
                                                                         {"$lte", op::lte},
                                                                         {"$exists", op::exists},
                                                                         {"$not", op::negate}}};
  for (const auto& [n, o] : ops)
    if (n == name) return o;
  return std::nullopt;
}

std::vector<condition> operators_of(const std::string& path, dom::object ops, int depth);

condition condition_of(const std::string& path, std::string_view name, dom::element v, int depth) {
  const auto kind = op_named(name);
  if (!kind)
    throw compile_error{fmt::format("{}: unknown operator {} (one of $eq $ne $in $nin $gt $gte $lt $lte $exists $not)",
                                    path, name)};
  condition c;
  c.kind = *kind;
  switch (*kind) {
    case op::eq:
    case op::ne: {
      auto s = scalar_of(v);
      if (!s) throw compile_error{fmt::format("{}: {} needs a string, number, boolean or null", path, name)};
      c.value = std::move(*s);
      break;
    }
    case op::gt:
    case op::gte:
    case op::lt:
    case op::lte: {
      auto s = scalar_of(v);
      if (!s || !(s->number() || std::holds_alternative<std::string>(s->v)))
        throw compile_error{fmt::format("{}: {} needs a number or a string", path, name)};
      c.value = std::move(*s);
      break;
    }
    case op::in:
    case op::nin: {
      dom::array items;
      if (v.get_array().get(items)) throw compile_error{fmt::format("{}: {} needs an array of values", path, name)};
      for (dom::element item : items) {
        auto s = scalar_of(item);
        if (!s) throw compile_error{fmt::format("{}: the items of {} must be strings, numbers, booleans or null", path, name)};
        c.set.push_back(std::move(*s));
      }
      if (c.set.size() > max_items) throw compile_error{fmt::format("{}: {} has over {} items", path, name, max_items)};
      break;
    }
    case op::exists: {
      bool b = false;
      if (v.get_bool().get(b)) throw compile_error{fmt::format("{}: $exists needs true or false", path)};
      c.exists = b;
      break;
    }
    case op::negate: {
      dom::object inner;
      if (v.get_object().get(inner))
        throw compile_error{fmt::format("{}: $not needs an object of operators, e.g. {{\"$in\": [1, 2]}}", path)};
      if (depth > 4) throw compile_error{fmt::format("{}: $not nested more than 5 deep", path)};
      c.inner = operators_of(path, inner, depth + 1);
      break;
    }
  }
  return c;
}

std::vector<condition> operators_of(const std::string& path, dom::object ops, int depth) {
  std::vector<condition> out;
  std::vector<std::string_view> seen;
  for (auto [key, value] : ops) {
    // JSON allows a name twice, and PostgreSQL's jsonb keeps the last: refuse what would not mean
    // one thing everywhere.
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      throw compile_error{fmt::format("{}: {} is given twice", path, key)};
    seen.push_back(key);
    out.push_back(condition_of(path, key, value, depth));
  }
  if (out.empty()) throw compile_error{fmt::format("{}: an empty object of operators", path)};
  return out;
}

std::vector<std::string> segments_of(std::string_view path) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto dot = path.find('.', start);
    const auto seg = path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (seg.empty()) throw compile_error{fmt::format("{}: an empty path segment", path)};
    out.emplace_back(seg);
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (out.size() > max_segments) throw compile_error{fmt::format("{}: over {} path segments", path, max_segments)};
  static constexpr std::array<std::string_view, 4> top{"id", "type", "timestamp", "data"};
  if (std::find(top.begin(), top.end(), out.front()) == top.end())
    throw compile_error{fmt::format("{}: paths start at the webhook body (id, type, timestamp, data): the payload's "
                                    "fields are data.…, e.g. data.{}",
                                    path, path)};
  return out;
}

clause clause_of(std::string_view path, dom::element v) {
  clause c;
  c.path = std::string(path);
  if (path.starts_with("$"))
    throw compile_error{fmt::format("{}: operators go under a path ({{\"data.x\": {{\"{}\": …}}}})", path, path)};
  c.segments = segments_of(path);
  dom::object ops;
  if (!v.get_object().get(ops)) {
    c.all = operators_of(c.path, ops, 0);
    return c;
  }
  auto s = scalar_of(v);
  if (!s) throw compile_error{fmt::format("{}: to match one of several values use {{\"$in\": […]}}", path)};
  c.all.push_back(condition{.kind = op::eq, .value = std::move(*s)});
  return c;
}

// ------------------------------------------------------------------------------- evaluation

/// The body's value at the path; nullopt if a segment is missing.
std::optional<dom::element> lookup(dom::element root, const std::vector<std::string>& segments) {
  dom::element at = root;
  for (const auto& seg : segments) {
    dom::object obj;
    dom::array arr;
    if (!at.get_object().get(obj)) {
      if (obj.at_key(seg).get(at)) return std::nullopt;
    } else if (!at.get_array().get(arr)) {
      std::size_t index = 0;
      if (seg.empty() || !std::all_of(seg.begin(), seg.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
          seg.size() > 9)
        return std::nullopt;
      index = std::stoul(seg);
      if (arr.at(index).get(at)) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  return at;
}

/// -1, 0 or 1 for two numbers, exactly: integers as integers (an id above 2^53 is not its
/// neighbour), and with a double on either side as long double (64 bits of mantissa on x86-64).
int compare_numbers(const scalar& a, const scalar& b) {
  auto sign = [](auto x, auto y) { return x < y ? -1 : x > y ? 1 : 0; };
  const auto* ai = std::get_if<std::int64_t>(&a.v);
  const auto* bi = std::get_if<std::int64_t>(&b.v);
  const auto* au = std::get_if<std::uint64_t>(&a.v);
  const auto* bu = std::get_if<std::uint64_t>(&b.v);
  if (ai && bi) return sign(*ai, *bi);
  if (au && bu) return sign(*au, *bu);
  if (ai && bu) return *ai < 0 ? -1 : sign(static_cast<std::uint64_t>(*ai), *bu);
  if (au && bi) return *bi < 0 ? 1 : sign(*au, static_cast<std::uint64_t>(*bi));
  auto wide = [](const scalar& s) -> long double {
    if (const auto* i = std::get_if<std::int64_t>(&s.v)) return static_cast<long double>(*i);
    if (const auto* u = std::get_if<std::uint64_t>(&s.v)) return static_cast<long double>(*u);
    return static_cast<long double>(std::get<double>(s.v));
  };
  return sign(wide(a), wide(b));
}

/// -1, 0, 1, or nullopt when a and b are not of one comparable type.
std::optional<int> compare(const scalar& a, const scalar& b) {
  if (a.number() && b.number()) return compare_numbers(a, b);
  if (a.v.index() != b.v.index()) return std::nullopt;
  if (const auto* x = std::get_if<std::string>(&a.v)) {
    const int c = x->compare(std::get<std::string>(b.v));
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (const auto* x = std::get_if<bool>(&a.v)) return *x == std::get<bool>(b.v) ? 0 : 1;
  return 0;  // both null
}

/// A scalar test (eq, in, gt, gte, lt, lte) on one field value.
bool holds_on(const condition& c, op kind, const scalar& field) {
  auto cmp = [&](const scalar& operand) { return compare(field, operand); };
  std::optional<int> r;
  switch (kind) {
    case op::eq: return cmp(c.value) == 0;
    case op::in: return std::any_of(c.set.begin(), c.set.end(), [&](const scalar& s) { return cmp(s) == 0; });
    case op::gt: r = cmp(c.value); return r && *r > 0;
    case op::gte: r = cmp(c.value); return r && *r >= 0;
    case op::lt: r = cmp(c.value); return r && *r < 0;
    case op::lte: r = cmp(c.value); return r && *r <= 0;
    default: return false;
  }
}

/// A scalar test on the field: on its value, or on any element of an array.
bool field_holds(const condition& c, op kind, const std::optional<dom::element>& field) {
  if (!field) return false;
  if (auto s = scalar_of(*field)) return holds_on(c, kind, *s);
  dom::array arr;
  if (field->get_array().get(arr)) return false;  // an object: no scalar test holds
  for (dom::element item : arr)
    if (auto s = scalar_of(item); s && holds_on(c, kind, *s)) return true;
  return false;
}

bool holds(const condition& c, const std::optional<dom::element>& field);

bool holds_all(const std::vector<condition>& all, const std::optional<dom::element>& field) {
  return std::all_of(all.begin(), all.end(), [&](const condition& c) { return holds(c, field); });
}

bool holds(const condition& c, const std::optional<dom::element>& field) {
  switch (c.kind) {
    case op::exists: return field.has_value() == c.exists;
    case op::negate: return !holds_all(c.inner, field);
    case op::ne: return !field_holds(c, op::eq, field);
    case op::nin: return !field_holds(c, op::in, field);
    default: return field_holds(c, c.kind, field);
  }
}

}  // namespace

boost::system::result<payload_filter> payload_filter::compile(std::string_view text, std::string* why) {
  auto fail = [&](std::string reason) -> boost::system::result<payload_filter> {
    if (why) *why = std::move(reason);
    return std::make_error_code(std::errc::invalid_argument);
  };
  if (text.size() > max_text) return fail(fmt::format("a filter is at most {} bytes", max_text));
  dom::parser parser;
  dom::element root;
  if (auto e = parser.parse(text.data(), text.size()).get(root))
    return fail(std::string("not JSON: ") + simdjson::error_message(e));
  dom::object top;
  if (root.get_object().get(top))
    return fail(R"(a filter is a JSON object of paths, e.g. {"data.amount": {"$gte": 100}})");
  auto program = std::make_shared<compiled>();
  try {
    for (auto [key, value] : top) {
      for (const auto& c : program->clauses)
        if (c.path == key) throw compile_error{fmt::format("{}: the path is given twice (put its operators in one object)", key)};
      program->clauses.push_back(clause_of(key, value));
    }
  } catch (const compile_error& e) {
    return fail(e.why);
  }
  if (program->clauses.empty()) return fail("an empty filter: give at least one path, or no filter");
  if (program->clauses.size() > max_clauses) return fail(fmt::format("a filter has at most {} paths", max_clauses));
  payload_filter f;
  f.text_ = std::string(text);
  f.program_ = std::move(program);
  return f;
}

namespace {

bool number_char(char c) { return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'; }

/// `body` with each integer too large for 64 bits written as a decimal ("…234" → "…234.0"), which
/// simdjson reads as the nearest double; nullopt if it has none. Strings are left alone (a quote
/// escaped inside one does not end it).
std::optional<std::string> widen_big_integers(std::string_view body) {
  std::string out;
  std::size_t copied = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < body.size();) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      ++i;
      continue;
    }
    if (c == '"') in_string = true;
    if (c != '-' && (c < '0' || c > '9')) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < body.size() && number_char(body[end])) ++end;
    const std::string_view token = body.substr(i, end - i);
    if (token.find_first_of(".eE") == std::string_view::npos) {
      const char* last = token.data() + token.size();
      bool fits = false;
      if (token.front() == '-') {
        std::int64_t v = 0;
        auto [p, ec] = std::from_chars(token.data(), last, v);
        fits = ec == std::errc{} && p == last;
      } else {
        std::uint64_t v = 0;
        auto [p, ec] = std::from_chars(token.data(), last, v);
        fits = ec == std::errc{} && p == last;
      }
      if (!fits && token != "-") {
        out.append(body.substr(copied, end - copied)).append(".0");
        copied = end;
      }
    }
    i = end;
  }
  if (copied == 0) return std::nullopt;
  out.append(body.substr(copied));
  return out;
}

}  // namespace

payload_filter::result payload_filter::evaluate(std::string_view body, std::string* why) const {
  thread_local dom::parser parser;
  dom::element root;
  auto e = parser.parse(body.data(), body.size()).get(root);
  std::optional<std::string> widened;
  // An integer beyond 64 bits anywhere in the body (a large numeric of the payload): compared as
  // the nearest double rather than the body unreadable, which would end the delivery dead.
  if (e == simdjson::NUMBER_ERROR && (widened = widen_big_integers(body)))
    e = parser.parse(widened->data(), widened->size()).get(root);
  if (e) {
    if (why) *why = std::string("the payload filter cannot read the webhook body: ") + simdjson::error_message(e);
    return result::unreadable;
  }
  for (const auto& c : program_->clauses)
    if (!holds_all(c.all, lookup(root, c.segments))) return result::no_match;
  return result::match;
}

std::size_t payload_filter::clauses() const { return program_ ? program_->clauses.size() : 0; }

}  // namespace walhook::relay
