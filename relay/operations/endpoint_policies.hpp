#pragma once
// An endpoint's headers, secret headers, payload filter and rate limit (migration 012;
// docs/endpoint-policies.md) as `walhook endpoint add|update` (and the admin API) set them: the
// checks — the same ones walhook run applies when it reads them — and their columns.

#include <optional>
#include <string>
#include <vector>

namespace walhook::relay::operations {

/// What is given; an absent field is left as it is. An empty list / nullopt inside: none.
struct endpoint_policies {
  std::optional<std::vector<std::string>> headers;         ///< "Name: value" each (--header)
  std::optional<std::vector<std::string>> secret_headers;  ///< "Name: value" each (--header-secret)
  std::optional<std::optional<std::string>> filter;        ///< JSON match expression (--filter)
  std::optional<std::optional<std::string>> max_rate;      ///< "20/s", "600/m" (--max-rate)
  std::optional<std::optional<int>> rate_burst;            ///< 1..100000 (--rate-burst)

  /// The columns given ("headers", "filter", …), in this order.
  std::vector<std::string> given() const;
};

/// Throws invalid_input with the reason (a header walhook owns, a malformed value, a filter
/// that does not compile, a rate it cannot read, a burst over the rate) — never echoing a
/// secret header's value.
void check(const endpoint_policies& p);

/// The column values as SQL parameters, in the order headers, secret_headers, filter (jsonb
/// text), max_rate, rate_burst; nullopt: NULL (or not given: see given()).
std::vector<std::optional<std::string>> column_values(const endpoint_policies& p);

/// How a secret header is shown: "Name: sha256:<first 12 hex of SHA-256 of the value>".
std::string secret_header_fingerprint(const std::string& header_line);

/// The fingerprints of a stored secret_headers array (text[] literal), "; "-separated; "" if none.
std::string secret_headers_shown(const std::optional<std::string>& stored);

}  // namespace walhook::relay::operations
