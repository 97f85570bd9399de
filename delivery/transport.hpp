#pragma once
// The transport seam: what the engine needs to carry one webhook attempt, and nothing of how
// (Redpanda's abstract_client is the model). delivery::http_client is the real one (Beast +
// OpenSSL); tests/support/fake_transport.hpp is the one the engine's unit tests drive by hand.

#include "delivery/url.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace walhook::delivery {

struct broker_target;  // delivery/destination.hpp

/// Transport failures; each maps to a distinct, readable last_error.
enum class transport_errc {
  invalid_url = 1,   ///< not an absolute http(s) URL with a host
  resolve_failed,    ///< DNS lookup failed or returned nothing
  address_blocked,   ///< every resolved address was refused by the SSRF guard
  connect_failed,    ///< no resolved address accepted a TCP connection (transport_error::detail says each and why)
  tls_failed,        ///< TLS handshake failed, not because of the certificate (protocol, no TLS)
  write_failed,      ///< the connection broke while sending the request
  read_failed,       ///< the connection broke before a complete response header
  protocol_error,    ///< the response was not valid HTTP/1.x
  timeout,           ///< the total deadline passed
  cancelled,         ///< the client was shut down
  resolve_timeout,   ///< the DNS lookup itself did not finish before the deadline
  // Certificate verification failures (OpenSSL's SSL_get_verify_result); any other verification
  // failure is an error of tls_verify_category() that names OpenSSL's reason.
  tls_certificate_expired,        ///< the server's certificate (or one in its chain) has expired
  tls_certificate_not_yet_valid,  ///< the server's certificate (or one in its chain) is not valid yet
  tls_hostname_mismatch,          ///< no subjectAltName of the certificate matches the host (the CN never counts)
  tls_unknown_ca,                 ///< not issued by a trusted CA: self-signed, or the issuer is unknown
  // Broker sinks (delivery/destination.hpp); detail() carries the broker's own words.
  broker_nacked,      ///< the broker refused to take the message (AMQP Basic.Nack)
  broker_unroutable,  ///< the message reached no queue (AMQP Basic.Return of a mandatory publish)
  broker_blocked,     ///< the broker's memory or disk alarm is on (AMQP connection.blocked): back-pressure
  broker_refused,     ///< the broker answered with an error (a JetStream API error, an AMQP channel or connection close, a refused login)
  broker_closed,      ///< the connection closed before the broker confirmed the message
  no_stream,          ///< no JetStream stream covers the subject (no responders)
  bad_message,        ///< the message cannot be built from this event (a template value it lacks): dead, never retried
  sink_unavailable,   ///< this walhook has no sink for the URL's scheme
  proxy_failed,       ///< the egress proxy refused the tunnel or could not open it (its status line in detail)
  auth_failed,        ///< no OAuth2 token for the endpoint: its token endpoint refused or failed (delivery/oauth2.hpp; why in detail)
};
/// The "walhook.transport" category: a distinct, human-readable message per transport_errc
/// (what an endpoint's last_error shows). A function-local static, safe from any thread.
const boost::system::error_category& transport_category();
/// Makes transport_errc values usable as (and comparable with) boost::system::error_code.
inline boost::system::error_code make_error_code(transport_errc e) { return {static_cast<int>(e), transport_category()}; }
/// The "walhook.tls_verify" category: the value is OpenSSL's X509_V_ERR_* code of a certificate
/// verification failure that no transport_errc names; the message is "TLS certificate
/// verification failed: " + X509_verify_cert_error_string (e.g. "unsuitable certificate purpose").
const boost::system::error_category& tls_verify_category();
/// What a failed certificate verification (OpenSSL's X509_V_ERR_* from SSL_get_verify_result
/// or a verify callback, not X509_V_OK) reports: a tls_certificate_* / tls_hostname_mismatch /
/// tls_unknown_ca transport_errc, or a tls_verify_category() error. Shared by every TLS client.
boost::system::error_code tls_verify_error(long verify_result);
/// True for every TLS failure the transport reports: tls_failed, the tls_certificate_* /
/// tls_hostname_mismatch / tls_unknown_ca values, and tls_verify_category() errors.
bool is_tls_error(const boost::system::error_code& ec);

