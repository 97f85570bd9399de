#pragma once
// An endpoint's headers, secret headers, payload filter and rate limit (migration 012), OAuth2
// client credentials and proxy (migration 014; docs/endpoint-policies.md) as `walhook endpoint
// add|update` (and the admin API) set them: the checks — the same ones walhook run applies when
// it reads them — and their columns.

#include "relay/operations/blocking_db.hpp"

#include <cstdint>
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
  std::optional<std::optional<std::string>> oauth_token_url;      ///< http(s) URL (--oauth-token-url)
  std::optional<std::optional<std::string>> oauth_client_id;      ///< (--oauth-client-id)
  std::optional<std::optional<std::string>> oauth_client_secret;  ///< a secret (--oauth-client-secret)
  std::optional<std::optional<std::string>> oauth_scope;          ///< space-separated (--oauth-scope)
  std::optional<std::optional<std::string>> proxy;                ///< "direct" or http://host:port (--proxy)

  /// The columns given ("headers", "filter", …), in this order.
  std::vector<std::string> given() const;
};

/// Throws invalid_input with the reason (a header walhook owns, a malformed value, a filter
/// that does not compile, a rate it cannot read, a burst out of range) — never echoing a
/// secret header's value.
void check(const endpoint_policies& p);
/// check(), and, for a new endpoint at `url`, what only holds of the whole: no header name twice
/// across --header and --header-secret, no burst without a rate or over it, the OAuth2 token URL,
/// client id and secret together, neither OAuth2 nor a proxy for a broker, no Authorization
/// header beside OAuth2.
void check_new(const endpoint_policies& p, const std::string& url);
/// check(), and the same whole-endpoint rules with the endpoint's stored values where `p` gives
/// none (call it in the update's transaction, after locking the row). `--max-rate none` without
/// --rate-burst clears the burst too (p is changed so).
void check_update(blocking_db& db, std::int64_t endpoint_id, endpoint_policies& p);

/// Writes the given columns of endpoint `endpoint_id` after check_update (in the caller's
/// transaction, the row locked). Nothing given: nothing done.
void write_policies(blocking_db& db, std::int64_t endpoint_id, endpoint_policies& p);

/// The column values as SQL parameters, in the order headers, secret_headers, filter (jsonb
/// text), max_rate, rate_burst, oauth_token_url, oauth_client_id, oauth_client_secret,
/// oauth_scope, proxy; nullopt: NULL (or not given: see given()).
std::vector<std::optional<std::string>> column_values(const endpoint_policies& p);

/// How a secret header is shown: "Name: sha256:<first 12 hex of HMAC-SHA256(key, value)>", keyed
/// with `key` (the endpoint's signing secret column), so the value cannot be guessed from it
/// offline; it changes when the signing secret is rotated.
std::string secret_header_fingerprint(const std::string& header_line, const std::string& key);

/// The fingerprints of a stored secret_headers array (text[] literal), "; "-separated; "" if none.
std::string secret_headers_shown(const std::optional<std::string>& stored, const std::string& key);

/// How an OAuth2 client secret is shown: "sha256:<first 12 hex>", keyed like a secret header's.
std::string oauth_secret_shown(const std::string& client_secret, const std::string& key);

}  // namespace walhook::relay::operations
