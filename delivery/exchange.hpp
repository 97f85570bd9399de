#pragma once
// Internal to walhook::delivery (http_client.cpp and its unit tests): never included by a
// public header, because it pulls in Beast.
//
// One request/response exchange on an open connection, and the request it sends: building the
// POST from an http_target and the caller's headers (refusing bytes that could split it), then
// writing it and reading the response (skipping 1xx, reading a small body so the connection can
// be reused). No sockets are opened here and no connection is pooled: the caller decides.

#include "common/time.hpp"
#include "delivery/connection_pool.hpp"
#include "delivery/transport.hpp"
#include "delivery/url.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <cstddef>
#include <string_view>

namespace walhook::delivery {

/// The request as it goes on the wire.
using request_message = boost::beast::http::request<boost::beast::http::string_body>;

/// Builds the POST (HTTP/1.1) for `target`: Host, `user_agent`, Content-Type: application/json,
/// Content-Length, then the caller's headers. Caller headers that are framing or connection
/// management (Host, Content-Length, Transfer-Encoding, Connection, TE, Upgrade, Expect) are
/// ignored; User-Agent and Content-Type replace the defaults; others are added in order.
/// Errors: transport_errc::invalid_url if a hand-built target has no host, a bad port or a bad
/// request target; std::errc::invalid_argument if a header name is not an RFC 9110 §5.6.2 token
/// or a value contains CR, LF or NUL (a caller bug: nothing may be sent).
boost::system::result<request_message> build_request(std::string_view user_agent, const http_target& target,
                                                     const http_request& request);

/// One call's time budget, read from the client's clock_source. Asio and Beast timers run on
/// the real steady clock, so they are armed with what is left (`remaining()`, expires_after),
/// never with the absolute `at`: an injected clock only has to be monotonic.
///
/// Beast's tcp_stream expiry alone does not bound a call: it is checked when a read starts and
/// cancelled whenever one completes, so a peer that keeps bytes coming (an endless stream of 1xx
/// responses) outruns it. The client therefore races every call against a timer of its own
/// (http_client.cpp, call_context) that closes the connection when it fires and sets `fired`.
struct call_deadline {
  const clock_source* clock = nullptr;  ///< not owned; the client's options.clock
  steady_clock::time_point start;       ///< when the call began (async_post)
  steady_clock::time_point at;          ///< start + total_deadline
  /// Set when the call's own deadline timer has fired (not owned; null in tests of the parts).
  const bool* fired = nullptr;

  /// Time left, ≤ 0 once the deadline has passed.
  steady_clock::duration remaining() const { return at - clock->steady_now(); }
  /// The deadline timer fired, or the clock reads `at` or later.
  bool passed() const { return (fired != nullptr && *fired) || clock->steady_now() >= at; }
  /// Since `start`, µs (http_response::elapsed).
  std::chrono::microseconds elapsed() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(clock->steady_now() - start);
  }
};

/// Maps an I/O failure to what the call reports: transport_errc::cancelled if the client has
/// been shut down (`stopped`), timeout if Beast's expiry fired or the deadline has passed,
/// `otherwise` in every other case. Being shut down or late wins over the raw error, which
/// then only says how the socket was closed.
boost::system::error_code classify_io_error(bool stopped, const boost::system::error_code& ec,
                                            const call_deadline& deadline, transport_errc otherwise);

/// What one exchange produced.
struct exchange_outcome {
  boost::system::error_code ec;  ///< transport_errc (write_failed, read_failed, protocol_error, timeout, cancelled)
  /// The failure happened before any response byte: safe to repeat on a fresh connection
  /// when the connection came from the pool (the server closed it while idle).
  bool nothing_received = false;
  /// The connection may carry the next request: keep-alive, the whole response read, nothing
  /// left in the buffer.
  bool reusable = false;
  http_response response;  ///< status, Retry-After, Location, elapsed; meaningful if !ec
};

/// Writes `req` on `conn` and reads the response header, skipping interim 1xx responses (a
/// fresh parser per message, RFC 9110 §15.2; 101 is final and never reusable; the deadline is
/// checked after each, so they can never extend the call). Then reads and
/// discards the body only if it is delimited by Content-Length ≤ `body_cap` bytes; chunked,
/// larger or EOF-delimited bodies are left unread and the connection is not reusable. With
/// `keep_body` the body is read whole into response.body, any framing, ≤ `body_cap` bytes (more is
/// protocol_error: a caller that wants the body cannot judge the answer without it). The
/// connection's expiry is set to the deadline's remaining time. `stopped` is the client's
/// shutdown flag, read after every suspension; it and `conn` and `req` must outlive the
/// awaitable. Runs on the connection's executor.
boost::asio::awaitable<exchange_outcome> exchange(connection& conn, const request_message& req, bool keep_body,
                                                  call_deadline deadline, std::size_t body_cap, const bool& stopped);

}  // namespace walhook::delivery
