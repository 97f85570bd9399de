#include "relay/operations/tenants.hpp"

#include "common/time.hpp"
#include "delivery/signing.hpp"
#include "relay/operations/status.hpp"

#include <fmt/format.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>

namespace walhook::relay::operations {

namespace {

constexpr const char* token_columns =
    "id, tenant_id, token_sha256, scope, coalesce(description, ''), created_at, expires_at, last_used_at, revoked_at, "
    "coalesce(expires_at <= now(), false)";

token_row token_of(const pg::query_result& r, int i) {
  token_row t;
  t.id = r.integer(i, 0);
  t.tenant = r.value(i, 1);
  t.fingerprint = "sha256:" + std::string(r.value(i, 2).substr(0, 12));
  t.scope = r.value(i, 3);
  t.description = r.value(i, 4);
  t.created_at = timestamp_of(r, i, 5).value_or("");
  t.expires_at = timestamp_of(r, i, 6).value_or("");
  t.last_used_at = timestamp_of(r, i, 7).value_or("");
  t.revoked_at = timestamp_of(r, i, 8).value_or("");
  t.expired = r.value(i, 9) == "t";
  return t;
}

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), text.begin(),
                    [](char p, char c) { return p == std::tolower(static_cast<unsigned char>(c)); });
}

}  // namespace

std::string_view to_string(token_scope s) { return s == token_scope::manage ? "manage" : "read"; }

std::optional<token_scope> parse_scope(std::string_view text) {
  if (text == "read") return token_scope::read;
  if (text == "manage") return token_scope::manage;
  return std::nullopt;
}

std::string base64url_encode(std::string_view bytes) {
  auto text = delivery::base64_encode(bytes);
  std::replace(text.begin(), text.end(), '+', '-');
  std::replace(text.begin(), text.end(), '/', '_');
  text.erase(std::remove(text.begin(), text.end(), '='), text.end());
  return text;
}

namespace {

/// 32 random bytes (OpenSSL RAND_bytes) in base64url.
std::string random_text() {
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1)
    throw std::runtime_error("OpenSSL RAND_bytes failed: nothing random generated");
  return base64url_encode(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

/// A code, session id or CSRF token's form: 43 base64url characters (anything else is never looked up).
bool random_text_form(std::string_view text) {
  return text.size() == 43 &&
         text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == std::string_view::npos;
}

}  // namespace

std::string generate_tenant_token() { return std::string(tenant_token_prefix) + random_text(); }

std::string sha256_hex(std::string_view text) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> d{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), d.data());
  std::string out;
  out.reserve(64);
  for (auto b : d) out += fmt::format("{:02x}", b);
  return out;
}

std::string tenant_token_fingerprint(std::string_view token) { return "sha256:" + sha256_hex(token).substr(0, 12); }

void check_tenant_name(const std::string& tenant, std::string_view operator_tenant) {
  if (tenant.empty() || tenant.size() > 200) throw invalid_input("--tenant must have 1 to 200 bytes");
  if (std::any_of(tenant.begin(), tenant.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f; }))
    throw invalid_input("--tenant must not contain control characters");
  if (starts_with_nocase(tenant, "inbox:"))
    throw invalid_input(fmt::format("tenant '{}' is an inbox source's: its endpoints are the operator's handlers, "
                                    "managed with `walhook inbox source`, never through the tenant API",
                                    tenant));
  if (tenant == operator_tenant)
    throw invalid_input(fmt::format("tenant '{}' is the operator tenant: its endpoints receive walhook's notifications "
                                    "about every tenant's endpoints, so it gets no tenant API token",
                                    tenant));
}

bool is_closed_tenant(const std::string& tenant, std::string_view operator_tenant) {
  try {
    check_tenant_name(tenant, operator_tenant);
    return false;
  } catch (const invalid_input&) {
    return true;
  }
}

created_token create_token(blocking_db& db, const std::string& tenant, token_scope scope,
                           std::optional<std::chrono::seconds> lifetime, const std::string& description,
                           std::string_view operator_tenant) {
  check_tenant_name(tenant, operator_tenant);
  if (lifetime && lifetime->count() <= 0) throw invalid_input("--expires must be longer than zero (or never)");
  if (description.size() > 500) throw invalid_input("--description has at most 500 bytes");
  created_token c;
  c.token = generate_tenant_token();
  c.fingerprint = tenant_token_fingerprint(c.token);
  pg::params p{tenant, sha256_hex(c.token), std::string(to_string(scope)),
               description.empty() ? std::nullopt : std::optional<std::string>(description),
               lifetime ? std::optional<std::string>(std::to_string(lifetime->count())) : std::nullopt};
  auto r = db.exec(
      "INSERT INTO walhook.tenant_tokens (tenant_id, token_sha256, scope, description, expires_at) "
      "VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5::bigint)) RETURNING id, expires_at",
      p);
  c.id = r.integer(0, 0);
  c.expires_at = timestamp_of(r, 0, 1).value_or("");
  return c;
}

