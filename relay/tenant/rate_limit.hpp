#pragma once
// Requests per second per tenant API token (docs/tenant-api.md, Limits): a token bucket each,
// refilled at `rate` per second up to `burst`. A request that finds its bucket empty is answered
// 429 with Retry-After (RFC 9110 §10.2.3) in whole seconds. Pure: the caller gives the time
// (steady clock).

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>

namespace walhook::relay::tenant {

class rate_limiter {
 public:
  /// `rate` requests per second (> 0), `burst` at once (≥ 1).
  rate_limiter(double rate, double burst) : rate_(rate), burst_(burst) {}
  /// Takes one request of `key` (a token's hash) at `now`: nullopt if it may go, else how long
  /// until it could (rounded up to a whole second, at least 1 s).
  std::optional<std::chrono::seconds> take(const std::string& key, std::chrono::steady_clock::time_point now);
  /// Whether a request of `key` would be refused at `now`, without taking one.
  bool exhausted(const std::string& key, std::chrono::steady_clock::time_point now) const;
  /// Buckets kept now (at most max_keys: full ones are forgotten first).
  std::size_t size() const { return buckets_.size(); }
  static constexpr std::size_t max_keys = 10000;

 private:
  struct bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point at{};
  };
  void forget_full(std::chrono::steady_clock::time_point now);
  double rate_, burst_;
  std::unordered_map<std::string, bucket> buckets_;
};

}  // namespace walhook::relay::tenant
