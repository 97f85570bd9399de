#include "delivery/amqp_connection.hpp"

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <vector>

namespace walhook::delivery::amqp_detail {
namespace {

using std::chrono::steady_clock;
using namespace std::chrono_literals;

/// Heartbeat negotiated at login (seconds): a broker that vanishes without closing the socket
/// (a partition, a frozen VM) is noticed after two missed heartbeats, not never.
constexpr int heartbeat_s = 10;
/// frame_max offered at login (RabbitMQ's default; bodies larger than it go in several frames).
constexpr int frame_max = 131072;
/// How long a polite close (channel.close-ok, connection.close) may take before the socket is dropped.
constexpr auto close_timeout = 1s;
/// The longest the worker sleeps in poll() with nothing to do; rabbitmq-c services heartbeats
/// only inside its calls, so the worker looks at the connection at least this often.
constexpr int idle_poll_ms = 1000;

std::string to_string(amqp_bytes_t b) { return b.len ? std::string(static_cast<const char*>(b.bytes), b.len) : ""; }
amqp_bytes_t bytes_of(const std::string& s) { return {s.size(), const_cast<char*>(s.data())}; }

timeval remaining(steady_clock::time_point deadline) {
  const auto left = std::max<steady_clock::duration>(deadline - steady_clock::now(), 1ms);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(left).count();
  return {static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
}

/// A rabbitmq-c status (a library failure) as a transport_error: `otherwise` unless it says TLS or timeout.
transport_error from_status(int status, transport_errc otherwise) {
  const std::string why = amqp_error_string2(status);
  if (status == AMQP_STATUS_TIMEOUT) return {transport_errc::timeout, why};
  if (status <= AMQP_STATUS_SSL_ERROR && status > _AMQP_STATUS_SSL_NEXT_VALUE) return {transport_errc::tls_failed, why};
  return {otherwise, why};
}

/// An RPC's reply (login, channel.open, confirm.select) as an error; ok() if it is normal.
/// A close from the broker is broker_refused with its reply text ("ACCESS_REFUSED - Login was
/// refused …", "NOT_ALLOWED - vhost x not found").
transport_error from_reply(const amqp_rpc_reply_t& r, const char* step) {
  switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
      return {};
    case AMQP_RESPONSE_NONE:
      return {transport_errc::broker_closed, fmt::format("{}: no reply", step)};
    case AMQP_RESPONSE_LIBRARY_EXCEPTION: {
      auto e = from_status(r.library_error, transport_errc::broker_closed);
      return {e, fmt::format("{}: {}", step, e.detail())};
    }
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD)
        return {transport_errc::broker_refused, to_string(static_cast<amqp_connection_close_t*>(r.reply.decoded)->reply_text)};
      if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD)
        return {transport_errc::broker_refused, to_string(static_cast<amqp_channel_close_t*>(r.reply.decoded)->reply_text)};
      return {transport_errc::broker_refused, fmt::format("{}: unexpected method {:#x}", step, r.reply.id)};
  }
  return {transport_errc::broker_closed, step};
}

/// The first certificate verification error of the handshake running on this thread (rabbitmq-c
/// only says "peer verification failed"; this says why, as the HTTPS client does).
thread_local long first_verify_error = X509_V_OK;

int note_verify_error(int preverify_ok, X509_STORE_CTX* ctx) {
  if (!preverify_ok && first_verify_error == X509_V_OK) first_verify_error = X509_STORE_CTX_get_error(ctx);
  return preverify_ok;
}

/// Trusts the system's CAs and `extra_ca_pem` and has OpenSSL check the host during the
/// handshake (subjectAltName only, no partial wildcards), as the HTTPS client does. We connect to
/// an address the SSRF guard allowed, so rabbitmq-c's own check (against the address we pass it)
/// is off and the name is checked here.
transport_error configure_tls(amqp_socket_t* socket, const std::string& host, const std::string& extra_ca_pem) {
  auto* ctx = static_cast<SSL_CTX*>(amqp_ssl_socket_get_context(socket));
  if (!ctx || SSL_CTX_set_default_verify_paths(ctx) != 1) return {transport_errc::tls_failed, "no TLS context"};
  if (!extra_ca_pem.empty()) {
    BIO* bio = BIO_new_mem_buf(extra_ca_pem.data(), static_cast<int>(extra_ca_pem.size()));
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(store, cert);
      X509_free(cert);
    }
    BIO_free(bio);
  }
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(host, ec);
  const int ok = ec ? X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size())
                    : X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  if (ok != 1) return {transport_errc::tls_failed, "cannot set the host to verify"};
  amqp_ssl_socket_set_verify_peer(socket, 1);
  amqp_ssl_socket_set_verify_hostname(socket, 0);
  SSL_CTX_set_verify(ctx, SSL_CTX_get_verify_mode(ctx), note_verify_error);
  first_verify_error = X509_V_OK;
  return {};
}

