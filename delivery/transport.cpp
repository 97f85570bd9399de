#include "delivery/transport.hpp"

#include "delivery/destination.hpp"

#include <openssl/x509.h>

namespace walhook::delivery {
namespace {

/// The "walhook.transport" category: one message per transport_errc, worded for last_error.
class transport_category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "walhook.transport"; }
  std::string message(int ev) const override {
    switch (static_cast<transport_errc>(ev)) {
      case transport_errc::invalid_url:
        return "invalid endpoint URL (need an absolute http or https URL with a host)";
      case transport_errc::resolve_failed:
        return "DNS resolution of the endpoint host failed";
      case transport_errc::address_blocked:
        // Named with its way out: a new user's localhost endpoint hits this first.
        return "address blocked by the SSRF guard: every resolved address is loopback, private, link-local, "
               "reserved or a cloud metadata service (walhook run --allow-private-networks allows all but the last)";
      case transport_errc::connect_failed:
        return "TCP connection failed";
      case transport_errc::tls_failed:
        return "TLS handshake failed (no certificate problem: protocol, cipher, or the server speaks no TLS)";
      case transport_errc::write_failed:
        return "connection broke while sending the request";
      case transport_errc::read_failed:
        return "connection broke before a complete response header";
      case transport_errc::protocol_error:
        return "response is not valid HTTP/1.x";
      case transport_errc::timeout:
        return "deadline passed before the response header arrived";
      case transport_errc::cancelled:
        return "HTTP client shut down";
      case transport_errc::resolve_timeout:
        return "DNS lookup of the endpoint host did not finish before the deadline";
      case transport_errc::tls_certificate_expired:
        return "TLS certificate verification failed: certificate expired";
      case transport_errc::tls_certificate_not_yet_valid:
        return "TLS certificate verification failed: certificate not yet valid";
      case transport_errc::tls_hostname_mismatch:
        return "TLS certificate verification failed: hostname mismatch (no subjectAltName matches the endpoint host)";
      case transport_errc::tls_unknown_ca:
        return "TLS certificate verification failed: unknown CA (self-signed, or issuer not trusted; see --ca-file)";
      case transport_errc::broker_nacked:
        return "the broker refused the message (Basic.Nack)";
      case transport_errc::broker_unroutable:
        return "the message reached no queue (Basic.Return): the exchange has no binding for the routing key";
      case transport_errc::broker_blocked:
        return "the broker blocked publishing (connection.blocked: its memory or disk alarm is on)";
      case transport_errc::broker_refused:
        return "the broker refused the publish";
      case transport_errc::broker_closed:
        return "the broker connection closed before the message was confirmed";
      case transport_errc::no_stream:
        return "no JetStream stream covers the subject (walhook does not create streams: the operator does)";
      case transport_errc::bad_message:
        return "the message cannot be built from this event";
      case transport_errc::sink_unavailable:
        return "this walhook has no sink for the URL's scheme";
      case transport_errc::proxy_failed:
        return "the egress proxy did not open a tunnel to the endpoint";
      case transport_errc::auth_failed:
        return "no OAuth2 access token for the endpoint";
    }
    return "unknown transport error";
  }
};

/// The "walhook.tls_verify" category: OpenSSL's X509_V_ERR_* codes.
class tls_verify_category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "walhook.tls_verify"; }
  std::string message(int ev) const override {
    return std::string("TLS certificate verification failed: ") + X509_verify_cert_error_string(ev);
  }
};

}  // namespace

boost::asio::awaitable<post_result> transport::async_publish(const std::string&, const broker_target&,
                                                             const broker_message&, std::chrono::milliseconds) {
  co_return transport_error(transport_errc::sink_unavailable);
}

const boost::system::error_category& transport_category() {
  static const transport_category_impl category;
  return category;
}

const boost::system::error_category& tls_verify_category() {
  static const tls_verify_category_impl category;
  return category;
}

boost::system::error_code tls_verify_error(long verify_result) {
  switch (verify_result) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return make_error_code(transport_errc::tls_certificate_expired);
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return make_error_code(transport_errc::tls_certificate_not_yet_valid);
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return make_error_code(transport_errc::tls_hostname_mismatch);
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_UNTRUSTED:
      return make_error_code(transport_errc::tls_unknown_ca);
    default:
      return {static_cast<int>(verify_result), tls_verify_category()};
  }
}

bool is_tls_error(const boost::system::error_code& ec) {
  if (ec.category() == tls_verify_category()) return true;
  if (ec.category() != transport_category()) return false;
  switch (static_cast<transport_errc>(ec.value())) {
    case transport_errc::tls_failed:
    case transport_errc::tls_certificate_expired:
    case transport_errc::tls_certificate_not_yet_valid:
    case transport_errc::tls_hostname_mismatch:
    case transport_errc::tls_unknown_ca:
      return true;
    default:
      return false;
  }
}

}  // namespace walhook::delivery
