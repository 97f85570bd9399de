#include "relay/inbox/mac.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <memory>
#include <new>
#include <stdexcept>

namespace walhook::relay::inbox {
namespace {

const unsigned char* as_uchar(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

struct evp_deleter {
  void operator()(EVP_MAC* m) const { EVP_MAC_free(m); }
  void operator()(EVP_MAC_CTX* c) const { EVP_MAC_CTX_free(c); }
};

/// The HMAC algorithm, fetched once: an EVP_MAC is immutable and may be shared between threads.
EVP_MAC* hmac_algorithm() {
  static const std::unique_ptr<EVP_MAC, evp_deleter> mac{EVP_MAC_fetch(nullptr, OSSL_MAC_NAME_HMAC, nullptr)};
  if (!mac) throw std::runtime_error("OpenSSL: HMAC is not available");
  return mac.get();
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

sha256_digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts) {
  std::unique_ptr<EVP_MAC_CTX, evp_deleter> ctx{EVP_MAC_CTX_new(hmac_algorithm())};
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

sha256_digest sha256(std::string_view bytes) {
  sha256_digest out{};
  unsigned int out_len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), out.data(), &out_len, EVP_sha256(), nullptr) != 1 ||
      out_len != out.size())
    throw std::runtime_error("OpenSSL: SHA-256 failed");
  return out;
}

std::optional<std::string> hex_decode(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::string out(text.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_value(text[2 * i]);
    const int lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<char>((hi << 4) | lo);
  }
  return out;
}

bool same_mac(std::string_view given, const sha256_digest& expected) {
  return given.size() == expected.size() && CRYPTO_memcmp(given.data(), expected.data(), expected.size()) == 0;
}

}  // namespace walhook::relay::inbox