/// The client properties sent at login: who we are, and the capabilities that make RabbitMQ
/// tell us about blocking (connection.blocked) and refused logins (a connection.close with 403
/// instead of a dropped socket).
struct client_properties {
  explicit client_properties(const std::string& connection_name) {
    caps[0] = {amqp_cstring_bytes("connection.blocked"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}};
    caps[1] = {amqp_cstring_bytes("authentication_failure_close"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}};
    caps[2] = {amqp_cstring_bytes("publisher_confirms"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}};
    caps[3] = {amqp_cstring_bytes("basic.nack"), {AMQP_FIELD_KIND_BOOLEAN, {.boolean = 1}}};
    props[0] = {amqp_cstring_bytes("product"), {AMQP_FIELD_KIND_UTF8, {.bytes = amqp_cstring_bytes("walhook")}}};
    props[1] = {amqp_cstring_bytes("connection_name"), {AMQP_FIELD_KIND_UTF8, {.bytes = bytes_of(connection_name)}}};
    props[2] = {amqp_cstring_bytes("capabilities"),
                {AMQP_FIELD_KIND_TABLE, {.table = {static_cast<int>(caps.size()), caps.data()}}}};
    table = {static_cast<int>(props.size()), props.data()};
  }
  std::array<amqp_table_entry_t, 4> caps{};
  std::array<amqp_table_entry_t, 3> props{};
  amqp_table_t table{};
};

http_response confirmed() {
  http_response r;
  r.status = 200;
  return r;
}

std::string address_text(const boost::asio::ip::tcp::endpoint& a) {
  const auto ip = a.address().to_string();
  return a.address().is_v6() ? fmt::format("[{}]:{}", ip, a.port()) : fmt::format("{}:{}", ip, a.port());
}

bool same_connection(const broker_target& a, const broker_target& b) {
  return a.tls == b.tls && a.host == b.host && a.port == b.port && a.user == b.user && a.password == b.password &&
         a.vhost == b.vhost && a.private_network_allowed == b.private_network_allowed;
}

}  // namespace

void deliver(const std::shared_ptr<waiter>& w, post_result r) {
  auto ex = w->timer.get_executor();
  boost::asio::post(ex, [w, r = std::move(r)]() mutable {
    if (w->result) return;  // the deadline came first: this outcome is dropped
    w->result = std::move(r);
    w->timer.cancel();
  });
}

connection_worker::connection_worker(std::string name, const broker_sink_options& options)
    : name_(std::move(name)), options_(options) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::runtime_error("amqp sink: eventfd failed");
  thread_ = std::thread([this] { run(); });
}

connection_worker::~connection_worker() {
  stop(transport_error(transport_errc::cancelled, "the AMQP sink shut down"));
  join();
  ::close(wake_fd_);
}

void connection_worker::join() {
  if (thread_.joinable()) thread_.join();
}

namespace {
void wake(int fd) {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(fd, &one, sizeof one);
}
}  // namespace

void connection_worker::submit(publish_request r) {
  {
    std::lock_guard lock(mutex_);
    if (stop_) {
      deliver(r.w, transport_error(transport_errc::cancelled, "the AMQP sink shut down"));
      return;
    }
    inbox_.push_back(std::move(r));
  }
  wake(wake_fd_);
}

void connection_worker::cancel(transport_error why) {
  {
    std::lock_guard lock(mutex_);
    cancel_ = std::move(why);
  }
  wake(wake_fd_);
}

void connection_worker::stop(transport_error why) {
  {
    std::lock_guard lock(mutex_);
    if (!stop_) cancel_ = std::move(why);
    stop_ = true;
  }
  wake(wake_fd_);
}

