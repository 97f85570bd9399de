#pragma once
// `walhook demo`, the embedded default: a throwaway PostgreSQL (relay/demo/embedded_postgres.hpp),
// a receiver that verifies signatures (relay/demo/receiver.hpp), three endpoints over two
// tenants, sample events committed one by one, each delivery printed with its latency from
// COMMIT to receipt.

#include <string>

namespace walhook::relay {

struct demo_args {
  int events = 12;
  bool hold = false;  ///< keep running after the sample events until Ctrl-C
  /// The console and /metrics on HOST:PORT (loopback); "" = localhost:9187 with --hold, none
  /// without; "off" = none.
  std::string admin_listen;
};
/// Runs the demo; returns the process exit code (0: every sample delivered and verified).
int cmd_demo(const demo_args& a);

}  // namespace walhook::relay
