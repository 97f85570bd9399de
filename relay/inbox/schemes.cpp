#include "relay/inbox/schemes.hpp"

#include "delivery/signing.hpp"
#include "relay/inbox/body_json.hpp"
#include "relay/inbox/mac.hpp"
#include "relay/inbox/signatures.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <array>

namespace walhook::relay::inbox {
namespace {

constexpr std::string_view header_prefix = "header:";
constexpr std::string_view reserved_type_prefix = "walhook.";

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c; }

bool equals_nocase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

/// RFC 9110 §5.6.2: a header name is a token of tchar.
bool is_token(std::string_view s) {
  static constexpr std::string_view punctuation = "!#$%&'*+-.^_`|~";
  if (s.empty()) return false;
  for (char c : s) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum && punctuation.find(c) == std::string_view::npos) return false;
  }
  return true;
}

/// RFC 6901 §3: "/" then reference tokens; "~" only as "~0" or "~1".
bool is_json_pointer(std::string_view s) {
  if (s.empty() || s.front() != '/') return false;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (s[i] == '~' && (i + 1 == s.size() || (s[i + 1] != '0' && s[i + 1] != '1'))) return false;
  return true;
}

bool well_formed(const value_source& v) {
  return v.kind == value_source::header ? is_token(v.name) : is_json_pointer(v.name);
}

/// Where one value of an event comes from once the scheme's defaults are applied.
struct origin {
  enum kind { nowhere, literal, header, json_pointer } kind = nowhere;
  std::string_view text;  ///< the literal itself, the header's name or the pointer
};

origin origin_of(const value_source& v) {
  return {v.kind == value_source::header ? origin::header : origin::json_pointer, v.name};
}

origin id_origin(const source_config& source, const authentic& auth) {
  if (source.id_from) return origin_of(*source.id_from);
  switch (source.kind) {
    case scheme::standard_webhooks:
      return auth.message_id ? origin{origin::literal, *auth.message_id} : origin{};
    case scheme::stripe:
      return {origin::json_pointer, "/id"};
    case scheme::github:
      return {origin::header, "X-GitHub-Delivery"};
    case scheme::hmac_sha256:
      break;
  }
  return {};
}

origin type_origin(const source_config& source) {
  if (source.type_from) return origin_of(*source.type_from);
  switch (source.kind) {
    case scheme::github:
      return {origin::header, "X-GitHub-Event"};
    case scheme::hmac_sha256:
      return {origin::literal, source.name};
    default:
      return {origin::json_pointer, "/type"};
  }
}

/// Why a value is absent, in words.
std::string absent(const origin& o) {
  switch (o.kind) {
    case origin::header:
      return fmt::format("the request has no {} header", o.text);
    case origin::json_pointer:
      return fmt::format("the body has no string or number at {}", o.text);
    default:
      return "the source does not say where it is";
  }
}

/// Bounds of an extracted text: 1..max bytes, UTF-8 (a PostgreSQL text), no control character.
std::optional<std::string> out_of_bounds(std::string_view what, std::string_view value, std::size_t max) {
  if (value.empty()) return fmt::format("the {} is empty", what);
  if (value.size() > max) return fmt::format("the {} is {} bytes; at most {}", what, value.size(), max);
  if (!simdjson::validate_utf8(value.data(), value.size())) return fmt::format("the {} is not UTF-8", what);
  for (unsigned char c : value)
    if (c < 0x20 || c == 0x7f) return fmt::format("the {} holds a control character", what);
  return std::nullopt;
}

std::optional<refused> check_fresh(const authentic& auth, std::chrono::system_clock::time_point now,
                                   std::chrono::seconds tolerance) {
  if (!auth.signed_at) return std::nullopt;
  // In seconds throughout: a signed time far from now must not overflow a nanosecond time_point.
  const std::int64_t now_s = std::chrono::floor<std::chrono::seconds>(now).time_since_epoch().count();
  const std::int64_t age = now_s - *auth.signed_at;
  if (age > tolerance.count())
    return refused{refusal::stale_timestamp, fmt::format("{} is {} s in the past; the tolerance is {} s",
                                                         auth.timestamp_from, age, tolerance.count())};
  if (-age > tolerance.count())
    return refused{refusal::stale_timestamp, fmt::format("{} is {} s in the future; the tolerance is {} s",
                                                         auth.timestamp_from, -age, tolerance.count())};
  return std::nullopt;
}

