#include "relay/demo/receiver.hpp"

#include "common/task_group.hpp"
#include "common/time.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <cctype>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <tuple>
#include <utility>

namespace walhook::relay {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

std::string received_request::header(std::string_view name) const {
  auto lower = [](std::string_view v) {
    std::string out(v);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const auto wanted = lower(name);
  for (const auto& [k, v] : headers)
    if (lower(k) == wanted) return v;
  return "";
}
using tcp = asio::ip::tcp;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

struct receiver::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor ex, const std::string& address, unsigned short port)
      : executor(ex),
        acceptor(ex, tcp::endpoint(asio::ip::make_address(address), port)),
        rng(std::random_device{}()),
        tasks(ex) {}

  struct path_state {
    receiver_behaviour behaviour;
    std::size_t served = 0;
    unsigned marker_failures = 0;
    std::size_t in_flight = 0;
    std::size_t max_in_flight = 0;
    std::size_t count = 0;
  };

  asio::any_io_executor executor;
  tcp::acceptor acceptor;
  std::mt19937_64 rng;
  mutable std::mutex mutex;
  std::map<std::string, path_state> paths;
  std::vector<received_request> log;
  std::size_t total = 0;
  bool keep_bodies = true;
  bool stopped = false;
  std::function<void(const received_request&)> callback;
  std::list<std::weak_ptr<beast::tcp_stream>> connections;
  task_group tasks;  ///< the accept loop and every connection's session

  asio::awaitable<void> accept_loop() {
    auto self = shared_from_this();
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(tuple_awaitable);
      if (ec) {
        if (stopped || ec == asio::error::operation_aborted) co_return;
        continue;
      }
      socket.set_option(tcp::no_delay(true));
      auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
      {
        std::lock_guard lock(mutex);
        connections.remove_if([](auto& w) { return w.expired(); });
        connections.push_back(stream);
      }
      tasks.spawn(serve(stream), "receiver session");
    }
  }

  /// One connection: requests read, recorded and answered as their path's behaviour says, until
  /// the peer closes, a request is not answered, or one without keep-alive was.
  asio::awaitable<void> serve(std::shared_ptr<beast::tcp_stream> stream) {
    auto self = shared_from_this();
    beast::flat_buffer buffer;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(64 * 1024 * 1024);
      auto [ec, n] = co_await http::async_read(*stream, buffer, parser, tuple_awaitable);
      if (ec) co_return;
      auto req = parser.release();
      std::int64_t at = std::chrono::duration_cast<std::chrono::microseconds>(system_now().time_since_epoch()).count();
      received_request rec;
      rec.path = std::string(req.target());
      auto [b, status] = begin_request(rec.path, req.body(), rec);
      rec.received_at_us = at;
      rec.webhook_id = std::string(req["webhook-id"]);
      rec.webhook_timestamp = std::string(req["webhook-timestamp"]);
      rec.webhook_signature = std::string(req["webhook-signature"]);
      if (keep_bodies) {
        for (const auto& field : req) {  // the endpoint's own headers (migration 012), Host, …
          const auto name = std::string(field.name_string());
          if (!name.starts_with("webhook-") && !name.starts_with("Webhook-"))
            rec.headers.emplace_back(name, std::string(field.value()));
        }
      }
      if (!b.keys.empty())
        rec.signature_valid = delivery::verify(b.keys, rec.webhook_id, rec.webhook_timestamp, req.body(), rec.webhook_signature);
      bool keep_alive = req.keep_alive();
      if (keep_bodies) rec.body = std::move(req.body());
      std::optional<std::string> json;
      if (b.respond) std::tie(status, json) = b.respond(rec);
      const bool answered = co_await answer(*stream, buffer, req.version(), b, status, keep_alive, json);
      rec.status = answered ? status : 0;
      end_request(rec);
      if (!keep_alive || !answered) {
        beast::error_code ignored;
        stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
        co_return;
      }
    }
  }

  /// A request on `path` arrives: counted (rec.concurrent set), and answered with which status —
  /// the behaviour's script, its error rate, its fail marker in `body`. Returns the behaviour too.
  std::pair<receiver_behaviour, unsigned> begin_request(const std::string& path, const std::string& body,
                                                        received_request& rec) {
    std::lock_guard lock(mutex);
    auto& p = paths[path];
    receiver_behaviour b = p.behaviour;
    ++p.in_flight;
    ++p.count;
    ++total;
    p.max_in_flight = std::max(p.max_in_flight, p.in_flight);
    rec.concurrent = p.in_flight;
    std::size_t index = p.served++;
    unsigned status = index < b.script.size() ? b.script[index] : b.status;
    if (b.error_rate > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < b.error_rate) status = 500;
    if (!b.fail_marker.empty() && body.find(b.fail_marker) != std::string::npos && p.marker_failures < b.fail_times) {
      ++p.marker_failures;
      status = b.fail_status;
    }
    return {std::move(b), status};
  }

  /// Answers with `status` after the behaviour's delay — or never (until the peer closes or stop()
  /// closes the socket). Returns whether the answer was written; a failed write ends keep-alive.
  asio::awaitable<bool> answer(beast::tcp_stream& stream, beast::flat_buffer& buffer, unsigned version,
                               const receiver_behaviour& b, unsigned status, bool& keep_alive,
                               const std::optional<std::string>& json = std::nullopt) {
    if (b.never_answer) {
      // Wakes when the peer closes (read fails) or stop() closes the socket.
      auto [rec_ec, rn] = co_await stream.async_read_some(buffer.prepare(1), tuple_awaitable);
      (void)rec_ec;
      (void)rn;
      co_return false;
    }
    if (b.delay.count() > 0) {
      asio::steady_timer t(executor, b.delay);
      co_await t.async_wait(tuple_awaitable);
    }
    http::response<http::string_body> res{static_cast<http::status>(status), version};
    res.set(http::field::server, "walhook-receiver");
    res.set(http::field::content_type, "text/plain");
    if (status >= 300 && !b.retry_after.empty()) res.set(http::field::retry_after, b.retry_after);
    if (status >= 300 && status < 400 && !b.location.empty()) res.set(http::field::location, b.location);
    res.body() = status < 300 ? "ok" : "error";
    if (json) {
      res.set(http::field::content_type, "application/json");
      res.body() = *json;
    }
    res.keep_alive(keep_alive);
    res.prepare_payload();
    auto [wec, wn] = co_await http::async_write(stream, res, tuple_awaitable);
    if (wec) keep_alive = false;
    co_return !wec;
  }

  /// The request is done (answered or not): recorded, and the on_request callback called.
  void end_request(const received_request& rec) {
    std::function<void(const received_request&)> cb;
    {
      std::lock_guard lock(mutex);
      --paths[rec.path].in_flight;
      cb = callback;
      log.push_back(rec);
    }
    if (cb) cb(rec);
  }
};

