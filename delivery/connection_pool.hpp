#pragma once
// Internal to walhook::delivery (http_client.cpp, exchange.cpp and their unit tests): never
// included by a public header, because it pulls in Beast and Asio's SSL streams.
//
// The keep-alive side of the transport: one connection (plain or TLS) and the idle connections
// kept per pool key between calls. Idle time is measured by an injected clock_source, so tests
// can age connections without sleeping.

#include "common/time.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

namespace walhook::delivery {

/// Where a connection leads: it is only reused for the same scheme, host and port (as given in
/// the http_target, so "localhost" and "127.0.0.1" are different origins).
struct origin_key {
  bool tls = false;
  std::string host;
  std::string port;
  bool operator==(const origin_key&) const = default;
};

/// One keep-alive connection: plain TCP or TLS (a fresh ssl_stream per TCP connection; exactly
/// one of `plain` and `secure` is engaged). Owned by one call at a time, or by the pool while
/// idle; used on the client's executor only.
struct connection {
  origin_key origin;
  std::optional<boost::beast::tcp_stream> plain;
  std::optional<boost::beast::ssl_stream<boost::beast::tcp_stream>> secure;
  boost::beast::flat_buffer buffer;        ///< bytes read past the last response, if any
  steady_clock::time_point idle_since{};   ///< by the pool's clock; set when pooled

  /// The TCP layer (with its expiry timer) under either stream.
  boost::beast::tcp_stream& tcp();

  /// Abandons the connection: no TLS close_notify, unread input makes the kernel send RST.
  void close();

  /// False if the server already closed an idle connection (or sent bytes nobody asked for on
  /// plain HTTP, which would corrupt the next response). A non-blocking MSG_PEEK; never blocks.
  bool looks_alive();
};

/// The idle keep-alive connections, per pool key (walhook: the endpoint id, so one endpoint
/// never holds another one's connections). Each key's connections are kept oldest first; the
/// freshest is reused (least likely to have been closed by the server). Expired connections are
/// closed when their key is next used, by forget() or by close_all(). Not thread-safe: used on
/// the client's executor only.
class connection_pool {
 public:
  /// `clock` (not owned; must outlive the pool) dates idle connections. A connection idle for
  /// `idle_timeout` or longer is closed, not reused; at most `max_idle_per_key` stay idle per
  /// key. Either limit at 0 turns pooling off (release() then closes every connection).
  connection_pool(const clock_source& clock, std::size_t max_idle_per_key, std::chrono::seconds idle_timeout);

  /// The freshest idle connection of `pool_key` that leads to `origin` and still looks alive,
  /// or nullptr. Closes the expired, dead and other-origin ones it meets on the way.
  std::unique_ptr<connection> take_idle(const std::string& pool_key, const origin_key& origin);

  /// Keeps a connection that is ready for the next request (the caller judged it reusable), or
  /// closes it if pooling is off; closes the oldest of the key beyond max_idle_per_key.
  void release(const std::string& pool_key, std::unique_ptr<connection> c);

  /// Closes and drops the idle connections of one key (endpoint removed or its URL changed).
  void forget(const std::string& pool_key);

  /// Closes and drops every idle connection (shutdown).
  void close_all();

  /// Idle connections currently kept for `pool_key` (including expired ones not yet pruned).
  std::size_t idle_count(const std::string& pool_key) const;

 private:
  const clock_source& clock_;
  std::size_t max_idle_per_key_;
  std::chrono::seconds idle_timeout_;
  std::unordered_map<std::string, std::deque<std::unique_ptr<connection>>> idle_;
};

}  // namespace walhook::delivery
