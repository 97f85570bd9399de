#pragma once
// A loopback HTTP/1.1 server for transport tests whose behaviour is scripted per request: it can
// answer with arbitrary raw bytes, late, one byte at a time, never, with interim 1xx responses,
// with Connection: close / HTTP/1.0, with an endless body, or drop the connection instead of
// answering. It records every request and counts connections.
//
// Runs as Asio coroutines on an io_context the test owns and runs (no threads of its own).
// Binds port 0 on 127.0.0.1 (or any loopback address given, e.g. ::1). Destroying the server
// stops it: the acceptor, every connection and every timer are closed; its coroutines hold only
// shared state and finish (or are destroyed with the io_context) without touching the server.
// Thread affinity: use it on the thread that runs the io_context (or while it is not running).

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace walhook::test {

namespace detail {
struct scripted_server_state;
}

/// One request as the server parsed it.
struct recorded_request {
  std::string method;
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;  ///< in arrival order, names as sent
  std::string body;
  std::size_t connection = 0;  ///< 1-based number of the accepted connection it arrived on
  std::size_t sequence = 0;    ///< 1-based index of the request on that connection
  std::string tls_server_name; ///< SNI host name the client sent; "" without TLS or without SNI

  /// First value of header `name` (case-insensitive), "" if absent.
  std::string header(std::string_view name) const;
};

/// What the server does with one request, in order: write `interim` at once, wait `delay`,
/// write `raw` (one byte every `drip_interval` if that is non-zero), stream an endless body if
/// asked, then keep the connection open for the next request, close it, or hang.
struct scripted_action {
  enum class after_write {
    keep_alive,  ///< read the next request on this connection
    close,       ///< close the connection (FIN)
    hang,        ///< keep the connection open and never read or write again
  };
  enum class endless_body {
    none,
    identity,  ///< after `raw`, write body bytes forever (pair with a huge Content-Length)
    chunked,   ///< after `raw`, write 16 KiB chunks forever (pair with Transfer-Encoding: chunked)
    repeat,    ///< write `raw` again and again forever (e.g. an endless stream of 1xx responses)
  };

  std::string interim;                        ///< bytes written as soon as the request is read (e.g. 100 Continue)
  std::chrono::milliseconds delay{0};         ///< wait before writing `raw`
  std::string raw;                            ///< the response bytes: status line, headers, body
  std::chrono::milliseconds drip_interval{0}; ///< > 0: write `raw` one byte at a time, this far apart
  endless_body endless = endless_body::none;
  after_write after = after_write::keep_alive;

  /// A complete response with Content-Length; `extra_headers` are "Name: value" lines without CRLF.
  static scripted_action respond(unsigned status, std::vector<std::string> extra_headers = {},
                                 std::string body = {});
  /// Writes exactly `bytes`, then keeps the connection.
  static scripted_action raw_bytes(std::string bytes);
  /// Reads the request and never answers (the connection stays open).
  static scripted_action never_answer();
  /// Reads the request and closes the connection without a response byte.
  static scripted_action close_without_answer();
  /// `raw` one byte every `interval`.
  static scripted_action drip(std::string raw, std::chrono::milliseconds interval);
  /// Status line and headers in `head` (ending with the blank line), then body bytes forever.
  static scripted_action endless_response(std::string head, endless_body kind);
  /// `bytes` written again and again, forever, as fast as the client reads them.
  static scripted_action repeat_forever(std::string bytes);

  scripted_action&& with_delay(std::chrono::milliseconds d) && { delay = d; return std::move(*this); }
  scripted_action&& with_interim(std::string bytes) && { interim = std::move(bytes); return std::move(*this); }
  scripted_action&& then(after_write a) && { after = a; return std::move(*this); }
};

/// A certificate and its private key, PEM.
struct tls_identity {
  std::string certificate_pem;
  std::string private_key_pem;
};

/// A fresh self-signed certificate (EC P-256, SHA-256, valid from an hour ago for a day, usable
/// as its own trust anchor) whose subjectAltName is `subject_alt_names` in OpenSSL config syntax,
/// e.g. "IP:127.0.0.1,DNS:localhost". Throws std::runtime_error if OpenSSL fails.
tls_identity make_test_certificate(std::string_view subject_alt_names);

/// What make_certificate builds (EC P-256, SHA-256).
struct certificate_spec {
  std::string common_name = "walhook test";  ///< subject CN
  std::string subject_alt_names;             ///< OpenSSL config syntax; "" = no subjectAltName at all
  std::chrono::seconds not_before{-3600};    ///< validity start, relative to now
  std::chrono::seconds not_after{24 * 3600}; ///< validity end, relative to now
  /// basicConstraints CA:TRUE and keyCertSign (a CA, or a self-signed certificate usable as its
  /// own trust anchor); false: a leaf for serverAuth.
  bool is_ca = true;
  std::string extended_key_usage = "serverAuth";  ///< of a leaf (is_ca false), OpenSSL config syntax
  const tls_identity* issuer = nullptr;  ///< signed by this CA (its certificate and key); null = self-signed
};

/// A fresh certificate as `spec` says. Throws std::runtime_error if OpenSSL fails.
tls_identity make_certificate(const certificate_spec& spec);

class scripted_http_server {
 public:
  /// Binds `bind_address`:0 and starts accepting; with `tls`, every connection starts with a TLS
  /// handshake presenting that identity. Throws boost::system::system_error if the address
  /// cannot be bound or the identity cannot be loaded (test setup failure).
  explicit scripted_http_server(boost::asio::io_context& ioc,
                                const boost::asio::ip::address& bind_address = boost::asio::ip::address_v4::loopback(),
                                std::optional<tls_identity> tls = std::nullopt);
  ~scripted_http_server();
  scripted_http_server(const scripted_http_server&) = delete;
  scripted_http_server& operator=(const scripted_http_server&) = delete;

  unsigned short port() const;
  /// "http://127.0.0.1:<port><target>" ("https://…" with TLS; IPv6 addresses bracketed).
  std::string url(std::string_view target = "/") const;

  /// Appends an action; requests take queued actions in arrival order.
  void push(scripted_action action);
  /// Decides for requests that find the queue empty. Without one they get 200 with an empty body.
  void set_handler(std::function<scripted_action(const recorded_request&)> handler);

  const std::vector<recorded_request>& requests() const;
  std::size_t accepted_connections() const;
  /// Connections that ended because the peer closed or reset them (EOF or a failed write).
  std::size_t closed_by_peer() const;
  /// Connections whose TLS handshake failed (the client refused the certificate, or spoke no TLS).
  std::size_t failed_handshakes() const;
  /// Connections currently open on the server side.
  std::size_t open_connections() const;
  /// The first exception a server coroutine died of, if any (a bug in a test or the server).
  std::exception_ptr failure() const;

  /// Resumes when `condition` holds (re-checked whenever the server records an event) or after
  /// `timeout`; returns the condition's final value. For waiting on the server without sleeping.
  boost::asio::awaitable<bool> wait_until(std::function<bool()> condition, std::chrono::milliseconds timeout);

  /// Closes the acceptor and every connection; idempotent (the destructor calls it).
  void stop();

 private:
  std::shared_ptr<detail::scripted_server_state> state_;
};

/// True if [::1] can be bound on this machine (IPv6 tests skip otherwise).
bool ipv6_loopback_available();

}  // namespace walhook::test