/// A failed attempt: its kind — the error_code it is (a transport_errc, or another category's
/// code), compared and classified as one — and, where the kind alone says too little, what
/// happened: for connect_failed each address tried and why, "127.0.0.1:28099: connection
/// refused; [::1]:28099: connection refused". What an endpoint's last_error shows is text().
class transport_error : public boost::system::error_code {
 public:
  transport_error() = default;
  transport_error(const boost::system::error_code& ec, std::string detail = {})  // implicit, like an error_code
      : boost::system::error_code(ec), detail_(std::move(detail)) {}
  transport_error(transport_errc e, std::string detail = {})  // implicit, like an error_code
      : boost::system::error_code(make_error_code(e)), detail_(std::move(detail)) {}
  /// "" if the kind says it all.
  const std::string& detail() const { return detail_; }
  /// The kind's message, then ": " and the detail if there is one.
  std::string text() const { return detail_.empty() ? message() : message() + ": " + detail_; }

 private:
  std::string detail_;
};

/// One attempt's request: the body and the caller's headers (the transport owns framing).
struct http_request {
  std::string body;  ///< sent as is, Content-Type: application/json (a Content-Type header replaces it)
  std::vector<std::pair<std::string, std::string>> headers;
  /// Keep the response body in http_response::body (an OAuth2 token response): read whole, at
  /// most the client's body cap (a larger one is transport_errc::protocol_error). Otherwise a
  /// small body is read and discarded, a large one never read.
  bool keep_body = false;
  /// This call's total deadline, when shorter than the transport's own (what is left of an
  /// attempt that made another call first: an OAuth2 token request). ≤ 0: timeout at once.
  std::optional<std::chrono::milliseconds> deadline{};
};

/// What walhook keeps of a response: the status line and the headers that drive policy.
struct http_response {
  unsigned status = 0;
  std::string retry_after;  ///< Retry-After header, raw (seconds or HTTP-date), "" if absent
  std::string location;     ///< Location header of a 3xx, "" if absent
  bool reused_connection = false;
  std::chrono::microseconds elapsed{0};  ///< from call to response header
  std::string body;  ///< the response body, only if the request asked for it (http_request::keep_body)
};

/// One message for a broker sink: what the HTTP request carries, named for a broker.
struct broker_message {
  std::string subject;     ///< the rendered NATS subject or AMQP routing key
  std::string message_id;  ///< the event id: JetStream Nats-Msg-Id, AMQP message_id
  std::string body;        ///< the webhook body, byte for byte; content type application/json
  /// Headers (JetStream) or the headers table (AMQP): webhook-id, webhook-timestamp,
  /// webhook-signature, walhook-event-type, walhook-tenant-id, and walhook-aggregate-id /
  /// walhook-aggregate-type when the event has them.
  std::vector<std::pair<std::string, std::string>> headers;
};

/// What an attempt comes to: a response (any HTTP status), or a transport_error. A broker
/// sink's confirmation (JetStream PubAck, AMQP Basic.Ack) is reported as status 200: the one
/// success there is, whatever the sink.
using post_result = boost::system::result<http_response, transport_error>;

/// Carries attempts. Any HTTP status is a value; transport failures are transport_errc errors.
/// Thread affinity: one executor; every call on it.
class transport {
 public:
  virtual ~transport() = default;

  /// POSTs `request` to `target`; `pool_key` selects the keep-alive pool (walhook: the endpoint
  /// id), so one endpoint never holds another one's connections. The awaitable is lazy: the
  /// arguments must live until it is first awaited.
  virtual boost::asio::awaitable<post_result> async_post(const std::string& pool_key, const http_target& target,
                                                         const http_request& request) = 0;
  /// Publishes `message` to a broker and completes when the broker has confirmed it durably
  /// (status 200) or refused it, the connection failed, or `deadline` passed
  /// (transport_errc::timeout). `pool_key` selects the connection (walhook: the endpoint id).
  /// Transports without a sink for target.kind answer transport_errc::sink_unavailable.
  /// Lazy like async_post.
  virtual boost::asio::awaitable<post_result> async_publish(const std::string& pool_key, const broker_target& target,
                                                            const broker_message& message,
                                                            std::chrono::milliseconds deadline);
  /// Drops idle connections of one pool (endpoint removed, or its URL changed).
  virtual void forget(const std::string& pool_key) = 0;
  /// Ends every call in progress with transport_errc::cancelled; later calls fail the same way.
  virtual void shutdown() = 0;
  /// Ends every call in progress with transport_errc::cancelled (their connections closed, so
  /// the peer sees them end); later calls work. walhook abandons a lost session's attempts so.
  virtual void cancel_all() {}
};

}  // namespace walhook::delivery

template <>
struct boost::system::is_error_code_enum<walhook::delivery::transport_errc> : std::true_type {};
