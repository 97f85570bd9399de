#include "tests/support/scripted_http_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <deque>
#include <list>
#include <stdexcept>

namespace walhook::test {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t max_request_body = 64 * 1024 * 1024;
constexpr std::size_t endless_piece = 16 * 1024;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

std::string_view reason_phrase(unsigned status) {
  switch (status) {
    case 100: return "Continue";
    case 102: return "Processing";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 307: return "Temporary Redirect";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 410: return "Gone";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

/// One accepted connection; shared by its coroutine and (weakly) by the server for stop().
struct connection_state {
  connection_state(tcp::socket s, std::size_t n) : socket(std::move(s)), timer(socket.get_executor()), number(n) {}
  tcp::socket socket;
  std::optional<ssl::stream<tcp::socket&>> tls;  ///< over `socket`, when the server speaks TLS
  asio::steady_timer timer;                      ///< delays and drips, cancelled by stop()
  std::size_t number;
  std::string tls_server_name;
};

bool is_peer_gone(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::connection_aborted || ec == ssl::error::stream_truncated;
}

template <class T, void (*Free)(T*)>
struct openssl_deleter {
  void operator()(T* p) const { Free(p); }
};
template <class T, void (*Free)(T*)>
using openssl_ptr = std::unique_ptr<T, openssl_deleter<T, Free>>;

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test certificate: ") + what + " failed");
}

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

}  // namespace

std::string recorded_request::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return v;
  }
  return {};
}

scripted_action scripted_action::respond(unsigned status, std::vector<std::string> extra_headers, std::string body) {
  std::string raw = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason_phrase(status)) + "\r\n";
  for (const auto& h : extra_headers) raw += h + "\r\n";
  raw += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  raw += body;
  return raw_bytes(std::move(raw));
}

scripted_action scripted_action::raw_bytes(std::string bytes) {
  scripted_action a;
  a.raw = std::move(bytes);
  return a;
}

scripted_action scripted_action::never_answer() {
  scripted_action a;
  a.after = after_write::hang;
  return a;
}

scripted_action scripted_action::close_without_answer() {
  scripted_action a;
  a.after = after_write::close;
  return a;
}

scripted_action scripted_action::drip(std::string raw, std::chrono::milliseconds interval) {
  scripted_action a;
  a.raw = std::move(raw);
  a.drip_interval = interval;
  return a;
}

scripted_action scripted_action::repeat_forever(std::string bytes) {
  scripted_action a;
  a.raw = std::move(bytes);
  a.endless = endless_body::repeat;
  return a;
}

scripted_action scripted_action::endless_response(std::string head, endless_body kind) {
  scripted_action a;
  a.raw = std::move(head);
  a.endless = kind;
  return a;
}

namespace detail {

struct scripted_server_state {
  explicit scripted_server_state(asio::io_context& io) : ioc(io), acceptor(io) {}

  asio::io_context& ioc;
  tcp::acceptor acceptor;
  std::optional<ssl::context> tls;
  bool stopped = false;
  std::deque<scripted_action> queue;
  std::function<scripted_action(const recorded_request&)> handler;
  std::vector<recorded_request> requests;
  std::size_t accepted = 0;
  std::size_t peer_closed = 0;
  std::size_t failed_handshakes = 0;
  std::size_t open = 0;
  std::exception_ptr failure;
  std::list<std::weak_ptr<connection_state>> connections;
  std::list<asio::steady_timer*> watchers;  ///< wait_until timers, woken on every event

  void notify() {
    for (auto* t : watchers) t->cancel();
  }

  scripted_action next_action(const recorded_request& r) {
    if (!queue.empty()) {
      auto a = std::move(queue.front());
      queue.pop_front();
      return a;
    }
    if (handler) return handler(r);
    return scripted_action::respond(200);
  }

  void stop() {
    if (stopped) return;
    stopped = true;
    error_code ignored;
    acceptor.close(ignored);
    for (auto& weak : connections) {
      if (auto c = weak.lock()) {
        c->socket.close(ignored);
        c->timer.cancel();
      }
    }
    connections.clear();
    notify();
  }
};

}  // namespace detail

