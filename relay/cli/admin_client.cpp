#include "relay/cli/admin_client.hpp"

#include "relay/operations/blocking_db.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/url/parse.hpp>

#include <fmt/format.h>
#include <openssl/ssl.h>

#include <exception>
#include <optional>

namespace walhook::relay {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

/// How far the exchange got, and why it stopped.
struct progress {
  const char* step = "resolve";
  boost::system::error_code failure;
  bool done = false;
};

/// The request on a connected stream (TCP or TLS), then the answer into `parser`.
template <class Stream>
asio::awaitable<void> send_and_read(Stream& stream, http::request<http::empty_body>& req,
                                    http::response_parser<http::string_body>& parser, progress& p) {
  p.step = "send the request";
  auto [wec, wn] = co_await http::async_write(stream, req, tuple_awaitable);
  if (wec) co_return void(p.failure = wec);
  p.step = "read the answer";
  beast::flat_buffer buffer;
  auto [rec, rn] = co_await http::async_read(stream, buffer, parser, tuple_awaitable);
  p.failure = rec;
}

/// Resolve, connect, the TLS handshake if `tls`, then send_and_read.
asio::awaitable<void> exchange(std::string host, std::string port, ssl::context* tls, std::chrono::milliseconds timeout,
                               http::request<http::empty_body>& req, http::response_parser<http::string_body>& parser,
                               progress& p) {
  const auto ex = co_await asio::this_coro::executor;
  asio::ip::tcp::resolver resolver(ex);
  auto [rec, results] = co_await resolver.async_resolve(host, port, tuple_awaitable);
  if (rec) co_return void(p.failure = rec);
  beast::tcp_stream tcp(ex);
  tcp.expires_after(timeout);
  p.step = "connect";
  auto [cec, at] = co_await tcp.async_connect(results, tuple_awaitable);
  if (cec) co_return void(p.failure = cec);
  if (!tls) co_return co_await send_and_read(tcp, req, parser, p);
  beast::ssl_stream<beast::tcp_stream> stream(std::move(tcp), *tls);
  boost::system::error_code not_an_address;
  asio::ip::make_address(host, not_an_address);
  if (not_an_address) SSL_set_tlsext_host_name(stream.native_handle(), host.c_str());  // SNI names hosts, not addresses
  stream.set_verify_callback(ssl::host_name_verification(host));
  p.step = "complete the TLS handshake";
  auto [hec] = co_await stream.async_handshake(ssl::stream_base::client, tuple_awaitable);
  if (hec) co_return void(p.failure = hec);
  co_await send_and_read(stream, req, parser, p);
}

/// A client context that verifies the listener's certificate: the system's CAs and `ca_file`.
std::optional<ssl::context> client_context(const admin_target& t) {
  std::optional<ssl::context> ctx(std::in_place, ssl::context::tls_client);
  ctx->set_verify_mode(ssl::verify_peer);
  ctx->set_default_verify_paths();
  if (!t.ca_file.empty()) {
    boost::system::error_code ec;
    ctx->load_verify_file(t.ca_file, ec);
    if (ec) throw cli_error(fmt::format("--admin-ca-file {}: cannot load it: {}", t.ca_file, ec.message()));
  }
  return ctx;
}

}  // namespace

std::string admin_get(const admin_target& t, const std::string& path, std::chrono::milliseconds timeout) {
  const std::string& base_url = t.base_url;
  auto u = boost::urls::parse_uri(base_url);
  const bool https = u && u->scheme() == "https";
  if (!u || (u->scheme() != "http" && !https) || u->host().empty())
    throw cli_error(fmt::format(
        "--admin-url must be http://HOST:PORT or https://HOST:PORT (the admin listener of walhook run): {}", base_url));
  const std::string host = u->host_address();  // without the brackets of an IPv6 literal
  const std::string port = u->has_port() ? std::string(u->port()) : https ? "443" : "80";
  std::string target(u->encoded_path());
  while (!target.empty() && target.back() == '/') target.pop_back();
  target += path;
  auto tls = https ? client_context(t) : std::nullopt;

  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, u->encoded_host_and_port());
  req.set(http::field::user_agent, "walhook-cli");
  if (!t.token.empty()) req.set(http::field::authorization, "Bearer " + t.token);
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  progress p;
  // On a local io_context, run to completion: tcp_stream's deadline applies to the connection;
  // the resolver has none of its own, so the run is bounded too.
  asio::io_context ioc(1);
  asio::co_spawn(ioc, exchange(host, port, tls ? &*tls : nullptr, timeout, req, parser, p),
                 [&p](const std::exception_ptr& e) {
                   if (e && !p.failure) p.failure = asio::error::fault;  // not reached: nothing in it throws
                   p.done = true;
                 });
  ioc.run_for(timeout + std::chrono::milliseconds{500});
  if (!p.done) p.failure = beast::error::timeout;
  if (p.failure)
    throw cli_error(fmt::format("--admin-url {}: cannot {}: {}", base_url, p.step,
                                p.failure == beast::error::timeout ? std::string("timed out") : p.failure.message()));
  auto& res = parser.get();
  if (res.result() != http::status::ok) {
    std::string body = res.body().substr(0, 200);
    for (auto& c : body)
      if (c == '\n' || c == '\r') c = ' ';
    throw cli_error(fmt::format("--admin-url {}: GET {} answered HTTP {}{}{}", base_url, target, res.result_int(),
                                body.empty() ? "" : ": ", body));
  }
  return std::move(res.body());
}

}  // namespace walhook::relay
