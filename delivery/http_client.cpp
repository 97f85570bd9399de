// The client core: DNS on the lookup pool, the SSRF guard applied to what it returns, connect
// and TLS, and run_post (pooled connection first, one retry on a fresh connection if the pooled
// one was stale), shutdown and forget. The pieces it drives live beside it: url.cpp (targets),
// ssrf.cpp (the guard's table), connection_pool.cpp (keep-alive), exchange.cpp (the request and
// the response), transport.cpp (error messages).

#include "delivery/http_client.hpp"

#include "common/log.hpp"
#include "delivery/connection_pool.hpp"
#include "delivery/exchange.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <fmt/format.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <cctype>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <list>
#include <mutex>
#include <stdexcept>
#include <tuple>

namespace walhook::delivery {

namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

error_code err(transport_errc e) { return make_error_code(e); }

const clock_source& checked_clock(const clock_source* clock) {
  // Fatal setup (a programming error), like unparsable extra_ca_pem.
  if (clock == nullptr) throw std::invalid_argument("http_client_options::clock must not be null");
  return *clock;
}

}  // namespace

/// Internals shared by the client object and its in-flight calls (named namespace: it is the
/// base of http_client::impl, which has external linkage).
namespace http_detail {

struct call_context;

/// The client's state. Lives as long as the http_client or any in-flight call (coroutines hold
/// a shared_ptr). Touched only on the client's executor.
struct client_core {
  client_core(asio::any_io_executor ex, http_client_options o)
      : executor(std::move(ex)),
        options(std::move(o)),
        tls(ssl::context::tls_client),
        pool(checked_clock(options.clock), options.max_idle_per_pool, options.idle_timeout) {
    error_code ec;
    tls.set_default_verify_paths(ec);
    if (ec) log::warn("http.tls_default_verify_paths_failed", {{"error", ec.message()}});
    if (!options.extra_ca_pem.empty()) {
      // Fatal setup (bad configuration), hence the throwing overload.
      tls.add_certificate_authority(asio::buffer(options.extra_ca_pem));
    }
    tls.set_verify_mode(ssl::verify_peer);
    tls.set_options(ssl::context::default_workarounds | ssl::context::no_compression);
    SSL_CTX_set_min_proto_version(tls.native_handle(), TLS1_2_VERSION);
  }

  asio::any_io_executor executor;
  http_client_options options;
  ssl::context tls;
  bool stopped = false;
  /// Cleared when the client goes away, so lookups finishing later on the pool never post to
  /// an executor that may be gone.
  struct alive_flag {
    std::mutex mutex;
    bool value = true;
  };
  std::shared_ptr<alive_flag> alive = std::make_shared<alive_flag>();
  ~client_core() {
    std::lock_guard lock(alive->mutex);
    alive->value = false;
  }
  connection_pool pool;
  std::list<call_context*> active;

  /// Pools the connection after a call, or closes it.
  void release(const std::string& pool_key, std::unique_ptr<connection> c, bool reusable) {
    if (!reusable || stopped) {
      c->close();
      return;
    }
    pool.release(pool_key, std::move(c));
  }

  void forget(const std::string& pool_key) { pool.forget(pool_key); }

  void shutdown();
};

/// Registers an in-flight call so shutdown() can interrupt whatever it is waiting on, and
/// enforces the call's total deadline with a timer of its own: whatever the peer sends (an
/// endless stream of 1xx responses outruns Beast's per-read expiry), the call's connection is
/// closed and its DNS wait woken when `remaining` has passed, and `timed_out` is set so every
/// failure that follows is reported as transport_errc::timeout.
struct call_context {
  call_context(client_core& core, steady_clock::duration remaining)
      : core_(core), self_(core.active.insert(core.active.end(), this)), deadline_timer_(core.executor) {
    deadline_timer_.expires_after(remaining);
    // The handler may run after this frame is gone (fired but not yet run when the call ended);
    // it reaches the call through a weak token only.
    deadline_timer_.async_wait([token = std::weak_ptr<call_context*>(token_)](const error_code& ec) {
      const auto alive = token.lock();
      if (ec || !alive) return;
      (*alive)->timed_out = true;
      (*alive)->cancel();
    });
  }
  ~call_context() {
    deadline_timer_.cancel();
    core_.active.erase(self_);
  }
  call_context(const call_context&) = delete;
  call_context& operator=(const call_context&) = delete;