/// Moves new requests to queued_ and acts on cancel/stop; false once the worker must exit.
bool connection_worker::take_commands() {
  std::optional<transport_error> cancel;
  bool stop = false;
  {
    std::lock_guard lock(mutex_);
    for (auto& r : inbox_) queued_.push_back(std::move(r));
    inbox_.clear();
    cancel.swap(cancel_);
    stop = stop_;
  }
  if (cancel) {
    fail_queued(*cancel);
    drop(*cancel);
  }
  return !stop;
}

void connection_worker::run() {
  while (take_commands()) {
    // Requests whose caller has given up (deadline passed) are not sent at all.
    const auto now = steady_clock::now();
    while (!queued_.empty() && queued_.front().deadline <= now) {
      deliver(queued_.front().w, transport_error(transport_errc::timeout, "not sent before the deadline"));
      queued_.pop_front();
    }
    if (!queued_.empty() && conn_ && !same_connection(queued_.front().target, conn_target_))
      drop(transport_error(transport_errc::broker_closed, "closed by walhook: the endpoint's URL changed"));
    if (!queued_.empty() && !conn_) connect(queued_.front().deadline);
    if (conn_) publish_queued();
    if (conn_) read_frames();
    wait_for_work();
  }
  close_connection(true);
  finished_ = true;
}

void connection_worker::wait_for_work() {
  std::array<pollfd, 2> fds{{{wake_fd_, POLLIN, 0}, {-1, POLLIN, 0}}};
  int n = 1;
  if (conn_) {
    fds[1].fd = amqp_get_sockfd(conn_);
    n = 2;
  }
  // With a full window or nothing queued there is nothing to do until the broker or the
  // engine says something. Requests queued without a connection (it was just lost) go round
  // again at once: connect() either opens one or fails them all, so this never spins.
  const bool window_open = unconfirmed_.size() < std::size_t(options_.max_unconfirmed);
  const bool work = !queued_.empty() && (!conn_ || window_open);
  const bool buffered = conn_ && (amqp_frames_enqueued(conn_) || amqp_data_in_buffer(conn_));
  if (!work && !buffered) ::poll(fds.data(), n, idle_poll_ms);
  if (fds[0].revents & POLLIN) {
    std::uint64_t v;
    [[maybe_unused]] auto r = ::read(wake_fd_, &v, sizeof v);
  }
}

void connection_worker::connect(steady_clock::time_point deadline) {
  const auto& t = queued_.front().target;
  auto addresses = resolve_checked(t.host, t.port, policy_of(options_, t));
  transport_error failure;
  if (!addresses) {
    failure = addresses.error();
  } else {
    std::string tried;
    for (const auto& a : *addresses) {
      auto e = open_and_login(a.address().to_string(), deadline);
      if (!e) {
        conn_target_ = t;
        return;
      }
      // A broker that answered (refused login, no vhost) or a TLS failure is the answer; an
      // address that did not accept TCP lets the next one try.
      if (e != transport_errc::connect_failed) {
        failure = e;
        break;
      }
      tried += fmt::format("{}{}: {}", tried.empty() ? "" : "; ", address_text(a), e.detail());
      failure = transport_error(transport_errc::connect_failed, tried);
    }
  }
  fail_queued(failure);
}

/// Opens TCP (and TLS) to `address`, logs in, opens channel 1 and puts it in confirm mode.
/// On failure conn_ is null again.
transport_error connection_worker::open_and_login(const std::string& address, steady_clock::time_point deadline) {
  const auto& t = queued_.front().target;
  conn_ = amqp_new_connection();
  amqp_socket_t* socket = t.tls ? amqp_ssl_socket_new(conn_) : amqp_tcp_socket_new(conn_);
  transport_error e;
  if (!socket) e = transport_error(transport_errc::connect_failed, "cannot create a socket");
  if (!e && t.tls) e = configure_tls(socket, t.host, options_.extra_ca_pem);
  if (!e) {
    auto tv = remaining(deadline);
    const int port = std::stoi(t.port);
    if (int s = amqp_socket_open_noblock(socket, address.c_str(), port, &tv); s != AMQP_STATUS_OK) {
      e = from_status(s, transport_errc::connect_failed);
      if (t.tls && first_verify_error != X509_V_OK) e = transport_error(tls_verify_error(first_verify_error), e.detail());
    }
  }
  if (!e) {
    auto tv = remaining(deadline);
    amqp_set_handshake_timeout(conn_, &tv);
    amqp_set_rpc_timeout(conn_, &tv);
    const client_properties props("walhook endpoint " + name_);
    e = from_reply(amqp_login_with_properties(conn_, t.vhost.c_str(), 0, frame_max, heartbeat_s, &props.table,
                                              AMQP_SASL_METHOD_PLAIN, t.user.c_str(), t.password.c_str()),
                   "login");
  }
  if (!e) {
    amqp_channel_open(conn_, 1);
    e = from_reply(amqp_get_rpc_reply(conn_), "channel.open");
  }
  if (!e) {
    amqp_confirm_select(conn_, 1);
    e = from_reply(amqp_get_rpc_reply(conn_), "confirm.select");
  }
  if (e) {
    close_connection(false);
    return e;
  }
  amqp_set_rpc_timeout(conn_, nullptr);
  next_tag_ = 1;
  return {};
}

