#include "relay/operations/endpoint_policies.hpp"

#include "delivery/rate_limit.hpp"
#include "relay/core/endpoint_policies.hpp"
#include "relay/core/payload_filter.hpp"
#include "relay/core/rows.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/operations.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>

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

void check(const endpoint_policies& p) {
  auto headers = [](const std::optional<std::vector<std::string>>& lines, const char* flag) {
    if (!lines) return;
    if (lines->size() > 32) throw invalid_input(fmt::format("{}: at most 32 headers", flag));
    for (const auto& line : *lines) {
      std::string why;
      if (!parse_header(line, &why)) throw invalid_input(fmt::format("{}: {}", flag, why));
    }
  };
  headers(p.headers, "--header");
  headers(p.secret_headers, "--header-secret");
  if (p.filter && *p.filter) {
    std::string why;
    if (!payload_filter::compile(**p.filter, &why)) throw invalid_input("--filter: " + why);
  }
  std::optional<delivery::rate> rate;
  if (p.max_rate && *p.max_rate) {
    auto r = delivery::parse_rate(**p.max_rate);
    if (!r) throw invalid_input(fmt::format("--max-rate must be N/s or N/m, N from 1 to 100000 (e.g. 20/s), not '{}'", **p.max_rate));
    rate = *r;
  }
  if (p.rate_burst && *p.rate_burst) {
    const int burst = **p.rate_burst;
    if (burst < 1 || burst > 100000) throw invalid_input("--rate-burst must be between 1 and 100000");
    if (rate && burst > rate->count)
      throw invalid_input(fmt::format("--rate-burst {} is over the rate ({}): a burst is at most the rate", burst,
                                      delivery::to_string(*rate)));
  }
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

std::string secret_header_fingerprint(const std::string& header_line) {
  auto h = parse_header(header_line);
  const std::string name = h ? h->first : std::string("?");
  const std::string value = h ? h->second : header_line;
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int n = 0;
  if (EVP_Digest(value.data(), value.size(), digest.data(), &n, EVP_sha256(), nullptr) != 1 || n < 6)
    throw std::runtime_error("OpenSSL: SHA-256 failed");
  std::string out = name + ": sha256:";
  for (int i = 0; i < 6; ++i) out += fmt::format("{:02x}", digest[static_cast<std::size_t>(i)]);
  return out;
}

std::string secret_headers_shown(const std::optional<std::string>& stored) {
  if (!stored) return "";
  const auto items = parse_text_array(*stored);
  if (!items) return "(unreadable)";
  std::string out;
  for (const auto& item : *items) out += (out.empty() ? "" : "; ") + secret_header_fingerprint(item);
  return out;
}

}  // namespace walhook::relay::operations
