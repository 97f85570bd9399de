#include "relay/inbox/signatures.hpp"

#include "delivery/signing.hpp"
#include "relay/inbox/mac.hpp"

#include <fmt/format.h>

#include <charconv>
#include <initializer_list>
#include <span>
#include <vector>

namespace walhook::relay::inbox {
namespace {

using authentication = boost::system::result<authentic, refused>;

constexpr std::size_t max_timestamp_digits = 18;

refused missing(std::string_view header) {
  return {refusal::missing_header, fmt::format("the request has no {} header", header)};
}

refused bad(std::string detail) { return {refusal::bad_signature, std::move(detail)}; }

bool is_blank(char c) { return c == ' ' || c == '\t'; }

/// Calls f on each piece of `text` between any of `separators`, without surrounding blanks;
/// never on an empty piece.
template <class F>
void for_each_piece(std::string_view text, std::string_view separators, F&& f) {
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find_first_of(separators, start);
    if (end == std::string_view::npos) end = text.size();
    auto piece = text.substr(start, end - start);
    while (!piece.empty() && is_blank(piece.front())) piece.remove_prefix(1);
    while (!piece.empty() && is_blank(piece.back())) piece.remove_suffix(1);
    if (!piece.empty()) f(piece);
    start = end + 1;
  }
}

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    const auto a = static_cast<unsigned char>(text[i]), b = static_cast<unsigned char>(prefix[i]);
    if ((a >= 'A' && a <= 'Z' ? a + 32 : a) != (b >= 'A' && b <= 'Z' ? b + 32 : b)) return false;
  }
  return true;
}

/// The first of `secrets` whose HMAC over `parts` equals one of `signatures` (decoded bytes).
/// Every pair is compared, a match or not, so the time taken says nothing about which matched.
/// Empty secrets are skipped (check_source refuses them; an empty HMAC key is refused by OpenSSL).
std::optional<std::size_t> first_match(const std::vector<std::string>& secrets,
                                       std::initializer_list<std::string_view> parts,
                                       std::span<const std::string> signatures) {
  std::optional<std::size_t> found;
  for (std::size_t i = 0; i < secrets.size(); ++i) {
    if (secrets[i].empty()) continue;
    const auto expected = hmac_sha256(secrets[i], parts);
    bool hit = false;
    for (const auto& s : signatures) hit |= same_mac(s, expected);
    if (hit && !found) found = i;
  }
  return found;
}

/// Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature ("v1,<base64>" tokens,
/// space-separated); content "{id}.{timestamp}.{body}"; key = a whsec_ secret's decoded bytes.
/// The check itself is walhook's own (delivery::verify), the one its deliveries are signed for.
authentication standard_webhooks(const source_config& source, header_fields headers, std::string_view body) {
  // Svix, the scheme's origin, sends the same headers as svix-* unless its customer renames them
  // (Svix docs, "Verifying Webhooks Manually"): one family or the other, never mixed.
  struct family {
    std::string_view id, timestamp, signature;
  };
  static constexpr family standard{"webhook-id", "webhook-timestamp", "webhook-signature"};
  static constexpr family svix{"svix-id", "svix-timestamp", "svix-signature"};
  const family& f = find_header(headers, standard.id) || !find_header(headers, svix.id) ? standard : svix;
  const auto id = find_header(headers, f.id);
  const auto timestamp = find_header(headers, f.timestamp);
  const auto signatures = find_header(headers, f.signature);
  if (!id) return missing(f.id);
  if (!timestamp) return missing(f.timestamp);
  if (!signatures) return missing(f.signature);
  const auto signed_at = parse_unix_seconds(*timestamp);
  if (!signed_at) return bad(fmt::format("{} is not a Unix time in seconds", f.timestamp));
  bool any_v1 = false;
  for_each_piece(*signatures, " \t", [&](std::string_view token) { any_v1 |= token.starts_with("v1,"); });
  if (!any_v1) return bad(fmt::format("{} holds no v1 signature", f.signature));

  std::optional<std::size_t> found;
  std::size_t usable = 0;
  for (std::size_t i = 0; i < source.secrets.size(); ++i) {
    const auto key = delivery::parse_secret(source.secrets[i]);
    if (!key) continue;
    ++usable;
    const delivery::signing_key one[] = {*key};
    if (delivery::verify(one, *id, *timestamp, body, *signatures) && !found) found = i;
  }
  if (usable == 0) return bad("the source has no usable whsec_ secret");
  if (!found) return bad(fmt::format("no v1 signature in {} matches the source's secrets", f.signature));
  return authentic{.secret_index = *found, .signed_at = signed_at, .timestamp_from = f.timestamp, .message_id = id};
}

