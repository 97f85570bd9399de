#include "relay/core/secret_rotation.hpp"

#include <algorithm>

namespace walhook::relay {

std::span<const delivery::signing_key> signing_keys(const endpoint& ep, std::chrono::system_clock::time_point now) {
  std::span<const delivery::signing_key> keys(ep.keys);
  if (keys.size() > 1 && ep.secret_grace_until && now >= *ep.secret_grace_until) return keys.first(1);
  return keys;
}

std::chrono::seconds secret_drop_schedule::failed(steady_time now) {
  ++failures_;
  auto wait = interval;
  for (int i = 1; i < failures_ && wait < max_wait; ++i) wait *= 2;
  wait = std::min(wait, max_wait);
  next_ = now + wait;
  return wait;
}

}  // namespace walhook::relay
