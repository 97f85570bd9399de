#include "bench/naive_receiver.hpp"

#include "bench/proc_stats.hpp"
#include "delivery/signing.hpp"
#include "relay/operations/blocking_db.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <libpq-fe.h>

#include <charconv>
#include <cstdlib>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace walhook::bench {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
constexpr std::int64_t tolerance_s = 300;
constexpr const char* insert_sql =
    "INSERT INTO bench_naive.inbox (event_id, body) VALUES ($1, $2::jsonb) ON CONFLICT (event_id) DO NOTHING RETURNING 1";

/// A request handed to a worker; the Beast thread waits on `timer` until the worker posts back.
struct pending {
  explicit pending(asio::io_context& io) : timer(io) { timer.expires_at(asio::steady_timer::time_point::max()); }
  asio::steady_timer timer;
  http::status status = http::status::internal_server_error;
  std::string answer;
};

std::string_view field_of(const http::request<http::string_body>& req, std::string_view name) {
  auto it = req.find(name);
  return it == req.end() ? std::string_view{} : std::string_view(it->value().data(), it->value().size());
}

}  // namespace

struct naive_receiver::impl {
  explicit impl(naive_options opts) : o(std::move(opts)), acceptor(io) {}

  naive_options o;
  std::vector<delivery::signing_key> keys;
  asio::io_context io{1};
  tcp::acceptor acceptor;
  std::thread io_thread;
  std::vector<std::thread> workers;
  std::vector<PGconn*> conns;
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void(PGconn*)>> jobs;
  bool stopping = false, stopped = false;
  unsigned short port = 0;
  std::atomic<std::int64_t> processed{0};

  void work(PGconn* conn) {
    for (;;) {
      std::function<void(PGconn*)> job;
      {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return stopping || !jobs.empty(); });
        if (stopping) return;
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      job(conn);
    }
  }

  void submit(std::function<void(PGconn*)> job) {
    {
      std::lock_guard lock(m);
      jobs.push_back(std::move(job));
    }
    cv.notify_one();
  }

  /// On a worker: verify, insert in its own transaction, process a new event, then answer.
  void handle(PGconn* conn, const http::request<http::string_body>& req, pending& p) {
    const std::string id(field_of(req, "webhook-id"));
    const auto ts = field_of(req, "webhook-timestamp");
    std::int64_t sent = 0;
    const auto now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    const bool fresh_ts = std::from_chars(ts.data(), ts.data() + ts.size(), sent).ec == std::errc{} &&
                          std::abs(now - sent) <= tolerance_s;
    if (id.empty() || !fresh_ts || !delivery::verify(keys, id, ts, req.body(), field_of(req, "webhook-signature"))) {
      p.status = http::status::unauthorized;
      p.answer = R"({"status":"bad_signature"})";
      return;
    }
    const char* values[] = {id.c_str(), req.body().c_str()};
    PGresult* r = PQexecParams(conn, insert_sql, 2, nullptr, values, nullptr, nullptr, 0);
    const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    const bool fresh = ok && PQntuples(r) == 1;
    if (!ok) p.answer = fmt::format(R"({{"status":"error","detail":"{}"}})", relay::one_line(PQerrorMessage(conn)));
    PQclear(r);
    if (!ok) {
      if (PQstatus(conn) != CONNECTION_OK) PQreset(conn);
      return;
    }
    if (fresh) {
      std::this_thread::sleep_for(o.handler);  // the handler's work, inside the request
      ++processed;
    }
    p.status = http::status::ok;
    p.answer = fresh ? R"({"status":"accepted"})" : R"({"status":"duplicate"})";
  }

  asio::awaitable<void> session(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    for (;;) {
      auto req = std::make_shared<http::request<http::string_body>>();
      stream.expires_after(std::chrono::seconds(60));
      auto [ec, n] = co_await http::async_read(stream, buffer, *req, tuple_awaitable);
      if (ec) co_return;
      auto p = std::make_shared<pending>(io);
      submit([this, req, p](PGconn* conn) {
        handle(conn, *req, *p);
        asio::post(io, [p] { p->timer.cancel(); });
      });
      co_await p->timer.async_wait(tuple_awaitable);
      http::response<http::string_body> res{p->status, req->version()};
      res.set(http::field::content_type, "application/json");
      res.body() = std::move(p->answer);
      res.keep_alive(req->keep_alive());
      res.prepare_payload();
      auto [wec, wn] = co_await http::async_write(stream, res, tuple_awaitable);
      if (wec || !res.keep_alive()) co_return;
    }
  }

  // Sessions belong to the io_context: stop() stops it and the destructor destroys their frames.
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(tuple_awaitable);
      if (!acceptor.is_open()) co_return;
      if (ec) continue;
      socket.set_option(tcp::no_delay(true));
      asio::co_spawn(io, session(std::move(socket)), [](std::exception_ptr) {});
    }
  }
};

naive_receiver::naive_receiver(naive_options options) : impl_(std::make_unique<impl>(std::move(options))) {
  auto& s = *impl_;
  auto keys = delivery::parse_secrets(s.o.secret);
  if (!keys) throw std::runtime_error("naive receiver: the secret is not a whsec_ secret");
  s.keys = *keys;
  {
    relay::blocking_db db(s.o.conninfo, "walhook-bench");
    db.exec("CREATE SCHEMA IF NOT EXISTS bench_naive");
    db.exec("CREATE TABLE IF NOT EXISTS bench_naive.inbox (event_id text PRIMARY KEY, body jsonb NOT NULL, "
            "received_at timestamptz NOT NULL DEFAULT now())");
  }
  for (int i = 0; i < std::max(1, s.o.workers); ++i) {
    PGconn* c = PQconnectdb((s.o.conninfo + " application_name='walhook-bench-naive'").c_str());
    if (PQstatus(c) != CONNECTION_OK) {
      const std::string why = relay::one_line(PQerrorMessage(c));
      PQfinish(c);
      for (auto* x : s.conns) PQfinish(x);
      s.conns.clear();
      throw std::runtime_error("naive receiver: cannot connect: " + why);
    }
    s.conns.push_back(c);
  }
  const tcp::endpoint at(asio::ip::make_address_v4("127.0.0.1"), 0);
  s.acceptor.open(at.protocol());
  s.acceptor.bind(at);
  s.acceptor.listen(asio::socket_base::max_listen_connections);
  s.port = s.acceptor.local_endpoint().port();
  asio::co_spawn(s.io, s.accept_loop(), [](std::exception_ptr) {});
  s.io_thread = std::thread([&s] { s.io.run(); });
  for (auto* c : s.conns) s.workers.emplace_back([&s, c] { s.work(c); });
}

naive_receiver::~naive_receiver() { stop(); }

unsigned short naive_receiver::port() const { return impl_->port; }

double naive_receiver::cpu_seconds() const {
  if (impl_->stopped) return 0;
  double s = thread_cpu_seconds(impl_->io_thread.native_handle());
  for (auto& w : impl_->workers) s += thread_cpu_seconds(w.native_handle());
  return s;
}

std::int64_t naive_receiver::processed() const { return impl_->processed.load(); }

void naive_receiver::stop() {
  auto& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  asio::post(s.io, [&s] {
    boost::system::error_code ignored;
    s.acceptor.close(ignored);
  });
  {
    std::lock_guard lock(s.m);
    s.stopping = true;
  }
  s.cv.notify_all();
  for (auto& w : s.workers) w.join();
  s.io.stop();
  s.io_thread.join();
  for (auto* c : s.conns) PQfinish(c);
  s.conns.clear();
}

}  // namespace walhook::bench