namespace {

using server_state = std::shared_ptr<detail::scripted_server_state>;

/// Completion of every server coroutine: keeps the first failure for the test to see.
auto record_failure(server_state s) {
  return [s = std::move(s)](std::exception_ptr e) {
    if (e && !s->failure) s->failure = e;
  };
}

/// Waits on the connection's timer; false if the server stopped meanwhile.
asio::awaitable<bool> pause(const server_state& s, connection_state& c, std::chrono::milliseconds d) {
  c.timer.expires_after(d);
  co_await c.timer.async_wait(use_tuple);
  co_return !s->stopped;
}

/// Reads and discards until the peer closes; used by connections that hang.
template <class Stream>
asio::awaitable<error_code> drain(Stream& stream) {
  std::array<char, 4096> sink{};
  for (;;) {
    const auto [ec, n] = co_await stream.async_read_some(asio::buffer(sink), use_tuple);
    if (ec) co_return ec;
  }
}

/// Performs `a` after the request was read. Returns the error that ended the connection, or
/// success if it should go on to the next request.
template <class Stream>
asio::awaitable<error_code> perform(server_state s, connection_state& c, Stream& stream, const scripted_action& a) {
  using after_write = scripted_action::after_write;
  using endless_body = scripted_action::endless_body;
  if (!a.interim.empty()) {
    const auto [ec, n] = co_await asio::async_write(stream, asio::buffer(a.interim), use_tuple);
    if (ec) co_return ec;
  }
  if (a.delay.count() > 0 && !co_await pause(s, c, a.delay)) co_return asio::error::operation_aborted;
  if (a.drip_interval.count() > 0) {
    for (char byte : a.raw) {
      const auto [ec, n] = co_await asio::async_write(stream, asio::buffer(&byte, 1), use_tuple);
      if (ec) co_return ec;
      if (!co_await pause(s, c, a.drip_interval)) co_return asio::error::operation_aborted;
    }
  } else if (!a.raw.empty()) {
    const auto [ec, n] = co_await asio::async_write(stream, asio::buffer(a.raw), use_tuple);
    if (ec) co_return ec;
  }
  if (a.endless != endless_body::none) {
    std::string piece(endless_piece, 'x');
    if (a.endless == endless_body::chunked) piece = "4000\r\n" + piece + "\r\n";  // 0x4000 = 16 KiB
    if (a.endless == endless_body::repeat) piece = a.raw;
    for (;;) {
      const auto [ec, n] = co_await asio::async_write(stream, asio::buffer(piece), use_tuple);
      if (ec) co_return ec;
    }
  }
  switch (a.after) {
    case after_write::keep_alive:
      co_return error_code{};
    case after_write::close:
      co_return asio::error::shut_down;
    case after_write::hang:
      co_return co_await drain(stream);
  }
  co_return error_code{};
}

/// Reads requests and performs their actions until the connection ends; returns why it ended.
template <class Stream>
asio::awaitable<error_code> serve_requests(server_state s, connection_state& c, Stream& stream) {
  beast::flat_buffer buffer;
  std::size_t sequence = 0;
  while (!s->stopped) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(max_request_body);
    const auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_tuple);
    if (ec) co_return ec;
    const auto& req = parser.get();
    recorded_request rec;
    rec.method = req.method_string();
    rec.target = req.target();
    for (const auto& field : req) rec.headers.emplace_back(field.name_string(), field.value());
    rec.body = req.body();
    rec.connection = c.number;
    rec.sequence = ++sequence;
    rec.tls_server_name = c.tls_server_name;
    s->requests.push_back(rec);
    s->notify();

    const auto action = s->next_action(rec);
    if (const auto ended = co_await perform(s, c, stream, action)) co_return ended;
  }
  co_return asio::error::operation_aborted;
}

