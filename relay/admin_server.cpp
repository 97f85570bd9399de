#include "relay/admin_server.hpp"

#include "common/task_group.hpp"
#include "relay/engine.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <stdexcept>

namespace walhook::relay {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

namespace {

tcp::endpoint parse_listen(const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("--admin-listen must be HOST:PORT, got " + listen);
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned long port = 0;
  try {
    port = std::stoul(listen.substr(colon + 1));
  } catch (const std::exception&) {
    throw std::runtime_error("--admin-listen has no valid port: " + listen);
  }
  if (port > 65535) throw std::runtime_error("--admin-listen port out of range: " + listen);
  boost::system::error_code ec;
  auto address = host.empty() ? asio::ip::address(asio::ip::address_v6::any()) : asio::ip::make_address(host, ec);
  if (ec) throw std::runtime_error("--admin-listen has an invalid address: " + host);
  return {address, static_cast<unsigned short>(port)};
}

}  // namespace

struct admin_server::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor ex, const tcp::endpoint& at, engine& e) : executor(ex), acceptor(ex), eng(e), tasks(ex) {
    boost::system::error_code ec;
    acceptor.open(at.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(at, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error("cannot listen on the admin address: " + ec.message());
  }
  asio::any_io_executor executor;
  tcp::acceptor acceptor;
  engine& eng;
  task_group tasks;  ///< the accept loop and every connection's session

  asio::awaitable<void> accept_loop() {
    auto self = shared_from_this();
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(tuple_awaitable);
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
        continue;
      }
      tasks.spawn(serve(beast::tcp_stream(std::move(socket))), "admin session");
    }
  }

  asio::awaitable<void> serve(beast::tcp_stream stream) {
    auto self = shared_from_this();
    beast::flat_buffer buffer;
    for (;;) {
      stream.expires_after(30s);
      http::request<http::string_body> req;
      auto [ec, n] = co_await http::async_read(stream, buffer, req, tuple_awaitable);
      if (ec) co_return;
      http::response<http::string_body> res{http::status::ok, req.version()};
      res.set(http::field::server, "walhook");
      std::string_view target(req.target().data(), req.target().size());
      if (req.method() != http::verb::get) {
        res.result(http::status::method_not_allowed);
        res.body() = "GET only\n";
      } else if (target == "/metrics") {
        res.set(http::field::content_type, "text/plain; version=0.0.4");
        res.body() = co_await eng.metrics_text();
      } else if (target == "/healthz") {
        res.body() = "ok\n";
      } else if (target == "/readyz") {
        bool ready = eng.streaming();
        res.result(ready ? http::status::ok : http::status::service_unavailable);
        res.body() = ready ? "streaming\n" : "not streaming (standby or reconnecting)\n";
      } else {
        res.result(http::status::not_found);
        res.body() = "try /metrics, /healthz or /readyz\n";
      }
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      stream.expires_after(30s);
      auto [wec, wn] = co_await http::async_write(stream, res, tuple_awaitable);
      if (wec || !req.keep_alive()) co_return;
    }
  }
};

admin_server::admin_server(asio::any_io_executor ex, const std::string& listen, engine& e)
    : impl_(std::make_shared<impl>(ex, parse_listen(listen), e)) {
  impl_->tasks.spawn(impl_->accept_loop(), "admin accept");
}

admin_server::~admin_server() { stop(); }

unsigned short admin_server::port() const { return impl_->acceptor.local_endpoint().port(); }

void admin_server::stop() {
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
  impl_->tasks.emit(asio::cancellation_type::terminal);  // sessions end with their connection
}

}  // namespace walhook::relay
