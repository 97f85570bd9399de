#include "relay/inbox/ingest_server.hpp"

#include "common/log.hpp"
#include "common/pg_connection.hpp"
#include "common/task_group.hpp"
#include "relay/inbox/ingest_metrics.hpp"
#include "relay/inbox/schemes.hpp"
#include "relay/inbox/sources.hpp"
#include "sql/session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace walhook::relay::inbox {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
using tls_stream = beast::ssl_stream<beast::tcp_stream>;
using response = http::response<http::string_body>;

namespace {

/// The largest body any source may set (walhook.inbox_sources.max_body_bytes ≤ 16 MiB).
constexpr std::size_t body_ceiling = 16 * 1024 * 1024;

tcp::acceptor listen_on(asio::any_io_executor ex, const std::string& address, unsigned short port, std::string_view what) {
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(address, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: '{}' is not a numeric IP address", what, address));
  tcp::acceptor acceptor(ex);
  const tcp::endpoint at{ip, port};
  acceptor.open(at.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(at, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot listen on {} {}:{}: {}", what, address, port, ec.message()));
  return acceptor;
}

std::shared_ptr<asio::ssl::context> tls_context(const ingest_options& o) {
  if (o.tls_cert_file.empty() && o.tls_key_file.empty()) return nullptr;
  if (o.tls_cert_file.empty() || o.tls_key_file.empty()) throw std::runtime_error("give both --tls-cert and --tls-key");
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(o.tls_cert_file, ec);
  if (ec) throw std::runtime_error(fmt::format("--tls-cert {}: {}", o.tls_cert_file, ec.message()));
  ctx->use_private_key_file(o.tls_key_file, asio::ssl::context::pem, ec);
  if (ec) throw std::runtime_error(fmt::format("--tls-key {}: {}", o.tls_key_file, ec.message()));
  return ctx;
}

/// Escapes a JSON string's content.
std::string json_escaped(std::string_view text) {
  std::string out;
  log::append_json_escaped(out, text);
  return out;
}

/// The headers kept with an inbox row: the ones a handler or an investigation may need; never
/// the signature (useless once verified).
std::string kept_headers(const std::vector<header_field>& headers) {
  static constexpr std::string_view kept[] = {"content-type", "user-agent", "webhook-id", "webhook-timestamp",
                                              "x-github-delivery", "x-github-event", "x-request-id"};
  std::string out = "{";
  for (const auto& h : headers) {
    std::string lower(h.name);
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (std::find(std::begin(kept), std::end(kept), lower) == std::end(kept)) continue;
    if (out.size() > 1) out += ',';
    out += fmt::format("\"{}\":\"{}\"", json_escaped(lower), json_escaped(h.value.substr(0, 512)));
  }
  return out + "}";
}

}  // namespace

/// The commit sessions use the server's database unless told otherwise.
ingest_options with_database(ingest_options o) {
  if (o.commit.database_url.empty()) o.commit.database_url = o.database_url;
  return o;
}

struct ingest_server::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor e, ingest_options o)
      : ex(e),
        options(with_database(std::move(o))),
        tls(tls_context(options)),
        acceptor(listen_on(e, options.listen_address, options.listen_port, "--listen")),
        committer(e, options.commit),
        tasks(e),
        wake(e),
        sources_conn(e),
        loaded(e) {
    if (options.metrics_address)
      metrics_acceptor.emplace(listen_on(e, *options.metrics_address, options.metrics_port, "--metrics-listen"));
  }

  asio::any_io_executor ex;
  ingest_options options;
  std::shared_ptr<asio::ssl::context> tls;
  tcp::acceptor acceptor;
  std::optional<tcp::acceptor> metrics_acceptor;
  group_committer committer;
  task_group tasks;
  asio::steady_timer wake;  ///< the accept loop waits on it at the connection cap
  std::chrono::steady_clock::time_point last_refusal_log{};
  std::size_t connections = 0;
  /// Connections open per client address (the metrics listener's are not counted).
  std::unordered_map<asio::ip::address, std::size_t> per_client;
  bool stopped = false;
  bool draining = false;                   ///< drain(): answer what is under way, take nothing new
  std::set<beast::tcp_stream*> idle;       ///< connections waiting for a request's first bytes

  // Sources, as last read.
  std::unordered_map<std::string, std::shared_ptr<const source_config>> sources;
  pg::connection sources_conn;
  std::chrono::steady_clock::time_point last_load{};
  bool loading = false;
  asio::steady_timer loaded;  ///< requests waiting for a load in progress wait on it
  bool sources_ok = false;

  // Counters for /metrics: (source, outcome) → requests.
  request_counts requests;

  void count(const std::string& source, std::string_view outcome) { ++requests[{source, std::string(outcome)}]; }

  /// Reads walhook.inbox_sources again (one load at a time; others wait for it).
  asio::awaitable<void> load_sources() {
    if (loading) {
      co_await loaded.async_wait(tuple_awaitable);
      co_return;
    }
    loading = true;
    loaded.expires_at(std::chrono::steady_clock::time_point::max());
    last_load = std::chrono::steady_clock::now();
    if (!sources_conn.is_open()) (void)co_await sql::open_session(sources_conn, options.database_url, "walhook-ingest", 10s);
    pg::result<pg::query_result> rows = pg::make_error_code(pg::errc::not_connected);
    if (sources_conn.is_open()) rows = co_await sources_conn.async_exec(sources_query, {}, 10s);  // (no co_await in ?: with GCC 12)
    if (rows) {
      std::unordered_map<std::string, std::shared_ptr<const source_config>> fresh;
      for (int i = 0; i < rows->rows(); ++i) {
        auto s = source_of_row(*rows, i);
        if (s) {
          std::string name = s->name;  // before *s is moved from
          fresh.emplace(std::move(name), std::make_shared<const source_config>(std::move(*s)));
        } else {
          log::warn("inbox.source_invalid", {{"error", s.error()}});
        }
      }
      if (fresh.size() != sources.size() || !sources_ok)
        log::info("inbox.sources_loaded", {{"sources", static_cast<std::uint64_t>(fresh.size())}});
      sources = std::move(fresh);
      sources_ok = true;
    } else {
      sources_ok = false;
      log::warn("inbox.sources_unavailable", {{"error", sources_conn.last_error()}});
      if (rows.error() != pg::errc::query_failed) sources_conn.close();
    }
    loading = false;
    loaded.cancel();
  }

  asio::awaitable<void> refresh_loop() {
    auto self = shared_from_this();
    co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
    asio::steady_timer t(ex);
    while (!stopped) {
      co_await load_sources();
      t.expires_after(options.sources_refresh);
      auto [ec] = co_await t.async_wait(tuple_awaitable);
      if (ec && stopped) break;
    }
  }

  /// The source named `name`; an unknown name reloads the table first (at most once a second:
  /// a stranger's made-up names cannot turn into a query each).
  asio::awaitable<std::shared_ptr<const source_config>> find_source(const std::string& name) {
    if (auto it = sources.find(name); it != sources.end()) co_return it->second;
    if (loading || std::chrono::steady_clock::now() - last_load >= 1s) co_await load_sources();  // joins one under way
    auto it = sources.find(name);
    co_return it == sources.end() ? nullptr : it->second;
  }

  asio::awaitable<void> accept_loop(tcp::acceptor& from, bool metrics_only) {
    auto self = shared_from_this();
    for (;;) {
      if (connections >= options.max_connections) {
        wake.expires_after(100ms);
        co_await wake.async_wait(tuple_awaitable);
        if (!from.is_open()) co_return;
        continue;
      }
      auto [ec, socket] = co_await from.async_accept(tuple_awaitable);
      if (!from.is_open()) co_return;
      if (ec) {
        wake.expires_after(100ms);  // EMFILE and the like: accept(2) would fail again at once
        co_await wake.async_wait(tuple_awaitable);
        continue;
      }
      // One client (one address) cannot take every connection: past its share it is closed at
      // once, before anything is read (a sender behind a NAT retries; nothing was written).
      boost::system::error_code rec;
      const auto client = socket.remote_endpoint(rec).address();
      if (rec) continue;
      if (!metrics_only && per_client[client] >= options.max_connections_per_client) {
        count("", "too_many_connections");
        log_refused_client(client);
        continue;  // the socket closes here
      }
      ++connections;
      if (!metrics_only) ++per_client[client];  // here, where it is checked: serve() releases it
      tasks.spawn(serve(std::move(socket), metrics_only, client), "ingest connection");
    }
  }

  /// Logs a client refused at its connection cap, at most once a minute (it may try many times).
  void log_refused_client(const asio::ip::address& client) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_refusal_log < 60s) return;
    last_refusal_log = now;
    log::warn("ingest.client_connection_cap", {{"client", client.to_string()},
                                               {"max_connections_per_client", options.max_connections_per_client}});
  }

  asio::awaitable<void> serve(tcp::socket socket, bool metrics_only, asio::ip::address client) {
    auto self = shared_from_this();
    struct release {
      impl& server;
      bool counted;
      asio::ip::address client;
      ~release() {
        --server.connections;
        if (counted && --server.per_client[client] == 0) server.per_client.erase(client);
        server.wake.cancel();
      }
    } slot{*this, !metrics_only, client};
    if (tls && !metrics_only) {
      tls_stream stream(beast::tcp_stream(std::move(socket)), *tls);
      beast::get_lowest_layer(stream).expires_after(options.read_deadline);
      auto [hec] = co_await stream.async_handshake(asio::ssl::stream_base::server, tuple_awaitable);
      if (hec) co_return;
      co_await serve_on(stream, metrics_only);
    } else {
      beast::tcp_stream stream(std::move(socket));
      co_await serve_on(stream, metrics_only);
    }
  }

  template <class Stream>
  asio::awaitable<void> serve_on(Stream& stream, bool metrics_only) {
    beast::flat_buffer buffer;
    auto& tcp_layer = beast::get_lowest_layer(stream);
    for (;;) {
      if (draining) co_return;
      tcp_layer.expires_after(options.read_deadline);
      http::request_parser<http::string_body> parser;
      parser.header_limit(16 * 1024);
      parser.body_limit(body_ceiling);
      // Waiting for a request: drain() may close it (nothing is lost: no request has begun).
      idle.insert(&tcp_layer);
      auto [hec, hn] = co_await http::async_read_header(stream, buffer, parser, tuple_awaitable);
      idle.erase(&tcp_layer);
      if (hec) {
        // A header too large or not HTTP: answered, then closed (nothing after it can be framed).
        if (const auto status = malformed_status(hec)) co_await refuse_malformed(stream, *status, hec.message());
        co_return;
      }
      response res{http::status::ok, parser.get().version()};
      res.set(http::field::server, "walhook");
      res.set(http::field::content_type, "application/json");
      res.set(http::field::cache_control, "no-store");
      bool keep = co_await handle(stream, buffer, parser, res, metrics_only);
      res.keep_alive(keep && parser.get().keep_alive() && !draining);
      res.prepare_payload();
      tcp_layer.expires_after(options.read_deadline);
      auto [wec, wn] = co_await http::async_write(stream, res, tuple_awaitable);
      if (wec || res.keep_alive()) {
        if (wec) co_return;
        continue;
      }
      // Closing with the rest of a body unread (a 413 answered from Content-Length) would reset
      // the connection, and the client could lose the answer while it still writes: stop
      // sending, then read and drop what comes for a bounded while.
      if (!parser.is_done()) {
        boost::system::error_code ignored;
        tcp_layer.socket().shutdown(tcp::socket::shutdown_send, ignored);
        tcp_layer.expires_after(2s);
        for (std::size_t drained = 0; drained < 2 * body_ceiling;) {
          buffer.clear();
          auto [dec, dn] = co_await stream.async_read_some(buffer.prepare(65536), tuple_awaitable);
          if (dec) break;
          drained += dn;
        }
      }
      co_return;
    }
  }

  /// The answer to a request whose header did not parse: 431 for one over 16 KiB (RFC 6585 §5),
  /// 413 for a Content-Length over any source's limit (Beast checks it with the header), 400 for
  /// one that is not HTTP/1.x; nullopt for a connection that closed or timed out.
  static std::optional<http::status> malformed_status(const boost::system::error_code& ec) {
    if (ec == http::error::header_limit) return http::status::request_header_fields_too_large;
    if (ec == http::error::body_limit) return http::status::payload_too_large;  // Content-Length over 16 MiB
    if (ec.category() == beast::http::make_error_code(http::error::bad_method).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message)
      return http::status::bad_request;
    return std::nullopt;
  }

  /// Answers a malformed request once (counted with source "": outcome "too_large" for 413,
  /// "malformed" otherwise), with Beast's reason as the detail, and closes.
  template <class Stream>
  asio::awaitable<void> refuse_malformed(Stream& stream, http::status status, std::string detail) {
    const bool too_large = status == http::status::payload_too_large;
    count("", too_large ? "too_large" : "malformed");
    response res{status, 11};
    res.set(http::field::server, "walhook");
    res.set(http::field::content_type, "application/json");
    answer(res, status, too_large ? "too_large" : status == http::status::bad_request ? "bad_request" : "header_too_large",
           detail);
    res.keep_alive(false);
    res.prepare_payload();
    beast::get_lowest_layer(stream).expires_after(5s);
    auto [wec, wn] = co_await http::async_write(stream, res, tuple_awaitable);
    if (wec) co_return;
    // The rest of an oversized header may still come: closing on it unread would reset the
    // connection and could lose the answer. Stop sending, drop what comes for a bounded while.
    auto& tcp_layer = beast::get_lowest_layer(stream);
    boost::system::error_code ignored;
    tcp_layer.socket().shutdown(tcp::socket::shutdown_send, ignored);
    tcp_layer.expires_after(1s);
    beast::flat_buffer sink;
    for (std::size_t drained = 0; drained < 256 * 1024;) {
      sink.clear();
      auto [dec, dn] = co_await stream.async_read_some(sink.prepare(16384), tuple_awaitable);
      if (dec) break;
      drained += dn;
    }
  }

  static void answer(response& res, http::status status, std::string_view outcome, std::string_view detail = {}) {
    res.result(status);
    res.body() = detail.empty() ? fmt::format("{{\"status\":\"{}\"}}\n", outcome)
                                : fmt::format("{{\"status\":\"{}\",\"detail\":\"{}\"}}\n", outcome, json_escaped(detail));
  }

  /// One request, its header read. Reads the body when it is wanted. False: close afterwards.
  template <class Stream>
  asio::awaitable<bool> handle(Stream& stream, beast::flat_buffer& buffer,
                               http::request_parser<http::string_body>& parser, response& res, bool metrics_only) {
    const auto& req = parser.get();
    std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    const bool get = req.method() == http::verb::get || req.method() == http::verb::head;
    if (metrics_only || !path.starts_with("/in/")) {
      if (get && path == "/healthz" && !metrics_only) {
        const bool up = committer.stats().sessions_up > 0;
        answer(res, up ? http::status::ok : http::status::service_unavailable, up ? "ok" : "database unavailable");
      } else if (get && path == "/metrics" && metrics_only) {
        res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        res.body() = metrics_text();
      } else {
        answer(res, http::status::not_found, "not_found", metrics_only ? "try /metrics" : "POST /in/{source}");
      }
      co_return !parser.is_done() ? false : true;  // an unread body: close rather than read it
    }
    const std::string name(path.substr(4));
    if (req.method() != http::verb::post) {
      res.set(http::field::allow, "POST");
      answer(res, http::status::method_not_allowed, "method_not_allowed", "POST only");
      co_return parser.is_done();
    }
    std::shared_ptr<const source_config> source;
    if (valid_source_name(name)) source = co_await find_source(name);
    if (!source) {
      count("", "unknown_source");
      answer(res, http::status::not_found, "unknown_source");
      co_return parser.is_done();
    }
    // A declared length over the limit is refused before a byte of the body is read.
    if (auto length = parser.content_length(); length && *length > source->max_body_bytes) {
      count(source->name, "too_large");
      answer(res, http::status::payload_too_large, "too_large", fmt::format("at most {} bytes", source->max_body_bytes));
      co_return false;
    }
    parser.body_limit(source->max_body_bytes);
    if (beast::iequals(req[http::field::expect], "100-continue")) {  // curl's default for bodies over 1 KiB
      http::response<http::empty_body> go_on{http::status::continue_, req.version()};
      auto [cec, cn] = co_await http::async_write(stream, go_on, tuple_awaitable);
      if (cec) co_return false;
    }
    auto [bec, bn] = co_await http::async_read(stream, buffer, parser, tuple_awaitable);
    if (bec == http::error::body_limit) {
      count(source->name, "too_large");
      answer(res, http::status::payload_too_large, "too_large", fmt::format("at most {} bytes", source->max_body_bytes));
      co_return false;
    }
    if (bec) {
      answer(res, http::status::bad_request, "bad_request", bec.message());
      co_return false;
    }
    co_return co_await admit(*source, req, res);
  }

  /// A whole request of a known source: verify, commit, answer.
  asio::awaitable<bool> admit(const source_config& source, const http::request<http::string_body>& req, response& res) {
    std::vector<header_field> headers;
    for (const auto& f : req) headers.push_back({std::string_view(f.name_string().data(), f.name_string().size()),
                                                  std::string_view(f.value().data(), f.value().size())});
    auto v = verify(source, headers, req.body(), std::chrono::system_clock::now());
    if (!v) {
      const auto why = v.error().why;
      count(source.name, refusal_name(why));
      const bool unauthenticated =
          why == refusal::missing_header || why == refusal::bad_signature || why == refusal::stale_timestamp;
      answer(res, unauthenticated ? http::status::unauthorized : http::status::bad_request, refusal_name(why),
             v.error().detail);
      co_return true;
    }
    accept_call call{source.name, v->event_id,    fingerprint(req.body()), v->event_type,
                     v->order_key, kept_headers(headers), req.body()};
    auto r = co_await committer.accept(std::move(call));
    switch (r.outcome) {
      case accept_outcome::accepted:
        count(source.name, "accepted");
        answer(res, http::status::ok, "accepted");
        break;
      case accept_outcome::duplicate:
        count(source.name, "duplicate");
        answer(res, http::status::ok, "duplicate");
        break;
      case accept_outcome::conflict:
        count(source.name, "key_reused");
        log::warn("inbox.key_reused", {{"source", source.name}, {"event_id", v->event_id}});
        answer(res, http::status::conflict, "key_reused", "this event id was received before with another body");
        break;
      case accept_outcome::unknown_source:  // removed since it was read
        sources.erase(source.name);
        count("", "unknown_source");
        answer(res, http::status::not_found, "unknown_source");
        break;
      case accept_outcome::rejected:
        count(source.name, "rejected");
        answer(res, http::status::bad_request, "rejected", r.detail);
        break;
      case accept_outcome::shed:
      case accept_outcome::failed:
        count(source.name, r.outcome == accept_outcome::shed ? "shed" : "failed");
        res.set(http::field::retry_after, std::to_string(options.retry_after.count()));
        answer(res, http::status::service_unavailable, r.outcome == accept_outcome::shed ? "shed" : "unavailable",
               r.detail);
        break;
    }
    co_return true;
  }

  std::string metrics_text() const { return render_ingest_metrics(requests, committer.stats()); }
};

