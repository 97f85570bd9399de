#include "delivery/exchange.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <algorithm>
#include <optional>
#include <system_error>

namespace walhook::delivery {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

error_code err(transport_errc e) { return make_error_code(e); }

/// RFC 9110 §5.6.2 token.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  constexpr std::string_view extra = "!#$%&'*+-.^_`|~";
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           extra.find(c) != std::string_view::npos;
  });
}

bool has_line_break_or_nul(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

/// A read failure that is Beast's HTTP parser refusing the bytes (not a short read) is a
/// protocol_error.
error_code classify_read(bool stopped, const error_code& ec, const call_deadline& deadline) {
  const auto mapped = classify_io_error(stopped, ec, deadline, transport_errc::read_failed);
  if (mapped != transport_errc::read_failed) return mapped;
  const bool http_error = ec.category() == http::make_error_code(http::error::bad_version).category();
  if (http_error && ec != http::error::end_of_stream && ec != http::error::partial_message) {
    return err(transport_errc::protocol_error);
  }
  return mapped;
}

template <class Stream>
asio::awaitable<exchange_outcome> exchange_on(Stream& stream, connection& conn, const request_message& req,
                                              bool keep_body, call_deadline deadline, std::size_t body_cap,
                                              const bool& stopped) {
  exchange_outcome out;
  conn.tcp().expires_after(deadline.remaining());
  const auto [write_ec, written] = co_await http::async_write(stream, req, use_tuple);
  if (write_ec || stopped) {
    out.ec = classify_io_error(stopped, write_ec, deadline, transport_errc::write_failed);
    out.nothing_received = true;
    out.response.elapsed = deadline.elapsed();
    co_return out;
  }

  bool got_interim = false;
  std::optional<http::response_parser<http::string_body>> parser;
  for (;;) {
    // A fresh parser per message: 1xx responses are complete messages of their own (RFC 9110 §15.2).
    parser.emplace();
    // No parser body limit: Beast would fail the *header* of a large Content-Length with
    // body_limit. The size is judged below and a large body is never read.
    parser->body_limit(boost::none);
    const auto [read_ec, consumed] = co_await http::async_read_header(stream, conn.buffer, *parser, use_tuple);
    if (read_ec || stopped) {
      out.ec = classify_read(stopped, read_ec, deadline);
      out.nothing_received = !got_interim && !parser->got_some() && conn.buffer.size() == 0;
      co_return out;
    }
    const unsigned status = parser->get().result_int();
    if (status >= 100 && status < 200 && status != 101) {
      got_interim = true;
      if (deadline.passed()) {
        out.ec = err(transport_errc::timeout);
        co_return out;
      }
      continue;
    }
    break;
  }

  const auto& res = parser->get();
  out.response.status = res.result_int();
  out.response.elapsed = deadline.elapsed();
  if (const auto it = res.find(http::field::retry_after); it != res.end()) out.response.retry_after = it->value();
  if (out.response.status / 100 == 3) {
    if (const auto it = res.find(http::field::location); it != res.end()) out.response.location = it->value();
  }
  // 101 would switch protocols: whatever follows is not HTTP/1.1 any more.
  const bool keep_alive = res.keep_alive() && out.response.status != 101;
  if (keep_body && !parser->is_done()) {
    // Beast holds Content-Length to body_limit only while parsing the header (and reserves that
    // much for the body): a larger one is refused here, unread.
    if (parser->content_length() && *parser->content_length() > body_cap) {
      out.ec = err(transport_errc::protocol_error);
      co_return out;
    }
    parser->body_limit(body_cap);
    const auto [body_ec, body_bytes] = co_await http::async_read(stream, conn.buffer, *parser, use_tuple);
    if (body_ec || stopped) {
      out.ec = body_ec == http::error::body_limit ? err(transport_errc::protocol_error)
                                                  : classify_read(stopped, body_ec, deadline);
      co_return out;
    }
    out.response.body = parser->get().body();
    out.reusable = keep_alive && conn.buffer.size() == 0;
    co_return out;
  }
  if (parser->is_done()) {
    if (keep_body) out.response.body = parser->get().body();
    out.reusable = keep_alive;
  } else if (!parser->chunked() && parser->content_length() && *parser->content_length() <= body_cap) {
    // Read (and discard) a small body so the connection can carry the next request. A failure
    // here only costs the connection: the status already decided the attempt.
    const auto [body_ec, body_bytes] = co_await http::async_read(stream, conn.buffer, *parser, use_tuple);
    out.reusable = !body_ec && keep_alive && !stopped;
  }
  // Chunked, larger than body_cap, or delimited by EOF: judged by the status line, never read.
  if (conn.buffer.size() != 0) out.reusable = false;  // bytes nobody asked for
  co_return out;
}

}  // namespace

boost::system::result<request_message> build_request(std::string_view user_agent, const http_target& t,
                                                     const http_request& r) {
  if (t.host.empty() || !parse_port(t.port) || !is_valid_target(t.target)) return err(transport_errc::invalid_url);
  request_message req{http::verb::post, t.target, 11};
  req.set(http::field::host, host_header(t));
  req.set(http::field::user_agent, user_agent);
  req.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : r.headers) {
    if (!is_token(name) || has_line_break_or_nul(value)) {
      return error_code{std::make_error_code(std::errc::invalid_argument)};
    }
    switch (http::string_to_field(name)) {
      case http::field::host:
      case http::field::content_length:
      case http::field::transfer_encoding:
      case http::field::connection:
      case http::field::te:
      case http::field::upgrade:
      case http::field::expect:
        break;  // framing and connection management belong to the transport
      case http::field::user_agent:
      case http::field::content_type:
        req.set(name, value);
        break;
      default:
        req.insert(name, value);
    }
  }
  req.body() = r.body;
  req.prepare_payload();
  return req;
}

error_code classify_io_error(bool stopped, const error_code& ec, const call_deadline& deadline,
                             transport_errc otherwise) {
  if (stopped) return err(transport_errc::cancelled);
  if (ec == beast::error::timeout || deadline.passed()) return err(transport_errc::timeout);
  return err(otherwise);
}

asio::awaitable<exchange_outcome> exchange(connection& conn, const request_message& req, bool keep_body,
                                           call_deadline deadline, std::size_t body_cap, const bool& stopped) {
  if (conn.secure) co_return co_await exchange_on(*conn.secure, conn, req, keep_body, deadline, body_cap, stopped);
  co_return co_await exchange_on(*conn.plain, conn, req, keep_body, deadline, body_cap, stopped);
}

}  // namespace walhook::delivery
