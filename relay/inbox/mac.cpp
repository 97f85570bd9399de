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


int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

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
