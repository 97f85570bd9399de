#include "delivery/outcome_class.hpp"

namespace walhook::delivery {

outcome_class classify_outcome(const post_result& r) {
  if (r) {
    const unsigned s = r->status;
    if (s >= 200 && s < 300) return outcome_class::success;
    if (s >= 300 && s < 400) return outcome_class::redirect;
    if (s >= 400 && s < 500) return outcome_class::client;
    if (s >= 500 && s < 600) return outcome_class::server;
    return outcome_class::other;
  }
  const auto& ec = r.error();
  if (is_tls_error(ec)) return outcome_class::tls;
  if (ec.category() != transport_category()) return outcome_class::other;
  switch (static_cast<transport_errc>(ec.value())) {
    case transport_errc::timeout:
    case transport_errc::resolve_timeout: return outcome_class::timeout;
    case transport_errc::connect_failed:
    case transport_errc::proxy_failed: return outcome_class::connect;  // no way to the endpoint
    case transport_errc::address_blocked: return outcome_class::ssrf;
    case transport_errc::resolve_failed: return outcome_class::dns;
    case transport_errc::write_failed:
    case transport_errc::read_failed: return outcome_class::network;
    case transport_errc::protocol_error: return outcome_class::protocol;
    case transport_errc::cancelled: return outcome_class::cancelled;
    case transport_errc::broker_nacked:
    case transport_errc::broker_unroutable:
    case transport_errc::broker_refused:
    case transport_errc::broker_closed:
    case transport_errc::no_stream: return outcome_class::broker;
    case transport_errc::broker_blocked: return outcome_class::blocked;
    default: return outcome_class::other;
  }
}

std::string_view to_string(outcome_class c) {
  switch (c) {
    case outcome_class::success: return "2xx";
    case outcome_class::redirect: return "3xx";
    case outcome_class::client: return "4xx";
    case outcome_class::server: return "5xx";
    case outcome_class::timeout: return "timeout";
    case outcome_class::connect: return "connect";
    case outcome_class::tls: return "tls";
    case outcome_class::ssrf: return "ssrf";
    case outcome_class::dns: return "dns";
    case outcome_class::network: return "network";
    case outcome_class::protocol: return "protocol";
    case outcome_class::cancelled: return "cancelled";
    case outcome_class::broker: return "broker";
    case outcome_class::blocked: return "blocked";
    case outcome_class::other: return "other";
  }
  return "other";
}

}  // namespace walhook::delivery