asio::awaitable<void> serve(server_state s, std::shared_ptr<connection_state> c) {
  error_code ended;
  if (s->tls) {
    auto& stream = c->tls.emplace(c->socket, *s->tls);
    const auto [ec] = co_await stream.async_handshake(ssl::stream_base::server, use_tuple);
    if (ec) {
      ended = ec;
      if (!s->stopped) ++s->failed_handshakes;
    } else {
      if (const char* name = SSL_get_servername(stream.native_handle(), TLSEXT_NAMETYPE_host_name)) {
        c->tls_server_name = name;
      }
      ended = co_await serve_requests(s, *c, stream);
    }
  } else {
    ended = co_await serve_requests(s, *c, c->socket);
  }
  error_code ignored;
  c->socket.close(ignored);
  --s->open;
  if (!s->stopped && is_peer_gone(ended)) ++s->peer_closed;
  s->notify();
}

asio::awaitable<void> accept_loop(server_state s) {
  while (!s->stopped) {
    auto [ec, socket] = co_await s->acceptor.async_accept(use_tuple);
    if (ec || s->stopped) co_return;
    auto c = std::make_shared<connection_state>(std::move(socket), ++s->accepted);
    ++s->open;
    std::erase_if(s->connections, [](const std::weak_ptr<connection_state>& w) { return w.expired(); });
    s->connections.push_back(c);
    s->notify();
    asio::co_spawn(s->ioc, serve(s, std::move(c)), record_failure(s));
  }
}

}  // namespace

tls_identity make_test_certificate(std::string_view subject_alt_names) {
  certificate_spec spec;
  spec.subject_alt_names = subject_alt_names;
  return make_certificate(spec);
}

tls_identity make_certificate(const certificate_spec& spec) {
  static long serial = 0;
  openssl_ptr<EVP_PKEY, EVP_PKEY_free> key{EVP_EC_gen("P-256")};
  check(key != nullptr, "EVP_EC_gen");
  openssl_ptr<X509, X509_free> cert{X509_new()};
  check(cert != nullptr, "X509_new");
  check(X509_set_version(cert.get(), 2) == 1, "X509_set_version");  // v3
  check(ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), ++serial) == 1, "serial");
  check(X509_gmtime_adj(X509_getm_notBefore(cert.get()), static_cast<long>(spec.not_before.count())) != nullptr,
        "notBefore");
  check(X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(spec.not_after.count())) != nullptr,
        "notAfter");
  check(X509_set_pubkey(cert.get(), key.get()) == 1, "X509_set_pubkey");
  X509_NAME* name = X509_get_subject_name(cert.get());
  check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1, -1, 0) == 1,
        "subject");

  // The issuer: this certificate itself, or the given CA.
  openssl_ptr<X509, X509_free> issuer_cert;
  openssl_ptr<EVP_PKEY, EVP_PKEY_free> issuer_key;
  if (spec.issuer != nullptr) {
    openssl_ptr<BIO, BIO_free_all> cb{BIO_new_mem_buf(spec.issuer->certificate_pem.data(),
                                                      static_cast<int>(spec.issuer->certificate_pem.size()))};
    openssl_ptr<BIO, BIO_free_all> kb{BIO_new_mem_buf(spec.issuer->private_key_pem.data(),
                                                      static_cast<int>(spec.issuer->private_key_pem.size()))};
    check(cb && kb, "BIO_new_mem_buf");
    issuer_cert.reset(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
    issuer_key.reset(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
    check(issuer_cert && issuer_key, "reading the issuer");
  }
  X509* signer_cert = issuer_cert ? issuer_cert.get() : cert.get();
  EVP_PKEY* signer_key = issuer_key ? issuer_key.get() : key.get();
  check(X509_set_issuer_name(cert.get(), X509_get_subject_name(signer_cert)) == 1, "issuer");

  const auto add = [&](int nid, const std::string& value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, signer_cert, cert.get(), nullptr, nullptr, 0);
    openssl_ptr<X509_EXTENSION, X509_EXTENSION_free> ext{X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str())};
    check(ext != nullptr, "X509V3_EXT_conf_nid");
    check(X509_add_ext(cert.get(), ext.get(), -1) == 1, "X509_add_ext");
  };
  if (spec.is_ca) {
    add(NID_basic_constraints, "critical,CA:TRUE");
    add(NID_key_usage, "critical,digitalSignature,keyCertSign");
  } else {
    add(NID_basic_constraints, "critical,CA:FALSE");
    add(NID_key_usage, "critical,digitalSignature");
    if (!spec.extended_key_usage.empty()) add(NID_ext_key_usage, spec.extended_key_usage);
  }
  if (!spec.subject_alt_names.empty()) add(NID_subject_alt_name, spec.subject_alt_names);
  check(X509_sign(cert.get(), signer_key, EVP_sha256()) > 0, "X509_sign");

  openssl_ptr<BIO, BIO_free_all> cert_bio{BIO_new(BIO_s_mem())};
  openssl_ptr<BIO, BIO_free_all> key_bio{BIO_new(BIO_s_mem())};
  check(cert_bio && key_bio, "BIO_new");
  check(PEM_write_bio_X509(cert_bio.get(), cert.get()) == 1, "PEM_write_bio_X509");
  check(PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "PEM_write_bio_PrivateKey");
  return {bio_text(cert_bio.get()), bio_text(key_bio.get())};
}

