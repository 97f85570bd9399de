#include "relay/tenant/rate_limit.hpp"

#include <algorithm>
#include <cmath>

namespace walhook::relay::tenant {

namespace {

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

void rate_limiter::forget_full(std::chrono::steady_clock::time_point now) {
  std::erase_if(buckets_, [&](const auto& kv) {
    return kv.second.tokens + seconds_between(kv.second.at, now) * rate_ >= burst_;
  });
}

bool rate_limiter::exhausted(const std::string& key, std::chrono::steady_clock::time_point now) const {
  const auto it = buckets_.find(key);
  if (it == buckets_.end()) return false;
  return std::min(burst_, it->second.tokens + std::max(0.0, seconds_between(it->second.at, now)) * rate_) < 1.0;
}

std::optional<std::chrono::seconds> rate_limiter::take(const std::string& key,
                                                       std::chrono::steady_clock::time_point now) {
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_keys) forget_full(now);
    it = buckets_.emplace(key, bucket{burst_, now}).first;
  }
  auto& b = it->second;
  b.tokens = std::min(burst_, b.tokens + std::max(0.0, seconds_between(b.at, now)) * rate_);
  b.at = now;
  if (b.tokens >= 1.0) {
    b.tokens -= 1.0;
    return std::nullopt;
  }
  const double wait = (1.0 - b.tokens) / rate_;
  return std::chrono::seconds{std::max<long long>(1, static_cast<long long>(std::ceil(wait)))};
}

}  // namespace walhook::relay::tenant