/// The event's id, type and order key from an authenticated, fresh request.
boost::system::result<verified, refused> extract(const source_config& source, const authentic& auth,
                                                 header_fields headers, std::string_view body) {
  const std::array<origin, 3> origins{id_origin(source, auth), type_origin(source),
                                      source.order_key_from ? origin_of(*source.order_key_from) : origin{}};
  std::vector<std::string_view> pointers;
  for (const auto& o : origins)
    if (o.kind == origin::json_pointer) pointers.push_back(o.text);
  auto json = read_json(body, pointers);
  if (!json.is_json) return refused{refusal::not_json, "the body is not JSON: " + json.error};

  std::size_t next_pointer = 0;
  auto value_of = [&](const origin& o) -> std::optional<std::string> {
    switch (o.kind) {
      case origin::literal:
        return std::string(o.text);
      case origin::header:
        if (auto h = find_header(headers, o.text)) return std::string(*h);
        return std::nullopt;
      case origin::json_pointer:
        return std::move(json.values[next_pointer++]);
      case origin::nowhere:
        break;
    }
    return std::nullopt;
  };
  auto id = value_of(origins[0]);
  auto type = value_of(origins[1]);
  auto order_key = value_of(origins[2]);
  if (!id) return refused{refusal::no_event_id, "no event id: " + absent(origins[0])};
  if (auto why = out_of_bounds("event id", *id, max_event_id_bytes)) return refused{refusal::bad_value, *why};
  if (!type) return refused{refusal::bad_value, "no event type: " + absent(origins[1])};
  if (auto why = out_of_bounds("event type", *type, max_event_type_bytes)) return refused{refusal::bad_value, *why};
  if (type->size() >= reserved_type_prefix.size() &&
      equals_nocase(std::string_view(*type).substr(0, reserved_type_prefix.size()), reserved_type_prefix))
    return refused{refusal::bad_value, "the event type starts with \"walhook.\", which only walhook may use"};
  verified out;
  out.event_id = std::move(*id);
  out.event_type = std::move(*type);
  out.signed_at = auth.signed_at;
  out.secret_index = auth.secret_index;
  if (order_key && !order_key->empty()) {  // an empty key orders nothing: no key
    if (auto why = out_of_bounds("order key", *order_key, max_order_key_bytes)) return refused{refusal::bad_value, *why};
    out.order_key = std::move(*order_key);
  }
  return out;
}

}  // namespace

std::optional<scheme> parse_scheme(std::string_view text) {
  for (auto s : {scheme::standard_webhooks, scheme::stripe, scheme::github, scheme::hmac_sha256})
    if (text == scheme_name(s)) return s;
  return std::nullopt;
}

std::string_view scheme_name(scheme s) {
  switch (s) {
    case scheme::standard_webhooks:
      return "standard-webhooks";
    case scheme::stripe:
      return "stripe";
    case scheme::github:
      return "github";
    case scheme::hmac_sha256:
      return "hmac-sha256";
  }
  return "unknown";
}

std::string_view refusal_name(refusal r) {
  switch (r) {
    case refusal::missing_header:
      return "missing_header";
    case refusal::bad_signature:
      return "bad_signature";
    case refusal::stale_timestamp:
      return "stale_timestamp";
    case refusal::not_json:
      return "not_json";
    case refusal::no_event_id:
      return "no_event_id";
    case refusal::bad_value:
      return "bad_value";
  }
  return "unknown";
}

std::optional<value_source> parse_value_source(std::string_view text) {
  if (text.starts_with(header_prefix)) {
    value_source v{value_source::header, std::string(text.substr(header_prefix.size()))};
    return is_token(v.name) ? std::optional(std::move(v)) : std::nullopt;
  }
  if (!is_json_pointer(text)) return std::nullopt;
  return value_source{value_source::json_pointer, std::string(text)};
}

std::string to_string(const value_source& v) {
  return v.kind == value_source::header ? std::string(header_prefix) + v.name : v.name;
}

std::optional<std::string> check_source(const source_config& source) {
  const bool generic = source.kind == scheme::hmac_sha256;
  if (source.secrets.empty()) return "a source needs at least one secret";
  for (std::size_t i = 0; i < source.secrets.size(); ++i) {
    if (source.secrets[i].empty()) return fmt::format("secret {} is empty", i + 1);
    if (source.kind == scheme::standard_webhooks && !delivery::parse_secret(source.secrets[i]))
      return fmt::format("secret {} is not whsec_ followed by the base64 of a 16 to 64-byte key", i + 1);
  }
  if (source.tolerance.count() < 1) return "the timestamp tolerance must be at least 1 s";
  for (const auto* v : {&source.id_from, &source.type_from, &source.order_key_from})
    if (*v && !well_formed(**v))
      return fmt::format("\"{}\" is neither header:NAME nor a JSON pointer", to_string(**v));
  if (!generic) {
    if (!source.signature_header.empty() || source.base64 || source.signs_timestamp || !source.timestamp_header.empty())
      return fmt::format("{} has its own headers: the signature header, encoding and signed content are "
                         "hmac-sha256's settings",
                         scheme_name(source.kind));
    return std::nullopt;
  }
  if (!is_token(source.signature_header))
    return "hmac-sha256 needs the name of the header that holds the signature (--signature-header)";
  if (!source.id_from) return "hmac-sha256 needs where the event id is: a header or a JSON pointer (--id-from)";
  if (source.signs_timestamp && !is_token(source.timestamp_header))
    return "signing timestamp.body needs the name of the header that holds the timestamp (--timestamp-header)";
  if (!source.signs_timestamp && !source.timestamp_header.empty())
    return "a timestamp header is named but the signed content is the body alone: nothing would check it";
  return std::nullopt;
}

std::optional<std::string_view> find_header(header_fields headers, std::string_view name) {
  for (const auto& h : headers)
    if (equals_nocase(h.name, name)) return h.value;
  return std::nullopt;
}

boost::system::result<verified, refused> verify(const source_config& source, header_fields headers,
                                                std::string_view raw_body,
                                                std::chrono::system_clock::time_point now) {
  // The order matters: nothing of an unauthenticated body is parsed, and a timestamp is judged
  // only once it is known to be the sender's.
  auto auth = authenticate(source, headers, raw_body);
  if (!auth) return auth.error();
  if (auto stale = check_fresh(*auth, now, source.tolerance)) return *stale;
  return extract(source, *auth, headers, raw_body);
}

std::string fingerprint(std::string_view body) {
  const auto digest = sha256(body);
  return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

}  // namespace walhook::relay::inbox
