#pragma once
// The HTTP/1.1 transport that carries webhook attempts (Boost.Beast + OpenSSL).
//
// * One total deadline per attempt (default 5 s) covering resolve, connect, TLS handshake,
//   writing the request and reading the response header (docs/architecture.md, Rules).
// * Keep-alive connections pooled per pool key (walhook uses the endpoint id, so one slow
//   endpoint never holds another's connections); TCP_NODELAY; TLS verified (the host against
//   the certificate's subjectAltName only) with SNI; verification failures say why.
// * Redirects are never followed; interim 1xx responses are skipped; the response body is read
//   and discarded only if it is small (≤ body_cap); otherwise the connection is dropped instead.
// * A pooled connection that turns out closed by the server before any response byte is retried
//   once on a fresh connection (not a separate attempt).
// * SSRF guard: after DNS resolution, loopback, private, link-local, unique-local, CGNAT,
//   multicast and unspecified addresses (and cloud metadata 169.254.169.254) are refused
//   unless allow_private_networks is set.
//
// Thread affinity: one client per executor; async_post may run concurrently for many requests.

#include "common/time.hpp"
#include "delivery/proxy.hpp"
#include "delivery/ssrf.hpp"
#include "delivery/transport.hpp"
#include "delivery/url.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace walhook::delivery {

/// How an http_client behaves; fixed at construction.
struct http_client_options {
  /// Whole call, ms: resolve, connect, TLS handshake, write, response header (docs/architecture.md, Rules).
  std::chrono::milliseconds total_deadline{5000};
  std::size_t body_cap = 16 * 1024;      ///< bytes of response body read (and discarded) at most
  std::size_t max_idle_per_pool = 8;     ///< idle keep-alive connections kept per pool key; 0 = no reuse
  std::chrono::seconds idle_timeout{30}; ///< idle connections this old or older are closed, not reused
  bool allow_private_networks = false;   ///< disables the SSRF guard (tests, demo, intranets)
  std::string user_agent = "walhook/0.1";
  /// Extra trusted CA certificates (PEM, one or more), in addition to OpenSSL's default verify
  /// paths: private CAs of intranet endpoints (`walhook run --ca-file`, via read_ca_bundle), and
  /// tests. "" = default paths only. Unparsable PEM is fatal setup: the http_client constructor
  /// throws boost::system::system_error.
  std::string extra_ca_pem;
  /// The egress proxy every call goes through by a CONNECT tunnel to the address walhook resolved
  /// and checked (`walhook run --proxy`, delivery/proxy.hpp); none: direct.
  std::optional<http_proxy> proxy;
  /// Hosts reached directly despite `proxy` (`walhook run --no-proxy`, bypasses_proxy()).
  std::vector<std::string> no_proxy;
  /// Where the client reads the monotonic time: the start of each call (total_deadline,
  /// http_response::elapsed) and the age of idle pooled connections (idle_timeout). Not owned;
  /// must outlive the client; must not be null (the constructor throws std::invalid_argument).
  /// Socket and DNS timers still run on the real steady clock: they are armed with the time
  /// left by this clock, so a test clock need not be anchored to std::chrono::steady_clock.
  const clock_source* clock = &real_clock::instance();
};

/// Reads a PEM bundle of CA certificates from `path` (for http_client_options::extra_ca_pem).
/// Errors (fatal setup for the caller): the file's errno if it cannot be read;
/// std::errc::invalid_argument if it holds no PEM certificate OpenSSL can parse.
boost::system::result<std::string> read_ca_bundle(const std::string& path);

/// The real transport: HTTP/1.1 over TCP or TLS with per-pool-key keep-alive (see the header
/// comment and delivery/README.md for every rule).
class http_client final : public transport {
 public:
  http_client(boost::asio::any_io_executor ex, http_client_options options);
  ~http_client() override;
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  /// POSTs `request` to `target`. Any status (2xx…5xx) is a value; transport failures are
  /// transport_errc errors. `pool_key` selects the keep-alive pool (walhook: endpoint id).
  /// The returned awaitable is lazy: the arguments must stay alive until it is first awaited,
  /// which copies them (`co_await client.async_post(…)` with temporaries is fine). Headers Host, Content-Length,
  /// Transfer-Encoding, Connection, TE, Upgrade and Expect in `request.headers` are ignored (the
  /// transport owns framing); User-Agent and Content-Type replace the defaults; a header name
  /// that is not an RFC 9110 token or a value containing CR, LF or NUL fails the call with
  /// std::errc::invalid_argument (a caller bug, nothing is sent).
  /// Must be awaited on the client's executor.
  boost::asio::awaitable<post_result> async_post(const std::string& pool_key, const http_target& target,
                                                 const http_request& request) override;

  /// Drops idle connections of one pool (endpoint removed or its URL changed). Safe from any
  /// thread (dispatched to the client's executor).
  void forget(const std::string& pool_key) override;
  /// Closes everything; pending and later calls fail with transport_errc::cancelled. Safe from
  /// any thread (dispatched to the client's executor; immediate when called on it). The
  /// destructor calls it.
  void shutdown() override;
  /// Ends the calls in progress (transport_errc::cancelled, connections closed); later calls
  /// work. Safe from any thread, like shutdown().
  void cancel_all() override;

  const http_client_options& options() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace walhook::delivery
