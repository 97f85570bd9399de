#include "relay/admin/server.hpp"

#include "common/log.hpp"
#include "common/task_group.hpp"
#include "relay/admin/console_assets.hpp"
#include "relay/admin/metrics_cache.hpp"
#include "relay/engine/engine.hpp"
#include "relay/operations/errors.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <algorithm>
#include <cstdint>
#include <list>
#include <optional>
#include <stdexcept>
#include <type_traits>

namespace walhook::relay {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

namespace {

/// accept(2) failed for want of a resource (descriptors, kernel memory): accepting again at
/// once fails again at once, so the loop waits before it does.
bool is_resource_exhaustion(const boost::system::error_code& ec) {
  return ec == asio::error::no_descriptors ||                              // EMFILE
         ec == boost::system::errc::too_many_files_open_in_system ||       // ENFILE
         ec == asio::error::no_buffer_space || ec == asio::error::no_memory;  // ENOBUFS, ENOMEM
}

/// The headers of every admin answer: the console may not be framed by another site
/// (clickjacking: two clicks in a hidden frame paused an endpoint), loads only its own files
/// (relay/admin/console/ has no inline script or style; the favicon is a data: URL), and no answer
/// is sniffed into another type or leaks its URL as a Referer.
void set_security_headers(http::response<http::string_body>& res) {
  res.set("Content-Security-Policy",
          "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
          "frame-ancestors 'none'");
  res.set("X-Frame-Options", "DENY");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
}

/// The most a request's line and header fields may hold: a tenant API cursor (two snapshots,
/// relay/tenant/router.hpp) beside 100 event types of 80 characters.
constexpr std::uint32_t header_limit = 16 * 1024;

/// The answer to a request Beast's parser refused, if it deserves one: 413 (body over the
/// limit), 431 (header over the limit), 400 (malformed). nullopt: the connection just ends
/// (timeout, the peer closed, a partial request).
std::optional<http::response<http::string_body>> refusal_of(const boost::system::error_code& ec) {
  http::status status;
  std::string text;
  if (ec == http::error::body_limit) {
    status = http::status::payload_too_large;
    text = "request body too large (at most 1 MiB)\n";
  } else if (ec == http::error::header_limit) {
    status = http::status::request_header_fields_too_large;
    text = "request header too large (at most 16 KiB, request line included)\n";
  } else if (ec.category() == make_error_code(http::error::bad_method).category() && ec != http::error::end_of_stream &&
             ec != http::error::partial_message && ec != http::error::need_more && ec != http::error::need_buffer) {
    status = http::status::bad_request;
    text = "malformed HTTP request: " + ec.message() + "\n";
  } else {
    return std::nullopt;
  }
  http::response<http::string_body> res{status, 11};
  res.set(http::field::server, "walhook");
  set_security_headers(res);
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.keep_alive(false);
  res.body() = std::move(text);
  res.prepare_payload();
  return res;
}

/// The request as the access rules (check_request) and the API see it.
api_request api_request_of(const http::request<http::string_body>& req, const std::string& remote) {
  api_request a;
  a.method = std::string(req.method_string());
  a.target = std::string(req.target().data(), req.target().size());
  a.host = std::string(req[http::field::host]);
  // Two Authorization fields name two callers: neither is taken (the request is unauthenticated).
  if (req.count(http::field::authorization) == 1) a.authorization = std::string(req[http::field::authorization]);
  a.content_type = std::string(req[http::field::content_type]);
  a.operator_name = std::string(req["X-Walhook-Operator"]);
  a.remote = remote;
  a.cookie = std::string(req[http::field::cookie]);
  a.csrf_token = std::string(req["X-CSRF-Token"]);
  a.body = req.body();
  return a;
}

/// An API answer (JSON, never cached) into `res`.
void set_api_answer(http::response<http::string_body>& res, api_response answer) {
  res.result(static_cast<http::status>(answer.status));
  res.set(http::field::content_type, answer.content_type);
  res.set(http::field::cache_control, "no-store");
  for (const auto& [name, value] : answer.headers) res.set(name, value);
  res.body() = std::move(answer.body);
}

using tls_stream = beast::ssl_stream<beast::tcp_stream>;

}  // namespace

struct admin_server::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor ex, engine& e, admin_access access, std::shared_ptr<http_site> s)
      : executor(ex),
        acceptor(ex),
        wake(ex),
        eng(e),
        tls(access.tls),
        api(ex, e, access),
        metrics(ex, [&e] { return e.metrics_text(); }),
        tasks(ex),
        site(std::move(s)) {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(access.bind_address, ec);  // resolved once, by check_admin_access
    if (ec) throw std::runtime_error("the admin address is not resolved: " + access.bind_address);
    const tcp::endpoint at{address, access.port};
    acceptor.open(at.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(at, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error(std::string(site ? "cannot listen on the API address: " : "cannot listen on the admin address: ") + ec.message());
    if (!access.loopback_only && !tls && site)
      log::warn("api.plain_http", {{"address", access.bind_address},
                                   {"hint", "tenants' tokens and data cross the network in the clear: give "
                                            "--api-tls-cert and --api-tls-key, or put a TLS proxy in front"}});
    else if (!access.loopback_only && !tls)
      log::warn("admin.plain_http", {{"address", access.bind_address},
                                     {"hint", "the bearer token and the API's answers cross the network in the clear: "
                                              "give --admin-tls-cert and --admin-tls-key, or listen on loopback"}});
  }
  asio::any_io_executor executor;
  tcp::acceptor acceptor;
  /// The accept loop waits on it: for a session to end (at the cap), or out its backoff.
  asio::steady_timer wake;
  engine& eng;
  std::shared_ptr<asio::ssl::context> tls;  ///< --admin-tls-cert/--admin-tls-key; null: plain HTTP
  admin_api api;
  metrics_cache metrics;  ///< /metrics, computed at most once a second
  task_group tasks;  ///< the accept loop and every connection's session
  std::shared_ptr<http_site> site;  ///< serves every request if set (the tenant API)
  std::size_t sessions = 0;  ///< admin connections open now, ≤ max_admin_connections
  /// Each session's connection and whether it waits idle for a request (and since when).
  struct session_state {
    beast::tcp_stream* stream = nullptr;
    bool idle = true;
    std::chrono::steady_clock::time_point idle_since{};
  };
  std::list<session_state> registry;

  /// At the cap: closes the connection idle longest (for admin_idle_evict_after at least, so a
  /// fresh connection gets to send its request); false if none is.
  bool evict_idle() {
    const auto now = std::chrono::steady_clock::now();
    session_state* oldest = nullptr;
    for (auto& s : registry)
      if (s.idle && s.stream && now - s.idle_since >= admin_idle_evict_after &&
          (!oldest || s.idle_since < oldest->idle_since))
        oldest = &s;
    if (!oldest) return false;
    boost::system::error_code ignored;
    oldest->stream->socket().close(ignored);
    oldest->stream = nullptr;  // its session ends on its own; never closed twice
    return true;
  }

  /// Ends the accept loop's wait early (a session ended, or stop()).
  void notify() { wake.cancel(); }

  asio::awaitable<void> accept_loop() {
    auto self = shared_from_this();
    std::chrono::milliseconds backoff{0};
    for (;;) {
      if (sessions >= max_admin_connections) {
        // At the cap: the longest-idle connection makes room (its session ends at once); if all
        // are busy, stop accepting until one ends. Further connections wait in the kernel's
        // backlog and hold none of walhook's descriptors meanwhile.
        // A session may become evictable while we wait: look again every admin_idle_evict_after.
        evict_idle();
        wake.expires_after(admin_idle_evict_after);
        co_await wake.async_wait(tuple_awaitable);
        if (!acceptor.is_open()) co_return;
        continue;
      }
      auto [ec, socket] = co_await acceptor.async_accept(tuple_awaitable);
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec == asio::error::connection_aborted) continue;  // that client is gone; the next one is not
      if (ec) {
        // EMFILE and friends: the pending connection stays queued and accept(2) would fail again
        // at once (it spun at ~70 % CPU). Wait 100 ms, doubling up to 1 s while it lasts.
        backoff = std::clamp(backoff * 2, accept_backoff_min, accept_backoff_max);
        if (backoff == accept_backoff_min || !is_resource_exhaustion(ec)) {
          log::warn("admin.accept_failed", {{"error", ec.message()},
                                            {"retry_ms", static_cast<std::int64_t>(backoff.count())},
                                            {"sessions", static_cast<std::uint64_t>(sessions)}});
        }
        wake.expires_after(backoff);
        co_await wake.async_wait(tuple_awaitable);
        if (!acceptor.is_open()) co_return;
        continue;
      }
      backoff = std::chrono::milliseconds{0};
      ++sessions;
      tasks.spawn(serve(std::move(socket)), "admin session");
    }
  }

  /// One connection: plain HTTP, or HTTPS with --admin-tls-cert.
  asio::awaitable<void> serve(tcp::socket socket) {
    auto self = shared_from_this();
    // However the session ends (the peer, its deadline, or cancellation), its slot is free.
    struct release_slot {
      impl& server;
      ~release_slot() {
        --server.sessions;
        server.notify();
      }
    } slot{*this};
    boost::system::error_code ec;
    const auto peer = socket.remote_endpoint(ec);
    const std::string remote = ec ? std::string("-") : peer.address().to_string();
    if (tls) {
      tls_stream stream(beast::tcp_stream(std::move(socket)), *tls);
      co_await serve_on(stream, remote);
    } else {
      beast::tcp_stream stream(std::move(socket));
      co_await serve_on(stream, remote);
    }
  }

  /// The requests of one connection, in turn, until it closes or its deadline passes.
  template <class Stream>
  asio::awaitable<void> serve_on(Stream& stream, const std::string& remote) {
    auto& tcp_layer = beast::get_lowest_layer(stream);
    registry.push_back({&tcp_layer, true, std::chrono::steady_clock::now()});
    auto me = std::prev(registry.end());
    struct unregister {
      std::list<session_state>& registry;
      std::list<session_state>::iterator me;
      ~unregister() { registry.erase(me); }
    } forget{registry, me};
    if constexpr (std::is_same_v<Stream, tls_stream>) {
      // The handshake within the read deadline, idle meanwhile (it may be closed to make room).
      tcp_layer.expires_after(admin_read_deadline);
      auto [hec] = co_await stream.async_handshake(asio::ssl::stream_base::server, tuple_awaitable);
      if (hec || !me->stream) co_return;  // plain HTTP on the TLS port, a refused certificate, a timeout
    }
    beast::flat_buffer buffer;
    for (;;) {
      // The whole request (and the idle wait before it) within the read deadline: a client
      // that sends nothing, or drips, holds its slot this long at most. While no byte of the
      // next request has come, the connection is idle and may be closed to make room.
      tcp_layer.expires_after(admin_read_deadline);
      if (buffer.size() == 0) {
        me->idle = true;
        me->idle_since = std::chrono::steady_clock::now();
        auto [rec, rn] = co_await stream.async_read_some(buffer.prepare(4096), tuple_awaitable);
        if (rec || !me->stream) co_return;
        buffer.commit(rn);
      }
      me->idle = false;
      http::request_parser<http::string_body> parser;  // Beast's limit of the body: 1 MiB
      parser.header_limit(header_limit);
      auto [ec, n] = co_await http::async_read(stream, buffer, parser, tuple_awaitable);
      if (ec) {
        co_await refuse(stream, buffer, ec);
        co_return;
      }
      auto& req = parser.get();
      http::response<http::string_body> res{http::status::ok, req.version()};
      res.set(http::field::server, "walhook");
      set_security_headers(res);
      co_await respond(req, res, remote);
      // HEAD: the GET's headers (its Content-Length included), no body.
      const bool head = req.method() == http::verb::head;
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      if (head) {
        const auto length = res.body().size();
        res.body().clear();
        res.content_length(length);
      }
      tcp_layer.expires_after(admin_read_deadline);
      auto [wec, wn] = co_await http::async_write(stream, res, tuple_awaitable);
      if (wec || !req.keep_alive()) co_return;
    }
  }

  /// A request Beast refused: say why before closing, rather than a bare reset. A timeout, the
  /// peer's close or a partial request get nothing (nobody reads the answer).
  template <class Stream>
  asio::awaitable<void> refuse(Stream& stream, beast::flat_buffer& buffer, const boost::system::error_code& ec) {
    auto refused = refusal_of(ec);
    if (!refused) co_return;
    auto& tcp_layer = beast::get_lowest_layer(stream);
    tcp_layer.expires_after(admin_read_deadline);
    co_await http::async_write(stream, *refused, tuple_awaitable);
    boost::system::error_code ignored;
    tcp_layer.socket().shutdown(tcp::socket::shutdown_send, ignored);
    // Closing with unread bytes (the rest of a large body) would reset the connection and
    // could discard the answer before the client reads it: drain a bounded while first.
    tcp_layer.expires_after(2s);
    std::size_t drained = 0;
    while (drained < 8 * 1024 * 1024) {
      buffer.clear();
      auto [dec, dn] = co_await stream.async_read_some(buffer.prepare(65536), tuple_awaitable);
      if (dec) break;
      drained += dn;
    }
  }

  /// The answer to one request, body included (a HEAD's is dropped by the caller).
  asio::awaitable<void> respond(const http::request<http::string_body>& req, http::response<http::string_body>& res,
                                const std::string& remote) {
    std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    const bool get = req.method() == http::verb::get || req.method() == http::verb::head;
    if (site) {
      if (path == "/healthz") {
        res.set(http::field::content_type, "text/plain; charset=utf-8");
        res.body() = "ok\n";
        co_return;
      }
      const auto a = api_request_of(req, remote);
      set_api_answer(res, co_await site->handle(a));
      co_return;
    }
    if (path.starts_with("/api/") || path == "/api") {
      const auto a = api_request_of(req, remote);
      set_api_answer(res, co_await api.handle(a));
      co_return;
    }
    // Non-API answers are text unless a route says otherwise (a console file, /metrics).
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    if (!get) {
      res.result(http::status::method_not_allowed);
      res.set(http::field::allow, "GET, HEAD");
      res.body() = "GET or HEAD only\n";
    } else if (path == "/" || path == "/console") {
      res.result(http::status::found);
      res.set(http::field::location, "/console/");
      res.body() = "the console is at /console/\n";
    } else if (path.starts_with("/console/")) {
      if (auto asset = find_console_asset(path.substr(std::string_view("/console").size()))) {
        res.set(http::field::content_type, asset->content_type);
        res.set(http::field::cache_control, "no-cache");
        res.body() = std::string(asset->body);
      } else {
        res.result(http::status::not_found);
        res.body() = "no such console page\n";
      }
    } else if (path == "/metrics") {
      // The API's access rules: the bearer token if there is one, else a loopback Host.
      const auto a = api_request_of(req, remote);
      if (auto denied = co_await api.admit(a)) {
        set_api_answer(res, std::move(*denied));
      } else {
        res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        res.body() = co_await metrics.text();
      }
    } else if (path == "/healthz") {
      res.body() = "ok\n";
    } else if (path == "/readyz") {
      bool ready = eng.streaming();
      res.result(ready ? http::status::ok : http::status::service_unavailable);
      res.body() = ready ? "streaming\n" : "not streaming (standby or reconnecting)\n";
      if (auto wal = eng.slot_at_risk())
        res.body() += "slot at risk: wal_status " + *wal + " (it keeps more WAL than PostgreSQL guarantees)\n";
      if (auto holder = eng.leader_lock_foreign())
        res.body() += "leadership lock held by a session that is not walhook's: " + *holder + "\n";
    } else {
      res.result(http::status::not_found);
      res.body() = "try /console/, /api/overview, /metrics, /healthz or /readyz\n";
    }
  }
};

admin_server::admin_server(asio::any_io_executor ex, engine& e, const admin_access& access,
                           std::shared_ptr<http_site> site)
    : impl_(std::make_shared<impl>(ex, e, access, std::move(site))) {
  impl_->tasks.spawn(impl_->accept_loop(), "admin accept");
}

admin_server::~admin_server() { stop(); }

unsigned short admin_server::port() const { return impl_->acceptor.local_endpoint().port(); }

void admin_server::stop() {
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
  impl_->notify();
  impl_->tasks.emit(asio::cancellation_type::terminal);  // sessions end with their connection
  impl_->metrics.stop();
  impl_->api.stop();
  if (impl_->site) impl_->site->stop();
}

}  // namespace walhook::relay
