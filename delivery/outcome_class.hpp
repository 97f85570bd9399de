#pragma once
// The class of one attempt's outcome: a bounded set of labels for /metrics
// (walhook_endpoint_attempts_total{outcome=…}), the console and the in-memory outcome log.

#include "delivery/transport.hpp"

#include <array>
#include <string_view>

namespace walhook::delivery {

enum class outcome_class {
  success,    ///< "2xx"
  redirect,   ///< "3xx" (walhook does not follow redirects: a failed attempt)
  client,     ///< "4xx"
  server,     ///< "5xx"
  timeout,    ///< the attempt's total deadline passed (transport_errc::timeout, resolve_timeout)
  connect,    ///< no address accepted a TCP connection
  tls,        ///< handshake or certificate verification failed (is_tls_error)
  ssrf,       ///< every address was refused by the SSRF guard (address_blocked)
  dns,        ///< the name did not resolve
  network,    ///< the connection broke while writing the request or reading the response
  protocol,   ///< the response was not valid HTTP/1.x
  cancelled,  ///< walhook shut the transport down (stop, or the endpoint changed)
  broker,     ///< a broker refused or did not confirm: Nack, unroutable, an API error, no stream, closed
  blocked,    ///< a broker blocked publishing (AMQP connection.blocked): back-pressure
  other,      ///< anything else: an invalid URL, a 1xx status, an unknown error
};

/// Every class, in the order above (for exposition).
inline constexpr std::array<outcome_class, 15> all_outcome_classes{
    outcome_class::success,  outcome_class::redirect,  outcome_class::client,  outcome_class::server,
    outcome_class::timeout,  outcome_class::connect,   outcome_class::tls,     outcome_class::ssrf,
    outcome_class::dns,      outcome_class::network,   outcome_class::protocol, outcome_class::cancelled,
    outcome_class::broker,   outcome_class::blocked,   outcome_class::other};

/// The class of an attempt's result: an HTTP status by its hundreds, a transport error by kind.
outcome_class classify_outcome(const post_result& r);
/// The label: "2xx", "3xx", "4xx", "5xx", "timeout", "connect", "tls", "ssrf", "dns",
/// "network", "protocol", "cancelled", "broker", "blocked", "other".
std::string_view to_string(outcome_class c);

}  // namespace walhook::delivery