asio::awaitable<void> ingest_server::drain(std::chrono::milliseconds grace) {
  auto self = impl_;
  self->draining = true;
  boost::system::error_code ignored;
  self->acceptor.close(ignored);
  if (self->metrics_acceptor) self->metrics_acceptor->close(ignored);
  self->wake.cancel();
  for (auto* s : self->idle) s->socket().close(ignored);
  self->idle.clear();
  // Requests under way finish: each is answered once its commit is (or its wait ends).
  asio::steady_timer tick(self->ex);
  const auto until = std::chrono::steady_clock::now() + grace;
  while (self->connections > 0 && std::chrono::steady_clock::now() < until) {
    tick.expires_after(20ms);
    co_await tick.async_wait(tuple_awaitable);
  }
  stop();
}

ingest_server::ingest_server(asio::any_io_executor ex, ingest_options options)
    : impl_(std::make_shared<impl>(ex, std::move(options))) {
  impl_->tasks.spawn(impl_->refresh_loop(), "inbox sources");
  impl_->tasks.spawn(impl_->accept_loop(impl_->acceptor, false), "ingest accept");
  if (impl_->metrics_acceptor) impl_->tasks.spawn(impl_->accept_loop(*impl_->metrics_acceptor, true), "metrics accept");
}

ingest_server::~ingest_server() { stop(); }

unsigned short ingest_server::port() const { return impl_->acceptor.local_endpoint().port(); }

std::optional<unsigned short> ingest_server::metrics_port() const {
  if (!impl_->metrics_acceptor) return std::nullopt;
  return impl_->metrics_acceptor->local_endpoint().port();
}

std::string ingest_server::metrics_text() const { return impl_->metrics_text(); }

void ingest_server::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
  if (impl_->metrics_acceptor) impl_->metrics_acceptor->close(ignored);
  impl_->wake.cancel();
  impl_->committer.stop();
  impl_->tasks.emit(asio::cancellation_type::terminal);
}

}  // namespace walhook::relay::inbox
