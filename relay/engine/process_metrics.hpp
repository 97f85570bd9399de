#pragma once
// The process metrics of /metrics, read from Linux /proc (relay/core/metrics.hpp parses and renders them).

#include "relay/core/metrics.hpp"

#include <optional>

namespace walhook::relay {

/// This process's metrics from /proc/self; std::nullopt where /proc is not there (not Linux).
std::optional<process_metrics> read_process_metrics();

}  // namespace walhook::relay