  /// Closing the socket or cancelling the timer completes the pending operation (never inline).
  void cancel() {
    if (conn != nullptr) conn->close();
    if (waiter != nullptr) waiter->cancel();
  }

  connection* conn = nullptr;          ///< the connection being used, if any
  asio::steady_timer* waiter = nullptr;  ///< the timer a DNS lookup is awaited on, if any
  bool timed_out = false;              ///< the deadline timer fired (call_deadline::fired)

 private:
  client_core& core_;
  std::list<call_context*>::iterator self_;
  std::shared_ptr<call_context*> token_ = std::make_shared<call_context*>(this);
  asio::steady_timer deadline_timer_;
};

void client_core::shutdown() {
  stopped = true;
  for (auto* call : active) call->cancel();
  pool.close_all();
}

namespace {

void log_failure(std::string_view what, const http_target& target, const error_code& mapped, const error_code& raw) {
  log::debug(what, {{"host", target.host}, {"port", target.port}, {"error", mapped.message()},
                    {"cause", raw.message()}});
}

/// "127.0.0.1:28099: connection refused", "[::1]:443: network is unreachable": one address a
/// connect was refused by, and the system's reason (strerror, first letter lowered).
std::string connect_failure_text(const tcp::endpoint& address, const error_code& ec) {
  std::string why = ec.message();
  if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
  const auto a = address.address();
  return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" + std::to_string(address.port()) + ": " + why;
}

/// getaddrinfo runs on this process-wide pool. Asio's own resolver uses a single helper thread,
/// so one customer's hanging DNS would delay every other endpoint's lookups behind it; here a
/// slow lookup occupies one of several threads. The pool lives as long as the process (a thread
/// blocked in getaddrinfo cannot be interrupted, so it is never joined).
asio::thread_pool& lookup_pool() {
  static auto* pool = new asio::thread_pool(8);
  return *pool;
}

/// Lookup of a registered name, bounded by the deadline and by shutdown: the call waits on a
/// timer that the lookup wakes; a lookup still running at the deadline is abandoned.
asio::awaitable<boost::system::result<std::vector<tcp::endpoint>>> resolve(client_core& core, call_context& call,
                                                                           const http_target& target,
                                                                           const call_deadline& deadline) {
  struct lookup {
    explicit lookup(const asio::any_io_executor& ex) : wake(ex) {}
    asio::steady_timer wake;  // touched on the client's executor only
    bool done = false;
    error_code ec;
    std::vector<tcp::endpoint> endpoints;
  };
  auto state = std::make_shared<lookup>(core.executor);
  state->wake.expires_after(deadline.remaining());
  asio::post(lookup_pool(), [weak = std::weak_ptr<lookup>(state), alive = core.alive, executor = core.executor,
                             host = target.host, port = target.port] {
    tcp::resolver::results_type results;
    error_code ec;
    {
      // A resolver on a private context, used synchronously on this pool thread.
      asio::io_context local;
      tcp::resolver r(local);
      results = r.resolve(host, port, tcp::resolver::numeric_service, ec);
    }
    std::vector<tcp::endpoint> endpoints;
    for (const auto& entry : results) endpoints.push_back(entry.endpoint());
    // Hand the answer to the client's executor, unless the client is gone.
    // (No strong reference to the lookup here: it must die on its own executor's thread.)
    std::lock_guard lock(alive->mutex);
    if (!alive->value || weak.expired()) return;
    asio::post(executor, [weak, ec, endpoints = std::move(endpoints)]() mutable {
      if (auto s = weak.lock()) {
        s->done = true;
        s->ec = ec;
        s->endpoints = std::move(endpoints);
        s->wake.cancel();
      }
    });
  });
  call.waiter = &state->wake;
  co_await state->wake.async_wait(use_tuple);
  call.waiter = nullptr;
  if (core.stopped) co_return err(transport_errc::cancelled);
  if (!state->done) {
    log_failure("http.resolve_timeout", target, err(transport_errc::resolve_timeout), {});
    co_return err(transport_errc::resolve_timeout);
  }
  if (state->ec || state->endpoints.empty()) {
    log_failure("http.resolve_error", target, err(transport_errc::resolve_failed), state->ec);
    co_return err(transport_errc::resolve_failed);
  }
  co_return std::move(state->endpoints);
}

/// The addresses of `target`'s host: the literal itself, or what DNS answers.
asio::awaitable<boost::system::result<std::vector<tcp::endpoint>, transport_error>> addresses_of(
    client_core& core, call_context& call, const http_target& target, const call_deadline& deadline) {
  const auto port = parse_port(target.port);
  if (!port) co_return err(transport_errc::invalid_url);
  error_code literal_ec;
  const auto literal = asio::ip::make_address(target.host, literal_ec);
  if (!literal_ec) co_return std::vector<tcp::endpoint>{tcp::endpoint(literal, *port)};
  auto resolved = co_await resolve(core, call, target, deadline);
  if (!resolved) co_return resolved.error();
  co_return std::move(*resolved);
}

/// CONNECT `authority` through the proxy `stream` is connected to (RFC 9110 §9.3.6): an empty
/// error once it answers 2xx; else proxy_failed with its status line (407, 403, 502, …), or the
/// I/O failure (timeout, cancelled, read/write_failed).
asio::awaitable<transport_error> open_tunnel(client_core& core, beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                             const std::string& authority, const call_deadline& deadline) {
  const std::string request = "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority +
                              "\r\nUser-Agent: " + core.options.user_agent + "\r\n\r\n";
  stream.expires_after(deadline.remaining());
  auto [write_ec, written] = co_await asio::async_write(stream, asio::buffer(request), use_tuple);
  (void)written;
  if (write_ec || core.stopped)
    co_return transport_error(classify_io_error(core.stopped, write_ec, deadline, transport_errc::proxy_failed),
                              "writing CONNECT: " + write_ec.message());
  http::response_parser<http::empty_body> parser;
  parser.skip(true);  // a 2xx answer to CONNECT has no body: the tunnel starts after the header
  stream.expires_after(deadline.remaining());
  auto [read_ec, read] = co_await http::async_read_header(stream, buffer, parser, use_tuple);
  (void)read;
  if (read_ec || core.stopped)
    co_return transport_error(classify_io_error(core.stopped, read_ec, deadline, transport_errc::proxy_failed),
                              "reading the answer to CONNECT: " + read_ec.message());
  const auto& answer = parser.get();
  const unsigned status = answer.result_int();
  if (status < 200 || status > 299)
    co_return transport_error(transport_errc::proxy_failed,
                              fmt::format("proxy answered {} {} to CONNECT {}", status, std::string(answer.reason()), authority));
  if (buffer.size() != 0)  // the endpoint cannot have spoken first
    co_return transport_error(transport_errc::proxy_failed, "proxy sent bytes after its answer to CONNECT");
  co_return transport_error{};
}

/// Resolve, SSRF guard, connect (every allowed address in turn), TCP_NODELAY, TLS handshake.
asio::awaitable<boost::system::result<std::unique_ptr<connection>, transport_error>> open_connection(
    client_core& core, call_context& call, const http_target& target, const call_deadline& deadline) {
  const auto port = parse_port(target.port);
  if (!port) co_return err(transport_errc::invalid_url);

  error_code literal_ec;
  asio::ip::make_address(target.host, literal_ec);
  const bool is_ip_literal = !literal_ec;
  auto found = co_await addresses_of(core, call, target, deadline);
  if (!found) co_return found.error();
  std::vector<tcp::endpoint> endpoints = std::move(*found);

  // Cloud metadata services are never a webhook target, private networks allowed or not; an
  // inbox destination (the operator's handler) may reach private networks, not link-local.
  const auto policy = core.options.allow_private_networks ? ssrf_policy::open
                      : target.private_network_allowed    ? ssrf_policy::private_allowed
                                                          : ssrf_policy::guarded;
  std::erase_if(endpoints, [policy](const tcp::endpoint& e) { return refuses(e.address(), policy); });
  if (endpoints.empty()) {
    log::debug("http.address_blocked", {{"host", target.host}});
    co_return err(transport_errc::address_blocked);
  }

  // Through the egress proxy: TCP to it, then a tunnel to the first checked address.
  // The endpoint's own choice first; --no-proxy only exempts hosts from the client's proxy.
  const http_proxy* proxy = nullptr;
  if (target.egress == egress_route::proxy && target.proxy) proxy = &*target.proxy;
  else if (target.egress == egress_route::client && core.options.proxy && !bypasses_proxy(core.options.no_proxy, target.host))
    proxy = &*core.options.proxy;
  std::vector<tcp::endpoint> dial = endpoints;
  if (proxy) {
    // Named, not a temporary in the co_await: GCC 12 destroys such a temporary twice.
    http_target proxy_target;
    proxy_target.host = proxy->host;
    proxy_target.port = proxy->port;
    proxy_target.target = "/";
    auto at = co_await addresses_of(core, call, proxy_target, deadline);
    if (!at) {  // the proxy's name, not the endpoint's, did not resolve
      co_return transport_error(at.error() == transport_errc::resolve_timeout ? transport_errc::resolve_timeout
                                                                               : transport_errc::proxy_failed,
                                "cannot resolve the proxy host " + proxy->host + ": " + at.error().text());
    }
    dial = std::move(*at);
    // An endpoint's own proxy is a tenant's setting now (migration 014): never a metadata service.
    std::erase_if(dial, [](const tcp::endpoint& e) { return is_metadata_address(e.address()); });
    if (dial.empty())
      co_return transport_error(transport_errc::proxy_failed, "the proxy host " + proxy->host + " is a cloud metadata address");
  }

  auto conn = std::make_unique<connection>();
  conn->origin = {target.tls, target.host, target.port};
  // shutdown() may close the connection while it opens; the pointer never outlives this frame.
  struct forget_on_exit {
    call_context& call;
    ~forget_on_exit() { call.conn = nullptr; }
  } forget_conn{call};
  if (target.tls) {
    conn->secure.emplace(core.executor, core.tls);
  } else {
    conn->plain.emplace(core.executor);
  }
  call.conn = conn.get();
  auto& tcp_stream = conn->tcp();
  // Every allowed address in turn (as Asio's range connect), keeping why each one refused: the
  // error names them all ("127.0.0.1:28099: connection refused"), not just the last.
  error_code connect_ec;
  std::string tried;
  for (const auto& address : dial) {
    error_code ignored;
    tcp_stream.socket().close(ignored);  // the next address may be of the other family
    tcp_stream.expires_after(deadline.remaining());
    std::tie(connect_ec) = co_await tcp_stream.async_connect(address, use_tuple);
    if (!connect_ec || core.stopped || deadline.passed()) break;
    tried += (tried.empty() ? (proxy ? "proxy " : "") : "; ") + connect_failure_text(address, connect_ec);
  }
  if (connect_ec || core.stopped) {
    const auto mapped = classify_io_error(core.stopped, connect_ec, deadline, transport_errc::connect_failed);
    log_failure("http.connect_error", target, mapped, connect_ec);
    co_return transport_error(mapped, mapped == transport_errc::connect_failed ? tried : std::string());
  }
  error_code ignored;
  tcp_stream.socket().set_option(tcp::no_delay(true), ignored);
  if (proxy) {
    const std::string authority = authority_of(endpoints.front().address().to_string(), target.port);
    auto tunnel = co_await open_tunnel(core, tcp_stream, conn->buffer, authority, deadline);
    if (tunnel) {
      log_failure("http.proxy_error", target, tunnel, {});
      co_return tunnel;
    }
  }

  if (target.tls) {
    auto& stream = *conn->secure;
    // SNI carries host names only (RFC 6066 §3). OpenSSL checks the name during verification:
    // subjectAltName only (DNS names, or IP addresses for IP literals), never the subject CN
    // (RFC 6125 §6.4.4, CA/B Forum baseline requirements), no partial wildcards.
    SSL* handle = stream.native_handle();
    X509_VERIFY_PARAM* param = SSL_get0_param(handle);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const bool name_set = is_ip_literal ? X509_VERIFY_PARAM_set1_ip_asc(param, target.host.c_str()) == 1
                                        : X509_VERIFY_PARAM_set1_host(param, target.host.c_str(), 0) == 1 &&
                                              SSL_set_tlsext_host_name(handle, target.host.c_str()) == 1;
    if (!name_set) co_return err(transport_errc::tls_failed);
    stream.set_verify_mode(ssl::verify_peer);
    const auto [handshake_ec] = co_await stream.async_handshake(ssl::stream_base::client, use_tuple);
    if (handshake_ec || core.stopped) {
      auto mapped = classify_io_error(core.stopped, handshake_ec, deadline, transport_errc::tls_failed);
      const long verify_result = SSL_get_verify_result(handle);
      if (mapped == transport_errc::tls_failed && verify_result != X509_V_OK) mapped = tls_verify_error(verify_result);
      log::debug("http.tls_handshake_error",
                 {{"host", target.host}, {"port", target.port}, {"error", mapped.message()},
                  {"cause", handshake_ec.message()},
                  {"verify_result", verify_result == X509_V_OK ? "ok" : X509_verify_cert_error_string(verify_result)}});
      co_return mapped;
    }
  }
  co_return std::move(conn);
}

asio::awaitable<post_result> run_post(std::shared_ptr<client_core> core, std::string pool_key, http_target target,
                                      request_message req, bool keep_body, steady_clock::time_point start,
                                      steady_clock::duration total) {
  if (core->stopped) co_return err(transport_errc::cancelled);
  const auto at = start + total;
  call_context call{*core, at - core->options.clock->steady_now()};
  const call_deadline deadline{core->options.clock, start, at, &call.timed_out};
  const origin_key origin{target.tls, target.host, target.port};

  if (auto pooled = core->pool.take_idle(pool_key, origin)) {
    call.conn = pooled.get();
    auto outcome = co_await exchange(*pooled, req, keep_body, deadline, core->options.body_cap, core->stopped);
    call.conn = nullptr;
    if (!outcome.ec) {
      outcome.response.reused_connection = true;
      core->release(pool_key, std::move(pooled), outcome.reusable);
      co_return outcome.response;
    }
    pooled->close();
    const bool retry = outcome.nothing_received && outcome.ec != transport_errc::timeout &&
                       outcome.ec != transport_errc::cancelled && !deadline.passed();
    if (!retry) co_return outcome.ec;
    log::debug("http.stale_connection_retried", {{"host", target.host}, {"error", outcome.ec.message()}});
  }

  auto opened = co_await open_connection(*core, call, target, deadline);
  if (!opened) co_return opened.error();
  auto conn = std::move(*opened);
  call.conn = conn.get();
  auto outcome = co_await exchange(*conn, req, keep_body, deadline, core->options.body_cap, core->stopped);
  call.conn = nullptr;
  if (outcome.ec) {
    conn->close();
    co_return outcome.ec;
  }
  core->release(pool_key, std::move(conn), outcome.reusable);
  co_return outcome.response;
}

}  // namespace
}  // namespace http_detail