void connection_worker::publish_queued() {
  while (conn_ && !queued_.empty() && unconfirmed_.size() < std::size_t(options_.max_unconfirmed)) {
    auto r = std::move(queued_.front());
    queued_.pop_front();
    if (blocked_) {
      // Back-pressure: the broker would stall our socket; the engine pauses the endpoint.
      deliver(r.w, transport_error(transport_errc::broker_blocked, *blocked_));
      continue;
    }
    if (!same_connection(r.target, conn_target_)) {  // a new URL: reconnect first
      queued_.push_front(std::move(r));
      return;
    }
    if (!publish_one(r)) return;
  }
}

/// Sends one basic.publish; false if the connection broke (everything unconfirmed has failed).
bool connection_worker::publish_one(publish_request& r) {
  std::vector<amqp_table_entry_t> headers;
  headers.reserve(r.message.headers.size());
  for (const auto& [k, v] : r.message.headers)
    headers.push_back({bytes_of(k), {AMQP_FIELD_KIND_UTF8, {.bytes = bytes_of(v)}}});
  static const std::string json = "application/json";
  amqp_basic_properties_t p{};
  p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
             AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_HEADERS_FLAG;
  p.content_type = bytes_of(json);
  p.delivery_mode = AMQP_DELIVERY_PERSISTENT;
  p.message_id = bytes_of(r.message.message_id);
  p.timestamp = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(options_.clock->system_now().time_since_epoch()).count());
  p.headers = {static_cast<int>(headers.size()), headers.data()};
  const int s = amqp_basic_publish(conn_, 1, bytes_of(r.target.exchange),
                                   bytes_of(r.message.subject), /*mandatory=*/1, /*immediate=*/0, &p,
                                   bytes_of(r.message.body));
  if (s != AMQP_STATUS_OK) {
    auto e = from_status(s, transport_errc::broker_closed);
    deliver(r.w, e);
    drop(e, false);
    return false;
  }
  unconfirmed_.emplace(next_tag_++, unconfirmed{r.message.message_id, std::move(r.w), std::nullopt});
  return true;
}

/// Handles every frame already here, without waiting.
void connection_worker::read_frames() {
  while (conn_) {
    amqp_frame_t f;
    timeval zero{0, 0};
    const int s = amqp_simple_wait_frame_noblock(conn_, &f, &zero);
    if (s == AMQP_STATUS_TIMEOUT) return;
    if (s != AMQP_STATUS_OK) {
      drop(from_status(s, transport_errc::broker_closed), false);
      return;
    }
    on_frame(f);
    if (conn_) amqp_maybe_release_buffers(conn_);
  }
}

void connection_worker::on_frame(const amqp_frame_t& f) {
  if (f.frame_type == AMQP_FRAME_METHOD) return on_method(f);
  if (!return_) return;  // content of something we did not ask for
  if (f.frame_type == AMQP_FRAME_HEADER && !return_->have_header) {
    const auto* p = static_cast<const amqp_basic_properties_t*>(f.payload.properties.decoded);
    if (p && (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)) return_->message_id = to_string(p->message_id);
    return_->body_left = f.payload.properties.body_size;
    return_->have_header = true;
  } else if (f.frame_type == AMQP_FRAME_BODY) {
    return_->body_left -= std::min<std::uint64_t>(return_->body_left, f.payload.body_fragment.len);
  }
  if (return_->have_header && return_->body_left == 0) on_return_done();
}

