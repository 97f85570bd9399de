#include "relay/core/endpoint_policies.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace walhook::relay {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

/// RFC 9110 §5.6.2 tchar.
bool token_char(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

constexpr std::size_t max_line = 8192;

}  // namespace

bool reserved_header(std::string_view name) {
  static constexpr std::array<std::string_view, 13> exact{"host",    "content-length", "content-type", "transfer-encoding",
                                                          "connection", "keep-alive",  "te",           "trailer",
                                                          "upgrade",   "expect",       "user-agent",   "traceparent",
                                                          "tracestate"};
  if (std::any_of(exact.begin(), exact.end(), [&](std::string_view r) { return iequals(name, r); })) return true;
  // content-*: the body's (Content-Encoding would lie about it); nats-*: JetStream's own
  // (Nats-Rollup purges a subject, Nats-Expected-* changes what is accepted).
  return istarts_with(name, "proxy-") || istarts_with(name, "webhook-") || istarts_with(name, "walhook-") ||
         istarts_with(name, "content-") || istarts_with(name, "nats-");
}

boost::system::result<header_field> parse_header(std::string_view line, std::string* why) {
  auto fail = [&](std::string reason) -> boost::system::result<header_field> {
    if (why) *why = std::move(reason);
    return std::make_error_code(std::errc::invalid_argument);
  };
  if (line.size() > max_line) return fail(fmt::format("a header is at most {} bytes", max_line));
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return fail("a header is 'Name: value'");
  const auto name = line.substr(0, colon);
  if (name.empty() || !std::all_of(name.begin(), name.end(), token_char))
    return fail("a header name is letters, digits and !#$%&'*+-.^_`|~ (RFC 9110), with no blank before the colon");
  if (reserved_header(name))
    return fail(fmt::format("header {} is walhook's own or HTTP framing and cannot be set per endpoint", name));
  auto value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f)
      return fail(fmt::format("the value of header {} holds a control character (CR, LF, NUL, …)", name));
  }
  return header_field{std::string(name), std::string(value)};
}

boost::system::result<std::vector<header_field>> headers_from_items(const std::vector<std::string>& items,
                                                                    std::string* why) {
  std::vector<header_field> out;
  for (const auto& item : items) {
    auto h = parse_header(item, why);
    if (!h) return h.error();
    out.push_back(std::move(*h));
  }
  if (auto twice = repeated_name({&out})) {
    if (why) *why = "header " + *twice + " is given twice";
    return std::make_error_code(std::errc::invalid_argument);
  }
  return out;
}

std::optional<std::string> repeated_name(std::initializer_list<const std::vector<header_field>*> lists) {
  std::vector<std::string_view> seen;
  for (const auto* list : lists)
    for (const auto& [name, value] : *list) {
      if (std::any_of(seen.begin(), seen.end(), [&](std::string_view s) { return iequals(s, name); })) return name;
      seen.push_back(name);
    }
  return std::nullopt;
}

}  // namespace walhook::relay
