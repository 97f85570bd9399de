#pragma once
// What the broker sinks (delivery/nats_sink.hpp, delivery/amqp_sink.hpp) share: their options,
// and the SSRF-checked name resolution they run on their own threads before they connect.

#include "common/time.hpp"
#include "delivery/ssrf.hpp"
#include "delivery/transport.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace walhook::delivery {

struct broker_sink_options {
  /// Disables the SSRF guard for broker hosts too (walhook run --allow-private-networks).
  bool allow_private_networks = false;
  /// Extra trusted CA certificates (PEM) for nats+tls:// and amqps://, as for HTTPS (--ca-file).
  std::string extra_ca_pem;
  /// Threads that run the libraries' blocking calls (connect, login, close): a slow or
  /// unreachable broker holds one of them until its deadline, never the engine's thread.
  int blocking_threads = 4;
  /// The most unconfirmed publishes an endpoint has on its connection (a pipelined window; a
  /// NATS connection shared by N endpoints carries N times this); the endpoint's
  /// max_concurrency bounds it first.
  int max_unconfirmed = 1024;
  /// Where the sinks read the monotonic time (http_response::elapsed). Not owned; not null.
  const clock_source* clock = &real_clock::instance();
};

/// Resolves `host`:`port` and keeps the addresses the SSRF guard allows (delivery/ssrf.hpp;
/// cloud metadata addresses never). Blocking (getaddrinfo): call it on a sink's own thread.
/// Errors: resolve_failed (detail: the resolver's message), address_blocked (every address
/// refused; detail: which and why).
boost::system::result<std::vector<boost::asio::ip::tcp::endpoint>, transport_error> resolve_checked(
    const std::string& host, const std::string& port, ssrf_policy policy);

/// The guard's policy for a broker target: open with allow_private_networks, private_allowed for
/// an inbox destination (broker_target::private_network_allowed), else guarded. Pure.
ssrf_policy policy_of(const broker_sink_options& options, const broker_target& target);

}  // namespace walhook::delivery