struct http_client::impl : http_detail::client_core {
  using client_core::client_core;
};

http_client::http_client(boost::asio::any_io_executor ex, http_client_options options)
    : impl_(std::make_shared<impl>(std::move(ex), std::move(options))) {}

http_client::~http_client() {
  if (impl_) shutdown();
}

boost::asio::awaitable<post_result> http_client::async_post(const std::string& pool_key, const http_target& target,
                                                            const http_request& request) {
  const auto start = impl_->options.clock->steady_now();
  // Everything the call needs is copied before the first suspension; `this` is not used after it.
  std::shared_ptr<http_detail::client_core> core = impl_;
  auto req = build_request(core->options.user_agent, target, request);
  if (!req) co_return req.error();
  // Before the call: its arguments are evaluated in no set order, and `core` is moved.
  const steady_clock::duration total =
      request.deadline ? std::min<steady_clock::duration>(*request.deadline, core->options.total_deadline)
                       : steady_clock::duration(core->options.total_deadline);
  co_return co_await http_detail::run_post(std::move(core), pool_key, target, std::move(*req), request.keep_body, start,
                                           total);
}

void http_client::forget(const std::string& pool_key) {
  boost::asio::dispatch(impl_->executor, [core = impl_, pool_key] { core->forget(pool_key); });
}

void http_client::shutdown() {
  boost::asio::dispatch(impl_->executor, [core = impl_] { core->shutdown(); });
}

void http_client::cancel_all() {
  boost::asio::dispatch(impl_->executor, [core = impl_] {
    for (auto* call : core->active) call->cancel();
  });
}

const http_client_options& http_client::options() const { return impl_->options; }

boost::system::result<std::string> read_ca_bundle(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string pem;
  if (in) pem.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) return error_code{errno != 0 ? errno : EIO, boost::system::system_category()};
  // Count the certificates OpenSSL can parse; anything else in the file is ignored, as
  // SSL_CTX_load_verify_locations would.
  std::unique_ptr<BIO, decltype(&BIO_free)> bio{BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free};
  std::size_t certificates = 0;
  while (bio) {
    X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (cert == nullptr) break;
    X509_free(cert);
    ++certificates;
  }
  ERR_clear_error();  // the read that ended the loop left an error on the queue
  if (certificates == 0) return boost::system::errc::make_error_code(boost::system::errc::invalid_argument);
  return pem;
}

}  // namespace walhook::delivery
