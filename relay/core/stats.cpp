#include "relay/core/stats.hpp"

namespace walhook::relay {

void latency_histogram::observe(double seconds) {
  std::size_t bucket = 0;
  while (bucket < bounds.size() && seconds > bounds[bucket]) ++bucket;
  ++counts[bucket];
  sum_s += seconds;
}

std::uint64_t latency_histogram::count() const {
  std::uint64_t n = 0;
  for (auto c : counts) n += c;
  return n;
}

}  // namespace walhook::relay
