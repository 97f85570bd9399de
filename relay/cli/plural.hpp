#pragma once
// Counts in the CLI's lines: "1 delivery", "3 deliveries", never "1 deliveries".

#include <cstdint>
#include <string>
#include <string_view>

namespace walhook::relay::cli {

/// "1 delivery", "0 deliveries", "3 deliveries": `n` with `one` or `many`. Pure.
inline std::string plural(std::int64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

}  // namespace walhook::relay::cli
