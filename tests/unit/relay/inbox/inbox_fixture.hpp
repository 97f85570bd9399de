#pragma once
// Shared by the inbox's unit tests (schemes_test.cpp, schemes_values_test.cpp): requests that own
// their headers, a fixed clock, and signatures computed independently of relay/inbox/ — with
// OpenSSL's one-shot HMAC() and EVP_EncodeBlock, never through the code under test.

#include "relay/inbox/schemes.hpp"

#include <doctest/doctest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace walhook::test::inbox {

using namespace walhook::relay::inbox;
using result = boost::system::result<verified, refused>;

inline std::chrono::system_clock::time_point at_unix(std::int64_t seconds) {
  return std::chrono::system_clock::time_point{std::chrono::seconds{seconds}};
}

/// HMAC-SHA256(key, message), the raw 32 bytes, by OpenSSL's one-shot HMAC().
inline std::string hmac_raw(std::string_view key, std::string_view message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  REQUIRE(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
               reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &n) != nullptr);
  return {reinterpret_cast<const char*>(out), n};
}

inline std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 0xf];
  }
  return out;
}

inline std::string to_base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

/// A request that owns its text; `fields()` is what the ingest server hands to verify.
struct request {
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  request& set(const std::string& name, std::string value) {
    drop(name);
    headers.emplace_back(name, std::move(value));
    return *this;
  }
  request& drop(const std::string& name) {
    std::erase_if(headers, [&](const auto& h) { return h.first == name; });
    return *this;
  }
  std::string header(const std::string& name) const {
    for (const auto& [n, v] : headers)
      if (n == name) return v;
    FAIL("no header " << name);
    return {};
  }
  std::vector<header_field> fields() const {
    std::vector<header_field> out;
    for (const auto& [n, v] : headers) out.push_back({n, v});
    return out;
  }
};

inline result run(const source_config& source, const request& r, std::chrono::system_clock::time_point now) {
  const auto fields = r.fields();
  return verify(source, fields, r.body, now);
}

/// `r` is refused for `why`, and its detail names none of the source's secrets.
inline void check_refused(const result& r, refusal why, const source_config& source) {
  REQUIRE_FALSE(r.has_value());
  CAPTURE(r.error().detail);
  CHECK(refusal_name(r.error().why) == refusal_name(why));
  CHECK_FALSE(r.error().detail.empty());
  for (const auto& secret : source.secrets) CHECK(r.error().detail.find(secret) == std::string::npos);
}

}  // namespace walhook::test::inbox
