#include "relay/cli/admin_client.hpp"

#include "relay/operations/blocking_db.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/url/parse.hpp>

#include <fmt/format.h>


namespace walhook::relay {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

std::string admin_get(const std::string& base_url, const std::string& path, const std::string& token,
                      std::chrono::milliseconds timeout) {
  auto u = boost::urls::parse_uri(base_url);
  if (!u || u->scheme() != "http" || u->host().empty())
    throw cli_error(fmt::format("--admin-url must be http://HOST:PORT (the admin listener of walhook run): {}", base_url));
  const std::string host = u->host_address();  // without the brackets of an IPv6 literal
  const std::string port = u->has_port() ? std::string(u->port()) : "80";
  std::string target(u->encoded_path());
  while (!target.empty() && target.back() == '/') target.pop_back();
  target += path;

  // Asynchronous operations on a local io_context, run to completion: the deadline of
  // tcp_stream only applies to those.
  asio::io_context ioc(1);
  asio::ip::tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  beast::flat_buffer buffer;
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, u->encoded_host_and_port());
  req.set(http::field::user_agent, "walhook-cli");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  boost::system::error_code failure;
  bool done = false;
  auto finish = [&](boost::system::error_code ec) {
    failure = ec;
    done = true;
  };
  const char* step = "resolve";
  stream.expires_after(timeout);
  resolver.async_resolve(host, port, [&](boost::system::error_code ec, asio::ip::tcp::resolver::results_type results) {
    if (ec) return finish(ec);
    step = "connect";
    stream.async_connect(results, [&](boost::system::error_code ec, const asio::ip::tcp::endpoint&) {
      if (ec) return finish(ec);
      step = "send the request";
      http::async_write(stream, req, [&](boost::system::error_code ec, std::size_t) {
        if (ec) return finish(ec);
        step = "read the answer";
        http::async_read(stream, buffer, parser, [&](boost::system::error_code ec, std::size_t) { finish(ec); });
      });
    });
  });
  // The resolver has no deadline of its own.
  ioc.run_for(timeout + std::chrono::milliseconds{500});
  if (!done) failure = beast::error::timeout;
  if (failure)
    throw cli_error(fmt::format("--admin-url {}: cannot {}: {}", base_url, step,
                                failure == beast::error::timeout ? std::string("timed out") : failure.message()));
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