scripted_http_server::scripted_http_server(boost::asio::io_context& ioc, const boost::asio::ip::address& bind_address,
                                           std::optional<tls_identity> tls)
    : state_(std::make_shared<detail::scripted_server_state>(ioc)) {
  if (tls) {
    auto& ctx = state_->tls.emplace(ssl::context::tls_server);
    ctx.use_certificate_chain(asio::buffer(tls->certificate_pem));
    ctx.use_private_key(asio::buffer(tls->private_key_pem), ssl::context::pem);
  }
  const tcp::endpoint endpoint{bind_address, 0};
  state_->acceptor.open(endpoint.protocol());
  state_->acceptor.bind(endpoint);
  state_->acceptor.listen();
  asio::co_spawn(ioc, accept_loop(state_), record_failure(state_));
}

scripted_http_server::~scripted_http_server() { stop(); }

unsigned short scripted_http_server::port() const {
  error_code ec;
  return state_->acceptor.local_endpoint(ec).port();
}

std::string scripted_http_server::url(std::string_view target) const {
  error_code ec;
  const auto address = state_->acceptor.local_endpoint(ec).address();
  const std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return (state_->tls ? "https://" : "http://") + host + ":" + std::to_string(port()) + std::string(target);
}

void scripted_http_server::push(scripted_action action) { state_->queue.push_back(std::move(action)); }

void scripted_http_server::set_handler(std::function<scripted_action(const recorded_request&)> handler) {
  state_->handler = std::move(handler);
}

const std::vector<recorded_request>& scripted_http_server::requests() const { return state_->requests; }
std::size_t scripted_http_server::accepted_connections() const { return state_->accepted; }
std::size_t scripted_http_server::closed_by_peer() const { return state_->peer_closed; }
std::size_t scripted_http_server::failed_handshakes() const { return state_->failed_handshakes; }
std::size_t scripted_http_server::open_connections() const { return state_->open; }
std::exception_ptr scripted_http_server::failure() const { return state_->failure; }

boost::asio::awaitable<bool> scripted_http_server::wait_until(std::function<bool()> condition,
                                                              std::chrono::milliseconds timeout) {
  const auto s = state_;
  asio::steady_timer timer{s->ioc};
  timer.expires_after(timeout);
  for (;;) {
    if (condition()) co_return true;
    if (s->stopped) co_return false;
    const auto it = s->watchers.insert(s->watchers.end(), &timer);
    // Cancelled by notify() on every event; a cancel keeps the expiry, so the wait resumes.
    const auto [ec] = co_await timer.async_wait(use_tuple);
    s->watchers.erase(it);
    if (!ec) co_return condition();
  }
}

void scripted_http_server::stop() { state_->stop(); }

bool ipv6_loopback_available() {
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  error_code ec;
  acceptor.open(tcp::v6(), ec);
  if (!ec) acceptor.bind({asio::ip::address_v6::loopback(), 0}, ec);
  return !ec;
}

}  // namespace walhook::test
