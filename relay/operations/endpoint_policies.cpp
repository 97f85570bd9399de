#include "relay/operations/endpoint_policies.hpp"

#include "delivery/rate_limit.hpp"
#include "delivery/signing.hpp"
#include "relay/core/endpoint_policies.hpp"
#include "relay/core/payload_filter.hpp"
#include "relay/core/rows.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/operations.hpp"

#include <fmt/format.h>

#include <array>

namespace walhook::relay::operations {

std::vector<std::string> endpoint_policies::given() const {
  std::vector<std::string> out;
  if (headers) out.emplace_back("headers");
  if (secret_headers) out.emplace_back("secret_headers");
  if (filter) out.emplace_back("filter");
  if (max_rate) out.emplace_back("max_rate");
  if (rate_burst) out.emplace_back("rate_burst");
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

/// A name set twice across the headers and the secret headers, or a burst without a rate or
/// over it: refused, whether the values were given now or are the endpoint's already.
void check_together(const std::vector<std::string>& headers, const std::vector<std::string>& secret_headers,
                    const std::optional<std::string>& max_rate, const std::optional<int>& burst) {
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
}

void check_new(const endpoint_policies& p) {
  check(p);
  check_together(p.headers.value_or(std::vector<std::string>{}), p.secret_headers.value_or(std::vector<std::string>{}),
                 p.max_rate.value_or(std::nullopt), p.rate_burst.value_or(std::nullopt));
}

void check_update(blocking_db& db, std::int64_t endpoint_id, endpoint_policies& p) {
  check(p);
  // --max-rate none takes its burst with it.
  if (p.max_rate && !*p.max_rate && !p.rate_burst) p.rate_burst = std::optional<int>();
  auto r = db.exec("SELECT headers, secret_headers, max_rate, rate_burst FROM walhook.endpoints WHERE id = $1",
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
  check_together(headers, secret, rate, burst);
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
  return {array(p.headers), array(p.secret_headers), inner(p.filter), inner(p.max_rate), inner(p.rate_burst)};
}

void write_policies(blocking_db& db, std::int64_t endpoint_id, endpoint_policies& p) {
  if (p.given().empty()) return;
  check_update(db, endpoint_id, p);
  // A "given" flag and the value per column: "not given" and "set to NULL" differ.
  const auto values = column_values(p);
  const std::array<bool, 5> given{p.headers.has_value(), p.secret_headers.has_value(), p.filter.has_value(),
                                  p.max_rate.has_value(), p.rate_burst.has_value()};
  pg::params params{std::to_string(endpoint_id)};
  for (std::size_t i = 0; i < given.size(); ++i) {
    params.push_back(given[i] ? "t" : "f");
    params.push_back(values[i]);
  }
  db.exec(R"sql(
UPDATE walhook.endpoints
   SET headers = CASE WHEN $2::boolean THEN $3::text[] ELSE headers END,
       secret_headers = CASE WHEN $4::boolean THEN $5::text[] ELSE secret_headers END,
       filter = CASE WHEN $6::boolean THEN $7 ELSE filter END,
       max_rate = CASE WHEN $8::boolean THEN $9 ELSE max_rate END,
       rate_burst = CASE WHEN $10::boolean THEN $11::int ELSE rate_burst END
 WHERE id = $1)sql",
          params);
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

std::string secret_headers_shown(const std::optional<std::string>& stored, const std::string& key) {
  if (!stored) return "";
  const auto items = parse_text_array(*stored);
  if (!items) return "(unreadable)";
  std::string out;
  for (const auto& item : *items) out += (out.empty() ? "" : "; ") + secret_header_fingerprint(item, key);
  return out;
}

}  // namespace walhook::relay::operations
