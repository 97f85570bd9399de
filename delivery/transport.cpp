#include "delivery/transport.hpp"

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
        return "every resolved address is private, loopback, link-local or reserved (SSRF guard)";
      case transport_errc::connect_failed:
        return "no resolved address accepted a TCP connection";
      case transport_errc::tls_failed:
        return "TLS handshake or certificate verification failed";
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
    }
    return "unknown transport error";
  }
};

}  // namespace

const boost::system::error_category& transport_category() {
  static const transport_category_impl category;
  return category;
}

}  // namespace walhook::delivery