std::vector<token_row> list_tokens(blocking_db& db, const std::string& tenant) {
  auto r = db.exec(fmt::format("SELECT {} FROM walhook.tenant_tokens WHERE $1::text IS NULL OR tenant_id = $1 "
                               "ORDER BY created_at, id",
                               token_columns),
                   pg::params{tenant.empty() ? std::nullopt : std::optional<std::string>(tenant)});
  std::vector<token_row> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(token_of(r, i));
  return out;
}

token_row revoke_token(blocking_db& db, const std::string& id_or_fingerprint) {
  std::string where;
  pg::params p;
  if (id_or_fingerprint.starts_with("sha256:")) {
    const auto hex = id_or_fingerprint.substr(7);
    if (hex.size() < 8 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw invalid_input("a token is named by its id or its fingerprint sha256:<hex> (as `walhook tenant token list` "
                          "shows it)");
    where = "left(token_sha256, length($1)) = $1";
    p.push_back(hex);
  } else {
    if (id_or_fingerprint.empty() || id_or_fingerprint.find_first_not_of("0123456789") != std::string::npos ||
        id_or_fingerprint.size() > 18)
      throw invalid_input(fmt::format("not a token id or fingerprint: {}", id_or_fingerprint));
    where = "id = $1::bigint";
    p.push_back(id_or_fingerprint);
  }
  db_transaction tx(db);
  auto found = db.exec(fmt::format("SELECT {} FROM walhook.tenant_tokens WHERE {} FOR UPDATE", token_columns, where), p);
  if (found.rows() == 0) throw not_found(fmt::format("no tenant API token {}", id_or_fingerprint));
  if (found.rows() > 1)
    throw invalid_input(fmt::format("{} names {} tokens: give more of the fingerprint, or the id", id_or_fingerprint,
                                    found.rows()));
  auto row = token_of(found, 0);
  if (!row.revoked_at.empty())
    throw not_found(fmt::format("token {} ({}) was revoked already, at {}", row.id, row.fingerprint, row.revoked_at));
  auto r = db.exec("UPDATE walhook.tenant_tokens SET revoked_at = now() WHERE id = $1 RETURNING revoked_at",
                   pg::params{std::to_string(row.id)});
  row.revoked_at = timestamp_of(r, 0, 0).value_or("");
  tx.commit();
  return row;
}

std::optional<token_holder> authenticate(blocking_db& db, const std::string& token) {
  // A token's form first: anything else never reaches the database (nor its index).
  if (!token.starts_with(tenant_token_prefix) || token.size() > 100) return std::nullopt;
  const auto hash = sha256_hex(token);
  auto r = db.exec(
      "UPDATE walhook.tenant_tokens SET last_used_at = now() "
      "WHERE token_sha256 = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) "
      "AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute') RETURNING id, tenant_id, scope",
      pg::params{hash});
  if (r.rows() == 0)  // used within the minute (nothing written), or not valid
    r = db.exec(
        "SELECT id, tenant_id, scope FROM walhook.tenant_tokens "
        "WHERE token_sha256 = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())",
        pg::params{hash});
  if (r.rows() == 0) return std::nullopt;
  token_holder h;
  h.token_id = r.integer(0, 0);
  h.tenant = r.value(0, 1);
  h.scope = parse_scope(r.value(0, 2)).value_or(token_scope::read);
  h.fingerprint = "sha256:" + hash.substr(0, 12);
  return h;
}

tenant_limits limits_of(blocking_db& db, const std::string& tenant) {
  auto r = db.exec("SELECT max_endpoints, max_concurrency FROM walhook.tenant_limits WHERE tenant_id = $1",
                   pg::params{tenant});
  tenant_limits l;
  if (r.rows() == 1) {
    l.max_endpoints = static_cast<int>(r.integer(0, 0));
    l.max_concurrency = static_cast<int>(r.integer(0, 1));
  }
  return l;
}

tenant_limits set_limits(blocking_db& db, const std::string& tenant, std::optional<int> max_endpoints,
                         std::optional<int> max_concurrency) {
  check_tenant_name(tenant, "");
  if (max_endpoints && (*max_endpoints < 0 || *max_endpoints > 100000))
    throw invalid_input("--max-endpoints must be between 0 and 100000");
  if (max_concurrency && (*max_concurrency < 1 || *max_concurrency > 1000))
    throw invalid_input("--max-concurrency must be between 1 and 1000");
  db_transaction tx(db);
  auto l = limits_of(db, tenant);
  l.max_endpoints = max_endpoints.value_or(l.max_endpoints);
  l.max_concurrency = max_concurrency.value_or(l.max_concurrency);
  db.exec(
      "INSERT INTO walhook.tenant_limits (tenant_id, max_endpoints, max_concurrency) VALUES ($1, $2::int, $3::int) "
      "ON CONFLICT (tenant_id) DO UPDATE SET max_endpoints = excluded.max_endpoints, "
      "max_concurrency = excluded.max_concurrency, updated_at = now()",
      pg::params{tenant, std::to_string(l.max_endpoints), std::to_string(l.max_concurrency)});
  tx.commit();
  return l;
}

portal_code create_portal_code(blocking_db& db, const std::string& tenant, std::chrono::seconds lifetime,
                               std::string_view operator_tenant) {
  check_tenant_name(tenant, operator_tenant);
  if (lifetime.count() <= 0 || lifetime > max_portal_link_lifetime)
    throw invalid_input("--expires must be between 1s and 24h: the link is meant to be opened at once");
  portal_code c;
  c.code = random_text();
  auto r = db.exec(
      "INSERT INTO walhook.portal_codes (code_sha256, tenant_id, expires_at) "
      "VALUES ($1, $2, now() + make_interval(secs => $3::bigint)) RETURNING expires_at",
      pg::params{sha256_hex(c.code), tenant, std::to_string(lifetime.count())});
  c.expires_at = timestamp_of(r, 0, 0).value_or("");
  return c;
}

std::optional<portal_session> exchange_portal_code(blocking_db& db, const std::string& code) {
  if (!random_text_form(code)) return std::nullopt;
  db_transaction tx(db);
  db.exec("DELETE FROM walhook.portal_sessions WHERE expires_at < now()");
  db.exec("DELETE FROM walhook.portal_codes WHERE expires_at < now() - interval '1 day'");
  auto r = db.exec(
      "UPDATE walhook.portal_codes SET used_at = now() "
      "WHERE code_sha256 = $1 AND used_at IS NULL AND expires_at > now() RETURNING tenant_id",
      pg::params{sha256_hex(code)});
  if (r.rows() == 0) return std::nullopt;
  portal_session s;
  s.id = random_text();
  s.csrf = random_text();
  s.tenant = r.value(0, 0);
  auto created = db.exec(
      "INSERT INTO walhook.portal_sessions (session_sha256, tenant_id, csrf_sha256, expires_at) "
      "VALUES ($1, $2, $3, now() + make_interval(secs => $4::bigint)) RETURNING expires_at",
      pg::params{sha256_hex(s.id), s.tenant, sha256_hex(s.csrf), std::to_string(portal_session_lifetime.count())});
  s.expires_at = timestamp_of(created, 0, 0).value_or("");
  tx.commit();
  return s;
}

std::optional<token_holder> authenticate_session(blocking_db& db, const std::string& id, const std::string& csrf) {
  if (!random_text_form(id) || !random_text_form(csrf)) return std::nullopt;
  const auto hash = sha256_hex(id);
  auto r = db.exec(
      "SELECT tenant_id FROM walhook.portal_sessions "
      "WHERE session_sha256 = $1 AND csrf_sha256 = $2 AND expires_at > now()",
      pg::params{hash, sha256_hex(csrf)});
  if (r.rows() == 0) return std::nullopt;
  token_holder h;
  h.tenant = r.value(0, 0);
  h.scope = token_scope::manage;
  h.fingerprint = "portal:" + hash.substr(0, 12);
  return h;
}

void end_session(blocking_db& db, const std::string& id, const std::string& csrf) {
  if (!random_text_form(id) || !random_text_form(csrf)) return;
  db.exec("DELETE FROM walhook.portal_sessions WHERE session_sha256 = $1 AND csrf_sha256 = $2",
          pg::params{sha256_hex(id), sha256_hex(csrf)});
}

std::int64_t end_sessions(blocking_db& db, const std::string& tenant) {
  return db.exec("DELETE FROM walhook.portal_sessions WHERE tenant_id = $1", pg::params{tenant}).affected();
}

void write_audit(blocking_db& db, const audit_entry& e) {
  db.exec(
      "INSERT INTO walhook.tenant_audit (tenant_id, token, action, endpoint_id, detail, remote) "
      "VALUES ($1, $2, $3, $4::bigint, $5::jsonb, $6)",
      pg::params{e.tenant, e.token, e.action,
                 e.endpoint_id ? std::optional<std::string>(std::to_string(*e.endpoint_id)) : std::nullopt,
                 e.detail_json, e.remote.empty() ? std::nullopt : std::optional<std::string>(e.remote)});
}

}  // namespace walhook::relay::operations