receiver::receiver(asio::any_io_executor ex, const std::string& address, unsigned short port)
    : impl_(std::make_shared<impl>(ex, address, port)) {
  impl_->tasks.spawn(impl_->accept_loop(), "receiver accept");
}

receiver::~receiver() { stop(); }

unsigned short receiver::port() const { return impl_->acceptor.local_endpoint().port(); }

std::string receiver::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port()) + path;
}

void receiver::set_behaviour(const std::string& path, receiver_behaviour b) {
  std::lock_guard lock(impl_->mutex);
  impl_->paths[path].behaviour = std::move(b);
  impl_->paths[path].served = 0;
  impl_->paths[path].marker_failures = 0;
}

void receiver::on_request(std::function<void(const received_request&)> callback) {
  std::lock_guard lock(impl_->mutex);
  impl_->callback = std::move(callback);
}

void receiver::keep_bodies(bool keep) {
  std::lock_guard lock(impl_->mutex);
  impl_->keep_bodies = keep;
}

std::vector<received_request> receiver::requests() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->log;
}

std::size_t receiver::count(const std::string& path) const {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->paths.find(path);
  return it == impl_->paths.end() ? 0 : it->second.count;
}

std::size_t receiver::total() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->total;
}

std::size_t receiver::max_concurrent(const std::string& path) const {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->paths.find(path);
  return it == impl_->paths.end() ? 0 : it->second.max_in_flight;
}

void receiver::clear() {
  std::lock_guard lock(impl_->mutex);
  impl_->log.clear();
  impl_->total = 0;
  for (auto& [path, p] : impl_->paths) {
    p.count = 0;
    p.max_in_flight = p.in_flight;
  }
}

void receiver::stop() {
  // Runs on the receiver's executor so it never races its coroutines.
  auto self = impl_;
  asio::dispatch(self->executor, [self] {
    if (self->stopped) return;
    self->stopped = true;
    beast::error_code ignored;
    self->acceptor.close(ignored);
    std::lock_guard lock(self->mutex);
    for (auto& w : self->connections)
      if (auto s = w.lock()) s->socket().close(ignored);
    self->tasks.emit(asio::cancellation_type::terminal);
  });
}

}  // namespace walhook::relay