void connection_worker::on_method(const amqp_frame_t& f) {
  const void* m = f.payload.method.decoded;
  switch (f.payload.method.id) {
    case AMQP_BASIC_ACK_METHOD: {
      const auto* a = static_cast<const amqp_basic_ack_t*>(m);
      return on_confirm(a->delivery_tag, a->multiple, true);
    }
    case AMQP_BASIC_NACK_METHOD: {
      const auto* n = static_cast<const amqp_basic_nack_t*>(m);
      return on_confirm(n->delivery_tag, n->multiple, false);
    }
    case AMQP_BASIC_RETURN_METHOD: {
      const auto* r = static_cast<const amqp_basic_return_t*>(m);
      return_.emplace();
      return_->why = fmt::format("{} {}: exchange '{}', routing key '{}'", r->reply_code, to_string(r->reply_text),
                                 to_string(r->exchange), to_string(r->routing_key));
      return;
    }
    case AMQP_CONNECTION_BLOCKED_METHOD: {
      const auto* b = static_cast<const amqp_connection_blocked_t*>(m);
      blocked_ = to_string(b->reason);
      fail_unconfirmed(transport_error(transport_errc::broker_blocked, *blocked_));
      return;
    }
    case AMQP_CONNECTION_UNBLOCKED_METHOD:
      blocked_.reset();
      return;
    case AMQP_CHANNEL_CLOSE_METHOD: {
      // e.g. 404 "NOT_FOUND - no exchange 'x' in vhost '/'": the channel is gone and with it
      // every unconfirmed publish. Answer close-ok, then start afresh on the next publish.
      const auto* c = static_cast<const amqp_channel_close_t*>(m);
      const transport_error e(transport_errc::broker_refused, to_string(c->reply_text));
      amqp_channel_close_ok_t ok{};
      amqp_send_method(conn_, f.channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
      return drop(e);
    }
    case AMQP_CONNECTION_CLOSE_METHOD: {
      const auto* c = static_cast<const amqp_connection_close_t*>(m);
      const transport_error e(transport_errc::broker_refused, to_string(c->reply_text));
      amqp_connection_close_ok_t ok{};
      amqp_send_method(conn_, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
      fail_unconfirmed(e);
      return close_connection(false);
    }
    default:
      return;
  }
}

/// Basic.Ack / Basic.Nack for `tag` (and, with `multiple`, every earlier one).
void connection_worker::on_confirm(std::uint64_t tag, bool multiple, bool ack) {
  auto first = multiple ? unconfirmed_.begin() : unconfirmed_.find(tag);
  auto last = unconfirmed_.upper_bound(tag);
  if (!multiple && first == unconfirmed_.end()) return;  // failed already (blocked, deadline)
  if (!multiple) last = std::next(first);
  for (auto it = first; it != last; ++it) {
    auto& u = it->second;
    if (!ack)
      deliver(u.w, transport_error(transport_errc::broker_nacked, "the broker could not store the message"));
    else if (u.returned)
      deliver(u.w, transport_error(transport_errc::broker_unroutable, *u.returned));
    else
      deliver(u.w, confirmed());
  }
  unconfirmed_.erase(first, last);
}

/// A Basic.Return (mandatory, no queue) comes before the Ack of the same publish: mark the
/// oldest unconfirmed publish with that message_id, and its Ack becomes broker_unroutable.
void connection_worker::on_return_done() {
  for (auto& [tag, u] : unconfirmed_)
    if (!u.returned && u.message_id == return_->message_id) {
      u.returned = return_->why;
      break;
    }
  return_.reset();
}

void connection_worker::fail_unconfirmed(const transport_error& why) {
  for (auto& [tag, u] : unconfirmed_) deliver(u.w, why);
  unconfirmed_.clear();
}

void connection_worker::fail_queued(const transport_error& why) {
  for (auto& r : queued_) deliver(r.w, why);
  queued_.clear();
}

void connection_worker::drop(const transport_error& why, bool polite) {
  fail_unconfirmed(why);
  close_connection(polite);
}

void connection_worker::close_connection(bool polite) {
  if (!conn_) return;
  if (polite) {
    timeval tv{std::chrono::duration_cast<std::chrono::seconds>(close_timeout).count(), 0};
    amqp_set_rpc_timeout(conn_, &tv);
    amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
  }
  amqp_destroy_connection(conn_);
  conn_ = nullptr;
  return_.reset();
  blocked_.reset();
}

}  // namespace walhook::delivery::amqp_detail
