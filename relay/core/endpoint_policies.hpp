#pragma once
// What an operator sets per endpoint besides its URL (migration 012; docs/endpoint-policies.md):
// static request headers — checked here, for the CLI and the API when they are set and for
// walhook run when it reads them — and their stored form. Pure.

#include <boost/system/result.hpp>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace walhook::relay {

using header_field = std::pair<std::string, std::string>;

/// Names walhook or HTTP framing owns, which an endpoint's headers may not set (case-insensitive):
/// Host, Content-* (Length, Type, Encoding, …), Transfer-Encoding, Connection, Keep-Alive, TE,
/// Trailer, Upgrade, Expect, Proxy-*, User-Agent, traceparent, tracestate, webhook-* / walhook-*,
/// and JetStream's Nats-*.
bool reserved_header(std::string_view name);

/// "Name: value" (RFC 9110 §5: the name a token, the value without CR, LF, NUL or other
/// control characters but HTAB; blanks around the value dropped; at most 8 KiB in all).
/// Errors (std::errc::invalid_argument): `why` says what, naming the header but never its value.
boost::system::result<header_field> parse_header(std::string_view line, std::string* why = nullptr);

/// Headers from their stored form (a text[] column's items, "Name: value" each). An item that
/// does not parse, names a reserved header, or a name given twice is an error: walhook sends
/// none of them then.
boost::system::result<std::vector<header_field>> headers_from_items(const std::vector<std::string>& items,
                                                                    std::string* why = nullptr);

/// A header name that appears twice (case-insensitive) across the lists (an endpoint's headers
/// and secret headers), or nullopt.
std::optional<std::string> repeated_name(std::initializer_list<const std::vector<header_field>*> lists);

}  // namespace walhook::relay
