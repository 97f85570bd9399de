#include "relay/operations/endpoint_policies.hpp"

#include "delivery/rate_limit.hpp"
#include "delivery/destination.hpp"
#include "delivery/proxy.hpp"
#include "delivery/signing.hpp"
#include "delivery/url.hpp"
#include "relay/core/endpoint_policies.hpp"
#include "relay/core/payload_filter.hpp"
#include "relay/core/rows.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/operations.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace walhook::relay::operations {

std::vector<std::string> endpoint_policies::given() const {
  std::vector<std::string> out;
  if (headers) out.emplace_back("headers");
  if (secret_headers) out.emplace_back("secret_headers");
  if (filter) out.emplace_back("filter");
  if (max_rate) out.emplace_back("max_rate");
  if (rate_burst) out.emplace_back("rate_burst");
  if (oauth_token_url) out.emplace_back("oauth_token_url");
  if (oauth_client_id) out.emplace_back("oauth_client_id");
  if (oauth_client_secret) out.emplace_back("oauth_client_secret");
  if (oauth_scope) out.emplace_back("oauth_scope");
  if (proxy) out.emplace_back("proxy");
  return out;
}

namespace {

/// The headers of `lines` (stored or given), checked; `flag` names them in errors.
std::vector<header_field> parsed_headers(const std::vector<std::string>& lines, const char* flag) {
  if (lines.size() > 32) throw invalid_input(fmt::format("{}: at most 32 headers", flag));
  std::vector<header_field> out;
  for (const auto& line : lines) {
    std::string why;
    auto h = parse_header(line, &why);
    if (!h) throw invalid_input(fmt::format("{}: {}", flag, why));
    out.push_back(std::move(*h));
  }
  return out;
}

/// The OAuth2 and proxy columns of the whole endpoint (given now, or stored).
struct egress_columns {
  std::optional<std::string> token_url, client_id, client_secret, scope, proxy;
};

bool names_authorization(const std::vector<header_field>& headers) {
  return std::any_of(headers.begin(), headers.end(), [](const header_field& h) {
    return std::equal(h.first.begin(), h.first.end(), std::string_view("authorization").begin(),
                      std::string_view("authorization").end(),
                      [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
  });
}

/// A name set twice across the headers and the secret headers, or a burst without a rate or
/// over it, OAuth2 settings that do not go together or clash with an Authorization header, OAuth2
/// or a proxy for a broker: refused, whether the values were given now or are the endpoint's already.
void check_together(const std::vector<std::string>& headers, const std::vector<std::string>& secret_headers,
                    const std::optional<std::string>& max_rate, const std::optional<int>& burst,
                    const egress_columns& egress, const std::string& url) {
  const auto plain = parsed_headers(headers, "--header");
  const auto secret = parsed_headers(secret_headers, "--header-secret");
  if (auto twice = repeated_name({&plain, &secret}))
    throw invalid_input(fmt::format("header {} would be set twice (--header and --header-secret together name each "
                                    "header once)",
                                    *twice));
  if (burst && !max_rate) throw invalid_input("--rate-burst needs --max-rate (a burst of what rate?)");
  if (burst && max_rate)
    if (auto r = delivery::parse_rate(*max_rate); r && *burst > r->count)
      throw invalid_input(fmt::format("--rate-burst {} is over the rate ({}): a burst is at most the rate", *burst, *max_rate));
  const bool oauth = egress.token_url || egress.client_id || egress.client_secret;
  if (oauth && !(egress.token_url && egress.client_id && egress.client_secret))
    throw invalid_input("--oauth-token-url, --oauth-client-id and --oauth-client-secret go together");
  if (egress.scope && !egress.token_url) throw invalid_input("--oauth-scope needs --oauth-token-url");
  if ((oauth || egress.proxy) && delivery::names_broker(url))
    throw invalid_input("--oauth-* and --proxy are for http(s) endpoints; a broker endpoint authenticates in its URL");
  if (oauth && (names_authorization(plain) || names_authorization(secret)))
    throw invalid_input("OAuth2 sets the Authorization header: remove the endpoint's own Authorization header first");
}

/// Text for a column: not empty, at most `max` bytes, no control character (a NUL cannot be
/// stored, a line break would split a header). The value is never repeated in the message.
void check_text(const std::optional<std::optional<std::string>>& v, const char* flag, std::size_t max) {
  if (!v || !*v) return;
  const std::string& s = **v;
  const bool control = std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  if (s.empty() || s.size() > max || control)
    throw invalid_input(fmt::format("{} must be 1 to {} bytes without control characters", flag, max));
}

void check_egress(const endpoint_policies& p) {
  if (p.oauth_token_url && *p.oauth_token_url) {
    const auto& u = **p.oauth_token_url;
    if (u.size() > 2048 || u.find('\0') != std::string::npos || !delivery::parse_url(u))
      throw invalid_input("--oauth-token-url must be an absolute http:// or https:// URL without credentials: " +
                          delivery::redact_url(u));
  }
  check_text(p.oauth_client_id, "--oauth-client-id", 512);
  check_text(p.oauth_client_secret, "--oauth-client-secret", 1024);
  check_text(p.oauth_scope, "--oauth-scope", 1024);
  if (p.oauth_scope && *p.oauth_scope) {
    // RFC 6749 §3.3: scope tokens of %x21 / %x23-5B / %x5D-7E, separated by spaces.
    const auto& s = **p.oauth_scope;
    if (std::any_of(s.begin(), s.end(), [](char c) { return c == '"' || c == '\\' || static_cast<unsigned char>(c) > 0x7e; }))
      throw invalid_input("--oauth-scope: space-separated scope tokens of visible ASCII, without '\"' or '\\'");
  }
  if (p.proxy && *p.proxy && **p.proxy != "direct") {
    std::string why;
    if (!delivery::parse_proxy_url(**p.proxy, &why))
      throw invalid_input("--proxy must be direct, or http://host:port: " + why);
  }
}

egress_columns given_egress(const endpoint_policies& p) {
  auto v = [](const std::optional<std::optional<std::string>>& x) { return x.value_or(std::nullopt); };
  return {v(p.oauth_token_url), v(p.oauth_client_id), v(p.oauth_client_secret), v(p.oauth_scope), v(p.proxy)};
}

}  // namespace

void check(const endpoint_policies& p) {
  if (p.headers) parsed_headers(*p.headers, "--header");
  if (p.secret_headers) parsed_headers(*p.secret_headers, "--header-secret");
  if (p.filter && *p.filter) {
    std::string why;
    // PostgreSQL text holds no NUL (a JSON "\u0000" decoded by the admin API would be one).
    if ((*p.filter)->find('\0') != std::string::npos) throw invalid_input("--filter: a NUL character cannot be stored");
    if (!payload_filter::compile(**p.filter, &why)) throw invalid_input("--filter: " + why);
  }
  if (p.max_rate && *p.max_rate && !delivery::parse_rate(**p.max_rate))
    throw invalid_input(fmt::format("--max-rate must be N/s or N/m, N from 1 to 100000 (e.g. 20/s), not '{}'", **p.max_rate));
  if (p.rate_burst && *p.rate_burst) {
    const int burst = **p.rate_burst;
    if (burst < 1 || burst > 100000) throw invalid_input("--rate-burst must be between 1 and 100000");
  }
  check_egress(p);
}

void check_new(const endpoint_policies& p, const std::string& url) {
  check(p);
  check_together(p.headers.value_or(std::vector<std::string>{}), p.secret_headers.value_or(std::vector<std::string>{}),
                 p.max_rate.value_or(std::nullopt), p.rate_burst.value_or(std::nullopt), given_egress(p), url);
}

void check_update(blocking_db& db, std::int64_t endpoint_id, endpoint_policies& p) {
  check(p);
  // --max-rate none takes its burst with it.
  if (p.max_rate && !*p.max_rate && !p.rate_burst) p.rate_burst = std::optional<int>();
  auto r = db.exec("SELECT headers, secret_headers, max_rate, rate_burst, oauth_token_url, oauth_client_id, "
                   "oauth_client_secret, oauth_scope, proxy, url FROM walhook.endpoints WHERE id = $1",
                   pg::params{std::to_string(endpoint_id)});
  if (r.rows() == 0) return;  // the caller's lock said it exists
  auto stored = [&](int col) {
    const auto items = r.is_null(0, col) ? std::optional<std::vector<std::string>>(std::vector<std::string>{})
                                         : parse_text_array(r.value(0, col));
    return items.value_or(std::vector<std::string>{});
  };
  const auto headers = p.headers ? *p.headers : stored(0);
  const auto secret = p.secret_headers ? *p.secret_headers : stored(1);
  const auto rate = p.max_rate ? *p.max_rate : r.optional_value(0, 2);
  const auto burst = p.rate_burst ? *p.rate_burst
                                  : (r.is_null(0, 3) ? std::nullopt : std::optional<int>(static_cast<int>(r.integer(0, 3))));
  auto column = [&](const std::optional<std::optional<std::string>>& given, int col) {
    return given ? *given : r.optional_value(0, col);
  };
  const egress_columns egress{column(p.oauth_token_url, 4), column(p.oauth_client_id, 5),
                              column(p.oauth_client_secret, 6), column(p.oauth_scope, 7), column(p.proxy, 8)};
  check_together(headers, secret, rate, burst, egress, std::string(r.value(0, 9)));
}

std::vector<std::optional<std::string>> column_values(const endpoint_policies& p) {
  auto array = [](const std::optional<std::vector<std::string>>& lines) -> std::optional<std::string> {
    if (!lines || lines->empty()) return std::nullopt;
    // Stored as given, each "Name: value" with the blanks around the value dropped.
    std::vector<std::string> clean;
    for (const auto& line : *lines) {
      auto h = parse_header(line);
      clean.push_back(h ? h->first + ": " + h->second : line);
    }
    return pg_array_literal(clean);
  };
  auto inner = [](const auto& v) -> std::optional<std::string> {
    if (!v || !*v) return std::nullopt;
    if constexpr (std::is_same_v<std::decay_t<decltype(**v)>, int>) return std::to_string(**v);
    else return **v;
  };
  return {array(p.headers),          array(p.secret_headers),      inner(p.filter),
          inner(p.max_rate),         inner(p.rate_burst),          inner(p.oauth_token_url),
          inner(p.oauth_client_id),  inner(p.oauth_client_secret), inner(p.oauth_scope),
          inner(p.proxy)};
}

void write_policies(blocking_db& db, std::int64_t endpoint_id, endpoint_policies& p) {
  if (p.given().empty()) return;
  check_update(db, endpoint_id, p);
  // A "given" flag and the value per column: "not given" and "set to NULL" differ.
  const auto values = column_values(p);
  const std::array<bool, 10> given{p.headers.has_value(),         p.secret_headers.has_value(),
                                   p.filter.has_value(),          p.max_rate.has_value(),
                                   p.rate_burst.has_value(),      p.oauth_token_url.has_value(),
                                   p.oauth_client_id.has_value(), p.oauth_client_secret.has_value(),
                                   p.oauth_scope.has_value(),     p.proxy.has_value()};
  // In column_values' order, each with its type.
  static constexpr std::array<std::pair<const char*, const char*>, 10> columns{{{"headers", "text[]"},
                                                                                {"secret_headers", "text[]"},
                                                                                {"filter", "text"},
                                                                                {"max_rate", "text"},
                                                                                {"rate_burst", "int"},
                                                                                {"oauth_token_url", "text"},
                                                                                {"oauth_client_id", "text"},
                                                                                {"oauth_client_secret", "text"},
                                                                                {"oauth_scope", "text"},
                                                                                {"proxy", "text"}}};
  pg::params params{std::to_string(endpoint_id)};
  std::string sets;
  for (std::size_t i = 0; i < given.size(); ++i) {
    params.push_back(given[i] ? "t" : "f");
    params.push_back(values[i]);
    const auto [name, type] = columns[i];
    sets += fmt::format("{}{} = CASE WHEN ${}::boolean THEN ${}::{} ELSE {} END", sets.empty() ? "" : ", ", name,
                        2 * i + 2, 2 * i + 3, type, name);
  }
  db.exec("UPDATE walhook.endpoints SET " + sets + " WHERE id = $1", params);
}

std::string secret_header_fingerprint(const std::string& header_line, const std::string& key) {
  auto h = parse_header(header_line);
  const std::string name = h ? h->first : std::string("?");
  const std::string value = h ? h->second : header_line;
  // Keyed: an unkeyed hash of a low-entropy value (Basic credentials) could be confirmed offline
  // by anyone who sees the fingerprint.
  const auto mac = delivery::hmac_sha256(key.empty() ? std::string_view("walhook") : std::string_view(key),
                                         {"walhook secret header fingerprint\n", value});
  std::string out = name + ": sha256:";
  for (std::size_t i = 0; i < 6; ++i) out += fmt::format("{:02x}", mac[i]);
  return out;
}

std::string oauth_secret_shown(const std::string& client_secret, const std::string& key) {
  auto shown = secret_header_fingerprint("x: " + client_secret, key);
  return shown.substr(shown.find("sha256:"));
}

std::string secret_headers_shown(const std::optional<std::string>& stored, const std::string& key) {
  if (!stored) return "";
  const auto items = parse_text_array(*stored);
  if (!items) return "(unreadable)";
  std::string out;
  for (const auto& item : *items) out += (out.empty() ? "" : "; ") + secret_header_fingerprint(item, key);
  return out;
}

}  // namespace walhook::relay::operations
