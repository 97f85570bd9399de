#pragma once
// Tenants as the tenant API sees them (docs/tenant-api.md; migration 015): their bearer tokens,
// the limits the operator sets on what they may do by themselves, and the audit log of what
// they did. Shared by `walhook tenant …` (relay/cli/tenant.cpp) and the tenant API
// (relay/tenant/). Each call is one statement or one transaction on a blocking connection.
//
// A token is "wht_" + base64url (RFC 4648 §5, no padding) of 32 random bytes (OpenSSL
// RAND_bytes); only its SHA-256 (hex) is stored, so a copy of the database opens nothing.

#include "relay/operations/blocking_db.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::relay::operations {

/// What a token may do: read (GET routes only) or manage (every route).
enum class token_scope { read, manage };
/// "read", "manage". Pure.
std::string_view to_string(token_scope s);
/// The scope named `text`; nullopt for anything else. Pure.
std::optional<token_scope> parse_scope(std::string_view text);

/// The prefix of every tenant API token (so a leaked one is recognisable, e.g. by secret scanners).
inline constexpr std::string_view tenant_token_prefix = "wht_";

/// Base64url (RFC 4648 §5) of `bytes`, without padding: tokens and the tenant API's cursors. Pure.
std::string base64url_encode(std::string_view bytes);

/// A new token: tenant_token_prefix + base64url of 32 random bytes (OpenSSL RAND_bytes).
std::string generate_tenant_token();
/// SHA-256 of `text` as 64 lowercase hex digits. Pure.
std::string sha256_hex(std::string_view text);
/// "sha256:" + the first 12 hex digits of SHA-256 of the token: how logs, the audit log and
/// `walhook tenant token list` name a token (never the token). Pure.
std::string tenant_token_fingerprint(std::string_view token);

/// Checks a tenant id given to `walhook tenant …`: 1–200 bytes, not an inbox source's tenant
/// ("inbox:…", any case: their endpoints are the operator's handlers, exempt from the SSRF guard's
/// private-network rule) and not `operator_tenant` (its endpoints receive walhook's notifications
/// about every tenant's endpoints). Throws invalid_input saying which. Pure.
void check_tenant_name(const std::string& tenant, std::string_view operator_tenant);
/// Whether no token may act for `tenant`: check_tenant_name would refuse it. Pure.
bool is_closed_tenant(const std::string& tenant, std::string_view operator_tenant);

struct created_token {
  std::int64_t id = 0;
  std::string token;        ///< shown once
  std::string fingerprint;  ///< tenant_token_fingerprint(token)
  std::string expires_at;   ///< RFC 3339 UTC, "" = never
};
/// Stores a new token's hash for `tenant` with `scope`, expiring after `lifetime` (nullopt:
/// never). Throws invalid_input (check_tenant_name, a lifetime of zero or less).
created_token create_token(blocking_db& db, const std::string& tenant, token_scope scope,
                           std::optional<std::chrono::seconds> lifetime, const std::string& description,
                           std::string_view operator_tenant);

/// A stored token, as `walhook tenant token list` shows it (times RFC 3339 UTC, "" = none).
struct token_row {
  std::int64_t id = 0;
  std::string tenant;
  std::string fingerprint;
  std::string scope;
  std::string description;
  std::string created_at, expires_at, last_used_at, revoked_at;
  bool expired = false;  ///< expires_at has passed
};
/// Tokens of `tenant` (every tenant's if empty), oldest first; revoked ones too.
std::vector<token_row> list_tokens(blocking_db& db, const std::string& tenant);
/// Revokes the token with this id, or this fingerprint ("sha256:…", as list shows it): it is
/// refused from the next request on. Returns the revoked row. Throws not_found (no such token,
/// or already revoked: the message says which), invalid_input (a fingerprint that names several).
token_row revoke_token(blocking_db& db, const std::string& id_or_fingerprint);

/// Who a presented token is: its row's id, tenant and scope.
struct token_holder {
  std::int64_t token_id = 0;
  std::string tenant;
  token_scope scope = token_scope::read;
  std::string fingerprint;
};
/// The holder of `token` if it is stored, not revoked and not expired; nullopt otherwise (one
/// answer for all: a caller learns nothing of why). Records last_used_at (at most once a minute
/// per token, so a busy token writes little).
std::optional<token_holder> authenticate(blocking_db& db, const std::string& token);

/// What the operator lets a tenant do by itself through the API.
struct tenant_limits {
  int max_endpoints = 20;    ///< endpoints the tenant may have (those the operator added count too)
  int max_concurrency = 10;  ///< the highest max_concurrency of an endpoint it creates or updates
};
/// The tenant's limits (the defaults above without a row).
tenant_limits limits_of(blocking_db& db, const std::string& tenant);
/// Sets what is given, keeping the rest. Throws invalid_input out of range (max_endpoints
/// 0..100000, max_concurrency 1..1000).
tenant_limits set_limits(blocking_db& db, const std::string& tenant, std::optional<int> max_endpoints,
                         std::optional<int> max_concurrency);

/// The portal (/portal/): a one-time code `walhook tenant portal-link` mints, exchanged once,
/// before it expires, for a session. Codes, session ids and CSRF tokens are 32 random bytes in
/// base64url; only their SHA-256 is stored.
inline constexpr std::chrono::seconds max_portal_link_lifetime{24 * 3600};
inline constexpr std::chrono::seconds portal_session_lifetime{3600};

struct portal_code {
  std::string code;
  std::string expires_at;  ///< RFC 3339 UTC
};
/// A one-time code for `tenant`, valid for `lifetime` (1 s to max_portal_link_lifetime). Throws
/// invalid_input (check_tenant_name, the lifetime).
portal_code create_portal_code(blocking_db& db, const std::string& tenant, std::chrono::seconds lifetime,
                               std::string_view operator_tenant);

struct portal_session {
  std::string id;    ///< the cookie's value
  std::string csrf;  ///< the X-CSRF-Token every request of the session carries
  std::string tenant;
  std::string expires_at;  ///< RFC 3339 UTC: portal_session_lifetime after the exchange
};
/// Exchanges `code` for a new session: nullopt if it is unknown, used or expired (one answer for
/// all). The code is marked used in the same statement that checks it, so two exchanges at once
/// cannot both succeed. Sessions and codes past their expiry are deleted on the way.
std::optional<portal_session> exchange_portal_code(blocking_db& db, const std::string& code);
/// The holder of a session (scope manage, fingerprint "portal:" + 12 hex digits of its id's hash)
/// if `id` names one not expired and `csrf` is its CSRF token; nullopt otherwise.
std::optional<token_holder> authenticate_session(blocking_db& db, const std::string& id, const std::string& csrf);
/// Ends the session `id` if `csrf` is its CSRF token (sign out); nothing otherwise.
void end_session(blocking_db& db, const std::string& id, const std::string& csrf);
/// Ends every portal session of `tenant` (the operator's `walhook tenant portal-logout`);
/// returns how many.
std::int64_t end_sessions(blocking_db& db, const std::string& tenant);

/// One line of the audit log (walhook.tenant_audit), written in the caller's transaction.
struct audit_entry {
  std::string tenant;
  std::string token;   ///< fingerprint
  std::string action;  ///< e.g. "endpoint.create"
  std::optional<std::int64_t> endpoint_id;
  std::string detail_json = "{}";  ///< a JSON object
  std::string remote;
};
void write_audit(blocking_db& db, const audit_entry& e);

}  // namespace walhook::relay::operations
