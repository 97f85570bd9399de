#pragma once
// walhook's admin listener (`walhook run --admin-listen`), as the scenarios read it: the port it
// logged, and its /metrics (a free port to give it: relay::free_tcp_port()). Blocking; any thread.

#include <map>
#include <string>

namespace walhook::bench {

/// The port a walhook started with `--admin-listen=127.0.0.1:0` listens on, from its log line
/// `"admin.listening"` (`"port":N`); 0 if not (yet) logged.
int admin_port_from_log(const std::string& log_path);

/// GET /metrics from walhook's admin listener on 127.0.0.1:port (blocking, 5 s per send and
/// receive): every sample, by name with its labels as written (`walhook_endpoint_in_flight{endpoint="7"}`).
/// Empty when it could not be read.
std::map<std::string, double> scrape_metrics(int port);

}  // namespace walhook::bench
