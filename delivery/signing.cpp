#include "delivery/signing.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <array>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <system_error>

namespace walhook::delivery {
namespace {

constexpr std::string_view secret_prefix = "whsec_";
constexpr std::string_view signature_version = "v1,";
constexpr std::size_t min_key_bytes = 16;
constexpr std::size_t max_key_bytes = 64;
constexpr std::size_t generated_key_bytes = 32;
constexpr std::size_t sha256_bytes = 32;

const unsigned char* as_uchar(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

bool is_base64_alphabet(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/// Splits on runs of blanks; never yields an empty token.
template <class F>
void for_each_token(std::string_view text, F&& f) {
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    std::size_t j = i;
    while (j < text.size() && !is_space(text[j])) ++j;
    if (j > i) f(text.substr(i, j - i));
    i = j;
  }
}

struct mac_deleter {
  void operator()(EVP_MAC* m) const { EVP_MAC_free(m); }
  void operator()(EVP_MAC_CTX* c) const { EVP_MAC_CTX_free(c); }
};

/// The HMAC algorithm, fetched once (EVP_MAC objects are immutable and safe to share between threads).
EVP_MAC* hmac_algorithm() {
  static const std::unique_ptr<EVP_MAC, mac_deleter> mac{EVP_MAC_fetch(nullptr, OSSL_MAC_NAME_HMAC, nullptr)};
  if (!mac) throw std::runtime_error("OpenSSL: HMAC is not available");
  return mac.get();
}

/// HMAC-SHA256(key, "{msg_id}.{timestamp}.{body}"), streamed so the body is never copied.
/// Standard Webhooks spec, "Signature scheme".
sha256_digest hmac_signed_content(const signing_key& key, std::string_view msg_id, std::string_view timestamp,
                                  std::string_view body) {
  return hmac_sha256(key.bytes, {msg_id, ".", timestamp, ".", body});
}

std::string sign_text(const signing_key& key, std::string_view msg_id, std::string_view timestamp,
                      std::string_view body) {
  const auto mac = hmac_signed_content(key, msg_id, timestamp, body);
  std::string out{signature_version};
  out += base64_encode({reinterpret_cast<const char*>(mac.data()), mac.size()});
  return out;
}

}  // namespace

sha256_digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts) {
  std::unique_ptr<EVP_MAC_CTX, mac_deleter> ctx{EVP_MAC_CTX_new(hmac_algorithm())};
  if (!ctx) throw std::bad_alloc();
  char digest_name[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
                               OSSL_PARAM_construct_end()};
  bool ok = EVP_MAC_init(ctx.get(), as_uchar(key), key.size(), params) == 1;
  for (auto part : parts) ok = ok && EVP_MAC_update(ctx.get(), as_uchar(part), part.size()) == 1;
  sha256_digest out{};
  std::size_t out_len = 0;
  ok = ok && EVP_MAC_final(ctx.get(), out.data(), &out_len, out.size()) == 1 && out_len == out.size();
  // Only an unusable OpenSSL (or an empty key, which the callers never pass) gets here.
  if (!ok) throw std::runtime_error("OpenSSL: HMAC-SHA256 failed");
  return out;
}

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  if (bytes.empty()) return out;
  // EVP_EncodeBlock takes an int length and writes a trailing NUL (hence the +1).
  std::string buffer(out.size() + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(buffer.data()), as_uchar(bytes),
                                static_cast<int>(bytes.size()));
  buffer.resize(static_cast<std::size_t>(n));
  return buffer;
}

std::optional<std::string> base64_decode(std::string_view text) {
  // EVP_DecodeBlock is lenient (skips leading/trailing blanks) and ignores padding when it
  // reports the length, so the strict RFC 4648 §4 shape is checked here first.
  if (text.size() % 4 != 0) return std::nullopt;
  if (text.empty()) return std::string{};
  std::size_t padding = 0;
  if (text.back() == '=') ++padding;
  if (text.size() >= 2 && text[text.size() - 2] == '=') ++padding;
  for (std::size_t i = 0; i < text.size() - padding; ++i) {
    if (!is_base64_alphabet(text[i])) return std::nullopt;
  }
  std::string out(3 * (text.size() / 4), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), as_uchar(text),
                                static_cast<int>(text.size()));
  if (n < 0 || static_cast<std::size_t>(n) != out.size()) return std::nullopt;
  out.resize(out.size() - padding);
  return out;
}

boost::system::result<signing_key> parse_secret(std::string_view secret) {
  const auto invalid = std::make_error_code(std::errc::invalid_argument);
  if (!secret.starts_with(secret_prefix)) return boost::system::error_code{invalid};
  auto key = base64_decode(secret.substr(secret_prefix.size()));
  if (!key || key->size() < min_key_bytes || key->size() > max_key_bytes) return boost::system::error_code{invalid};
  return signing_key{std::move(*key)};
}

boost::system::result<std::vector<signing_key>> parse_secrets(std::string_view secrets) {
  std::vector<signing_key> keys;
  boost::system::error_code first_error;
  for_each_token(secrets, [&](std::string_view token) {
    if (first_error) return;
    auto key = parse_secret(token);
    if (key) {
      keys.push_back(std::move(*key));
    } else {
      first_error = key.error();
    }
  });
  if (first_error) return first_error;
  if (keys.empty()) return boost::system::error_code{std::make_error_code(std::errc::invalid_argument)};
  return keys;
}

std::string generate_secret() {
  std::array<unsigned char, generated_key_bytes> key{};
  // A failing CSPRNG is fatal setup, not an expected error.
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) throw std::runtime_error("OpenSSL: RAND_bytes failed");
  std::string out{secret_prefix};
  out += base64_encode({reinterpret_cast<const char*>(key.data()), key.size()});
  OPENSSL_cleanse(key.data(), key.size());
  return out;
}

std::string sign(const signing_key& key, std::string_view msg_id, std::int64_t timestamp, std::string_view body) {
  return sign_text(key, msg_id, std::to_string(timestamp), body);
}

std::string signature_header(std::span<const signing_key> keys, std::string_view msg_id, std::int64_t timestamp,
                             std::string_view body) {
  const std::string ts = std::to_string(timestamp);
  std::string out;
  for (const auto& key : keys) {
    if (!out.empty()) out += ' ';
    out += sign_text(key, msg_id, ts, body);
  }
  return out;
}

bool verify(std::span<const signing_key> keys, std::string_view msg_id, std::string_view timestamp,
            std::string_view body, std::string_view header) {
  std::vector<std::array<unsigned char, sha256_bytes>> expected;
  expected.reserve(keys.size());
  for (const auto& key : keys) expected.push_back(hmac_signed_content(key, msg_id, timestamp, body));

  bool matched = false;
  for_each_token(header, [&](std::string_view token) {
    // Unknown versions (e.g. "v1a,…" asymmetric signatures) are skipped, as the spec asks.
    if (!token.starts_with(signature_version)) return;
    const auto mac = base64_decode(token.substr(signature_version.size()));
    if (!mac || mac->size() != sha256_bytes) return;
    for (const auto& e : expected) {
      // Every candidate is compared (no early exit) so timing reveals nothing about which matched.
      matched |= CRYPTO_memcmp(mac->data(), e.data(), sha256_bytes) == 0;
    }
  });
  return matched;
}

}  // namespace walhook::delivery
