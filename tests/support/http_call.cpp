#include "tests/support/http_call.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

namespace walhook::test {

http_answer call(unsigned short port, const std::string& method, const std::string& target,
                 std::map<std::string, std::string> headers, const std::string& body, std::chrono::seconds deadline) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(deadline);
  boost::system::error_code ec;
  stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port), ec);
  if (ec) return {0, ec.message(), {}};
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  if (!headers.count("Host")) headers["Host"] = fmt::format("localhost:{}", port);
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req, ec);
  if (ec) return {0, ec.message(), {}};
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.skip(method == "HEAD");  // a HEAD answer has Content-Length but no body
  http::read(stream, buffer, parser, ec);
  if (ec) return {0, ec.message(), {}};
  http_answer a;
  a.status = parser.get().result_int();
  a.body = parser.get().body();
  for (const auto& f : parser.get()) a.headers[std::string(f.name_string())] = std::string(f.value());
  return a;
}

std::string raw_exchange(unsigned short port, const std::string& bytes) {
  namespace beast = boost::beast;
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(std::chrono::seconds{5});
  boost::system::error_code ec;
  stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port), ec);
  if (ec) return {};
  boost::asio::write(stream, boost::asio::buffer(bytes), ec);
  std::string out;
  char chunk[4096];
  for (;;) {
    auto n = stream.read_some(boost::asio::buffer(chunk), ec);
    out.append(chunk, n);
    if (ec) break;
  }
  return out;
}

unsigned raw_status(unsigned short port, const std::string& bytes) {
  const auto answer = raw_exchange(port, bytes);
  if (!answer.starts_with("HTTP/1.1 ") || answer.size() < 12) return 0;
  return static_cast<unsigned>(std::stoi(answer.substr(9, 3)));
}

}  // namespace walhook::test