/// Stripe: "Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]" (other items, v0 included, are
/// ignored); content "{t}.{body}"; key = the secret string's bytes (its whsec_ is not decoded).
authentication stripe(const source_config& source, header_fields headers, std::string_view body) {
  static constexpr std::string_view name = "Stripe-Signature";
  const auto value = find_header(headers, name);
  if (!value) return missing(name);
  std::optional<std::string_view> t;
  bool repeated_t = false;
  std::size_t not_hex = 0;
  std::vector<std::string> v1;
  for_each_piece(*value, ",", [&](std::string_view item) {
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) return;  // not an item Stripe defines: ignored, as Stripe's libraries do
    const auto key = item.substr(0, eq), text = item.substr(eq + 1);
    if (key == "t") {
      repeated_t |= t.has_value();
      t = text;
    } else if (key == "v1") {
      if (auto mac = hex_decode(text)) {
        v1.push_back(std::move(*mac));
      } else {
        ++not_hex;
      }
    }
  });
  if (!t) return bad("Stripe-Signature has no t= timestamp");
  if (repeated_t) return bad("Stripe-Signature has more than one t=");
  const auto signed_at = parse_unix_seconds(*t);
  if (!signed_at) return bad("Stripe-Signature's t= is not a Unix time in seconds");
  if (v1.empty())
    return bad(not_hex > 0 ? "Stripe-Signature's v1= signatures are not hex" : "Stripe-Signature has no v1= signature");
  const auto found = first_match(source.secrets, {*t, ".", body}, v1);
  if (!found) return bad("no v1= signature in Stripe-Signature matches the source's secrets");
  return authentic{.secret_index = *found, .signed_at = signed_at, .timestamp_from = "Stripe-Signature's t=", .message_id = std::nullopt};
}

/// GitHub: "X-Hub-Signature-256: sha256=<hex>" over the body; key = the secret's bytes. GitHub
/// signs no timestamp: nothing bounds a replay but the inbox's dedupe by event id.
authentication github(const source_config& source, header_fields headers, std::string_view body) {
  static constexpr std::string_view name = "X-Hub-Signature-256";
  static constexpr std::string_view prefix = "sha256=";
  const auto value = find_header(headers, name);
  if (!value) return missing(name);
  if (!value->starts_with(prefix)) return bad("X-Hub-Signature-256 does not start with sha256=");
  auto mac = hex_decode(value->substr(prefix.size()));
  if (!mac) return bad("X-Hub-Signature-256 is not sha256= followed by hex digits");
  const std::string signatures[] = {std::move(*mac)};
  const auto found = first_match(source.secrets, {body}, signatures);
  if (!found) return bad("X-Hub-Signature-256 matches none of the source's secrets");
  return authentic{.secret_index = *found, .signed_at = std::nullopt, .timestamp_from = {}, .message_id = std::nullopt};
}

/// The generic HMAC-SHA256: the signature(s) in `signature_header` (hex or base64, each may
/// start with "sha256=", several separated by commas or blanks); content = the body, or
/// "{timestamp}.{body}" with the timestamp from `timestamp_header`; key = the secret's bytes.
authentication hmac_sha256_scheme(const source_config& source, header_fields headers, std::string_view body) {
  if (source.signature_header.empty()) return bad("the source names no signature header");
  const auto value = find_header(headers, source.signature_header);
  if (!value) return missing(source.signature_header);
  std::optional<std::string_view> timestamp;
  std::optional<std::int64_t> signed_at;
  if (source.signs_timestamp) {
    if (source.timestamp_header.empty()) return bad("the source signs a timestamp but names no timestamp header");
    timestamp = find_header(headers, source.timestamp_header);
    if (!timestamp) return missing(source.timestamp_header);
    signed_at = parse_unix_seconds(*timestamp);
    if (!signed_at) return bad(fmt::format("{} is not a Unix time in seconds", source.timestamp_header));
  }
  std::vector<std::string> signatures;
  std::size_t undecodable = 0;
  for_each_piece(*value, ", \t", [&](std::string_view piece) {
    if (starts_with_nocase(piece, "sha256=")) piece.remove_prefix(7);
    auto mac = source.base64 ? delivery::base64_decode(piece) : hex_decode(piece);
    if (mac) {
      signatures.push_back(std::move(*mac));
    } else {
      ++undecodable;
    }
  });
  if (signatures.empty())
    return bad(undecodable == 0 ? fmt::format("{} holds no signature", source.signature_header)
                                : fmt::format("{} is not {}", source.signature_header, source.base64 ? "base64" : "hex"));
  const auto found = source.signs_timestamp ? first_match(source.secrets, {*timestamp, ".", body}, signatures)
                                            : first_match(source.secrets, {body}, signatures);
  if (!found) return bad(fmt::format("{} matches none of the source's secrets", source.signature_header));
  return authentic{.secret_index = *found, .signed_at = signed_at, .timestamp_from = source.timestamp_header,
                   .message_id = std::nullopt};
}

}  // namespace

std::optional<std::int64_t> parse_unix_seconds(std::string_view text) {
  if (text.empty() || text.size() > max_timestamp_digits) return std::nullopt;
  for (char c : text)
    if (c < '0' || c > '9') return std::nullopt;
  std::int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);  // ≤ 18 digits: never overflows
  return value;
}

boost::system::result<authentic, refused> authenticate(const source_config& source, header_fields headers,
                                                       std::string_view body) {
  if (source.secrets.empty()) return bad("the source has no secret");
  switch (source.kind) {
    case scheme::standard_webhooks:
      return standard_webhooks(source, headers, body);
    case scheme::stripe:
      return stripe(source, headers, body);
    case scheme::github:
      return github(source, headers, body);
    case scheme::hmac_sha256:
      return hmac_sha256_scheme(source, headers, body);
  }
  return bad("unknown scheme");
}

}  // namespace walhook::relay::inbox
