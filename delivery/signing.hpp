#pragma once
// Standard Webhooks v1 signatures (https://www.standardwebhooks.com, spec "Signature scheme").
//   signed content = "{webhook-id}.{webhook-timestamp}.{body}"
//   webhook-signature = "v1," + base64(HMAC-SHA256(key, signed content))
// A secret is "whsec_" + base64(key). During rotation an endpoint holds several secrets
// (space-separated in endpoints.secret) and every one of them signs: the header then carries
// several space-separated "v1,…" signatures.

#include <boost/system/result.hpp>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::delivery {

/// The raw HMAC key decoded from a whsec_ secret.
struct signing_key {
  std::string bytes;
  bool operator==(const signing_key&) const = default;
};

/// Parses one "whsec_<base64>" secret. Errors: std::errc::invalid_argument if the prefix is
/// missing, the base64 is invalid, or the key is shorter than 16 or longer than 64 bytes.
boost::system::result<signing_key> parse_secret(std::string_view secret);

/// Parses a space-separated list of whsec_ secrets (at least one).
boost::system::result<std::vector<signing_key>> parse_secrets(std::string_view secrets);

/// A new random secret: "whsec_" + base64 of 32 bytes from OpenSSL's RAND_bytes.
std::string generate_secret();

/// A SHA-256 digest or HMAC-SHA256, the raw 32 bytes.
using sha256_digest = std::array<unsigned char, 32>;
/// HMAC-SHA256 (RFC 2104, FIPS 180-4) keyed with `key`'s bytes over `parts` one after the other
/// (streamed: a body is never copied), on OpenSSL's EVP_MAC. `key` must not be empty. Throws
/// std::runtime_error only if OpenSSL cannot compute an HMAC at all. Also the inbox's schemes'.
sha256_digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts);

/// "v1,<base64 signature>" for one key.
std::string sign(const signing_key& key, std::string_view msg_id, std::int64_t timestamp, std::string_view body);

/// The webhook-signature header value: one "v1,…" per key, space-separated.
std::string signature_header(std::span<const signing_key> keys, std::string_view msg_id, std::int64_t timestamp,
                             std::string_view body);

/// True if any "v1,…" signature in `header` matches any key (constant-time comparison).
bool verify(std::span<const signing_key> keys, std::string_view msg_id, std::string_view timestamp,
            std::string_view body, std::string_view header);

/// Standard base64 (RFC 4648 §4) with padding.
std::string base64_encode(std::string_view bytes);
/// Decodes standard base64 with padding; std::nullopt on invalid input.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace walhook::delivery
