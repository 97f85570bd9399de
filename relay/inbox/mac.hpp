#pragma once
// HMAC-SHA256 and SHA-256 for the inbox's signature schemes (relay/inbox/schemes.hpp), on
// OpenSSL's EVP interfaces, and the decoding of the signatures senders put in headers. Pure.

#include "delivery/signing.hpp"

#include <array>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace walhook::relay::inbox {

inline constexpr std::size_t sha256_bytes = 32;
using delivery::sha256_digest;
/// HMAC-SHA256 over `parts` keyed with `key`'s bytes: walhook's own (delivery/signing.hpp), the
/// one that signs its deliveries.
using delivery::hmac_sha256;

/// SHA-256 of `bytes`, the raw 32 bytes.
sha256_digest sha256(std::string_view bytes);

/// Hex digits (either case, RFC 4648 §8) to bytes; std::nullopt for an odd length or a
/// character that is not a hex digit.
std::optional<std::string> hex_decode(std::string_view text);

/// True if `given` (decoded bytes a sender sent) is `expected`. Equal lengths are compared with
/// CRYPTO_memcmp, in time that does not depend on where they differ; the length is not secret.
bool same_mac(std::string_view given, const sha256_digest& expected);

}  // namespace walhook::relay::inbox
