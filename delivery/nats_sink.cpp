#include "delivery/nats_sink.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <nats/nats.h>
#include <simdjson.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace walhook::delivery {
namespace asio = boost::asio;
using std::chrono::milliseconds;

// How a publish travels (plain TCP; a nats+tls:// connection keeps nats.c's reader and flusher
// threads, see connect_blocking):
//   engine: natsConnection_PublishMsg appends HPUB (reply subject <inbox>.<seq>) to nats.c's
//     buffer and asks for a write event; the engine's reactor finds the socket writable after
//     the publishes queued in the same turn: one natsConnection_ProcessWriteEvent, one write(2)
//   engine: the socket is readable → natsConnection_ProcessReadEvent parses a batch of PubAcks
//   nats.c's delivery thread (one for all connections): parses each PubAck; the first of a
//     batch wakes the engine, which completes every attempt whose PubAck arrived by then.
// A subscription of nats.c's that the engine drains itself would save that hand-off, but its
// NextMsg swallows JetStream's "no responders" reply (the only sign that no stream covers a
// subject) without saying which publish it answered.
// nats.c's other threads are its shared timer (PINGs every 2 minutes) and callback thread (the
// closed callback). Connecting, TLS and login stay blocking, on a thread per connect.
//
// One connection per server: every endpoint whose URL names the same host, port, credentials
// and TLS shares it, so a hundred endpoints on one nats-server are one socket, one write per
// engine turn and one read per batch of PubAcks.

namespace {

/// One attempt (or one wait for a connection) parked on the engine's executor until its result
/// arrives or its timer — armed with the deadline — fires.
struct pending_call {
  explicit pending_call(asio::any_io_executor ex) : timer(std::move(ex)) {}
  asio::steady_timer timer;
  std::optional<post_result> result;
  void complete(post_result r) {
    if (result) return;
    result = std::move(r);
    timer.cancel();
  }
};

/// One connection to one server. nats.c calls back with this object (its closure and its
/// event-loop "loop"), so it is never freed while the library may still call: see graveyard().
struct link : std::enable_shared_from_this<link> {
  asio::any_io_executor ex;
  std::thread::id engine_thread;  ///< callbacks from it run inline, the others are posted
  std::shared_ptr<std::atomic<std::uint64_t>> duplicates;
  /// Set by the connect thread before handed_over; the engine calls into nc only after that
  /// and until dead.
  natsConnection* nc = nullptr;
  natsSubscription* replies = nullptr;  ///< <inbox>.*: PubAcks, on nats.c's delivery thread
  std::string inbox;

  // The engine thread only (the connect thread writes them before it posts the hand-over).
  bool handed_over = false;  ///< the connect thread is done with nc
  bool dead = false;         ///< detached or retired: never call into nc again
  bool closed = false;       ///< no new publishes
  bool retired = false;      ///< retire() ran: the connection is being (or was) closed
  /// Set by the sink's destructor: nats.c's threads may still call back (a closed callback, a
  /// late reply), but the engine's executor may be gone; they post nothing any more.
  std::mutex post_mutex;
  bool orphaned = false;  ///< under post_mutex
  bool want_read = false, want_write = false, reading = false, writing = false;
  std::optional<asio::posix::stream_descriptor> socket;  ///< a dup(2) of nats.c's socket
  std::uint64_t next_seq = 0;
  std::unordered_map<std::uint64_t, std::shared_ptr<pending_call>> pending;

  /// Fails every unconfirmed publish with `e`.
  void fail_all(const transport_error& e) {
    auto taken = std::exchange(pending, {});
    for (auto& [seq, call] : taken) call->complete(e);
  }

  /// Runs `f` on the engine: inline when nats.c calls from the engine's own thread (then under
  /// the connection's lock: `f` must not call nats.c), posted from any other.
  template <class F>
  void on_engine(F f) {
    if (std::this_thread::get_id() == engine_thread)
      f();
    else
      post_from_library(std::move(f));
  }

  /// From one of nats.c's threads: runs `f` on the engine, unless the sink is gone.
  template <class F>
  void post_from_library(F f) {
    std::lock_guard lock(post_mutex);
    if (orphaned) return;
    asio::post(ex, [self = shared_from_this(), f = std::move(f)]() mutable { f(); });
  }

  /// Waits for what nats.c asked for (reading always, writing while its buffer holds data).
  void arm() {
    if (!handed_over || dead || !socket) return;
    if (want_read && !reading) {
      reading = true;
      socket->async_wait(asio::posix::descriptor_base::wait_read, [self = shared_from_this()](boost::system::error_code) {
        self->reading = false;
        if (self->dead) return;
        natsConnection_ProcessReadEvent(self->nc);
        if (natsConnection_IsClosed(self->nc)) self->lost();
        self->arm();
      });
    }
    if (want_write && !writing) {
      writing = true;
      socket->async_wait(asio::posix::descriptor_base::wait_write, [self = shared_from_this()](boost::system::error_code) {
        self->writing = false;
        if (self->dead) return;
        natsConnection_ProcessWriteEvent(self->nc);
        if (natsConnection_IsClosed(self->nc)) self->lost();
        self->arm();
      });
    }
  }

  /// The connection closed under us (the server went away, a write failed, PINGs unanswered).
  void lost() {
    if (closed) return;
    closed = true;
    fail_all({transport_errc::broker_closed, "the NATS connection closed"});
  }

  /// Stops watching the socket; nats.c closes its own descriptor.
  void stop_watching() {
    dead = true;
    if (socket) {
      boost::system::error_code ignored;
      socket->close(ignored);  // pending waits complete with operation_aborted and see `dead`
    }
  }

  /// PubAcks taken off nats.c's delivery thread, waiting for the engine (under replies_mutex).
  std::mutex replies_mutex;
  std::vector<std::pair<std::uint64_t, post_result>> arrived;

  /// On nats.c's delivery thread: one reply. The first of a batch wakes the engine, which takes
  /// all that arrived by then (one hand-off per batch, not per message).
  void reply(natsMsg* m) {
    const std::string_view subject = natsMsg_GetSubject(m);
    std::uint64_t seq = 0;
    if (const auto dot = subject.rfind('.'); dot != std::string_view::npos)
      std::from_chars(subject.data() + dot + 1, subject.data() + subject.size(), seq);
    post_result r = result_of(m);
    bool wake = false;
    {
      std::lock_guard lock(replies_mutex);
      wake = arrived.empty();
      arrived.emplace_back(seq, std::move(r));
    }
    if (wake) post_from_library([this] { take_replies(); });  // post_from_library holds the link
  }

  /// On the engine: completes the attempts whose PubAcks arrived.
  void take_replies() {
    std::vector<std::pair<std::uint64_t, post_result>> taken;
    {
      std::lock_guard lock(replies_mutex);
      taken.swap(arrived);
    }
    for (auto& [seq, r] : taken) {
      auto it = pending.find(seq);
      if (it == pending.end()) continue;  // its attempt already timed out
      auto call = std::move(it->second);
      pending.erase(it);
      call->complete(std::move(r));
    }
  }

  /// A PubAck (JetStream's reply to a publish: {"stream":"S","seq":N[,"duplicate":true]} or
  /// {"error":{"code":C,"err_code":E,"description":"…"}}), or a status-only reply (503: no
  /// stream listens on the subject).
  post_result result_of(natsMsg* m) {
    const char* status = nullptr;
    if (natsMsgHeader_Get(m, "Status", &status) == NATS_OK && status != nullptr) {
      if (std::string_view(status).starts_with("503")) return transport_error(transport_errc::no_stream);
      const char* description = nullptr;
      natsMsgHeader_Get(m, "Description", &description);
      return transport_error(transport_errc::broker_refused,
                             fmt::format("status {}{}{}", status, description != nullptr ? " " : "",
                                         description != nullptr ? description : ""));
    }
    const auto bad = [&] {
      return transport_error(transport_errc::broker_refused,
                             fmt::format("not a PubAck: {:.200}", std::string_view(natsMsg_GetData(m),
                                                                                  natsMsg_GetDataLength(m))));
    };
    thread_local simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m))).get(doc)) return bad();
    if (simdjson::dom::object error; !doc["error"].get(error)) {
      std::string_view description = "refused";
      std::int64_t code = 0;
      if (error["description"].get(description)) description = "refused";
      if (error["err_code"].get(code)) code = 0;
      return transport_error(transport_errc::broker_refused,
                             code != 0 ? fmt::format("{} (JetStream error {})", description, code) : std::string(description));
    }
    if (std::string_view stream; doc["stream"].get(stream)) return bad();
    if (bool dup = false; !doc["duplicate"].get(dup) && dup) ++*duplicates;  // any thread: atomic
    http_response ok;
    ok.status = 200;
    return ok;
  }
};

/// Links that had a connection. nats.c may call a closed connection's callbacks after
/// natsConnection_Destroy returns (its callback thread holds a reference), so their closure
/// lives until the process ends: one small object per connection ever opened. Never destroyed,
/// not even by exit(): nats.c's threads still run while static objects are destroyed, and a
/// late closed callback found its link freed (std::bad_weak_ptr, an abort after shutdown.done).
std::vector<std::shared_ptr<link>>& graveyard() {
  static auto* links = new std::vector<std::shared_ptr<link>>;  // leaked on purpose
  return *links;
}
std::mutex graveyard_mutex;

void bury(const std::shared_ptr<link>& l) {
  std::lock_guard lock(graveyard_mutex);
  graveyard().push_back(l);
}

// nats.c's event-loop callbacks (natsOptions_SetEventLoop); "loop" and "userData" are the link.

natsStatus ev_attach(void** user, void* loop, natsConnection*, natsSock fd) {
  auto* l = static_cast<link*>(loop);
  // A descriptor of our own: nats.c closes its socket from any thread, and a closed descriptor
  // number can be reused at once; the reactor must never watch a number it does not own.
  const int mine = ::dup(fd);
  if (mine < 0) return NATS_SYS_ERROR;
  boost::system::error_code ec;
  l->socket.emplace(l->ex);
  l->socket->assign(mine, ec);
  if (ec) {
    ::close(mine);
    l->socket.reset();
    return NATS_SYS_ERROR;
  }
  l->want_read = true;  // attached means read (nats.c never asks to add reading)
  *user = l;
  return NATS_OK;
}

natsStatus ev_read(void* user, bool add) {
  auto* l = static_cast<link*>(user);
  l->on_engine([l, add] {
    l->want_read = add;
    l->arm();
  });
  return NATS_OK;
}

natsStatus ev_write(void* user, bool add) {
  auto* l = static_cast<link*>(user);
  l->on_engine([l, add] {
    l->want_write = add;
    l->arm();
  });
  return NATS_OK;
}

natsStatus ev_detach(void* user) {
  auto* l = static_cast<link*>(user);
  l->on_engine([l] { l->stop_watching(); });
  return NATS_OK;
}

/// nats.c, on its callback thread: the connection closed.
void on_closed(natsConnection*, void* closure) {
  auto* l = static_cast<link*>(closure);
  l->post_from_library([l] { l->lost(); });  // post_from_library holds the link while posted
}

/// nats.c, on its delivery thread: a reply on the link's inbox.
void on_reply(natsConnection*, natsSubscription*, natsMsg* m, void* closure) {
  static_cast<link*>(closure)->reply(m);
  natsMsg_Destroy(m);
}

transport_error connect_error(natsStatus s, const std::string& where) {
  const char* last = nats_GetLastError(nullptr);
  std::string detail = where + ": " + (last != nullptr && *last != '\0' ? last : natsStatus_GetText(s));
  switch (s) {
    case NATS_TIMEOUT: return {transport_errc::timeout, detail};
    case NATS_SSL_ERROR: return {transport_errc::tls_failed, detail};
    case NATS_NOT_PERMITTED:
    case NATS_CONNECTION_AUTH_FAILED: return {transport_errc::broker_refused, "login refused: " + detail};
    default: return {transport_errc::connect_failed, detail};
  }
}

/// On a connect thread: resolves (SSRF guard), connects to the first address that accepts, and
/// subscribes to the link's reply inbox. The engine has not seen `l` yet.
boost::system::result<void, transport_error> connect_blocking(const std::shared_ptr<link>& l, const broker_target& t,
                                                              const broker_sink_options& o, milliseconds timeout) {
  auto addresses = resolve_checked(t.host, t.port, policy_of(o, t));
  if (!addresses) return addresses.error();
  transport_error last;
  for (const auto& a : *addresses) {
    const std::string ip = a.address().is_v6() ? "[" + a.address().to_string() + "]" : a.address().to_string();
    const std::string where = fmt::format("{}:{}", ip, a.port());
    natsOptions* opts = nullptr;
    natsStatus s = natsOptions_Create(&opts);
    if (s == NATS_OK) s = natsOptions_SetURL(opts, fmt::format("nats://{}", where).c_str());
    if (s == NATS_OK) s = natsOptions_SetTimeout(opts, std::max<std::int64_t>(timeout.count(), 1));
    if (s == NATS_OK) s = natsOptions_SetAllowReconnect(opts, false);
    if (s == NATS_OK) s = natsOptions_SetClosedCB(opts, on_closed, l.get());
    // Plain TCP on the engine's reactor. Not TLS: nats.c's TLS reads and writes wait for the
    // socket in poll(2) with no deadline when OpenSSL wants more (comsock.c, natsSock_Read/Write),
    // which would freeze the engine for as long as a stalled server does; a TLS connection keeps
    // nats.c's own reader and flusher threads (and the PubAcks' hand-off, as below).
    if (s == NATS_OK && !t.tls) s = natsOptions_SetEventLoop(opts, l.get(), ev_attach, ev_read, ev_write, ev_detach);
    if (s == NATS_OK && !t.tls) s = natsOptions_SetSendAsap(opts, true);  // no flusher thread: the engine writes
    // On those threads a publish larger than what nats.c's 32 KiB buffer still holds is written in
    // place, on the engine's thread: with a server that stopped reading, that write waits at most
    // this long, then the connection closes (nats.c shuts the socket down) and attempts fail over
    // to retries, instead of the engine waiting for as long as the server does.
    if (s == NATS_OK && t.tls) s = natsOptions_SetWriteDeadline(opts, 1000);
    // A server that stops reading (SIGSTOP, a hung host) is found within ~30 s: PING every 10 s,
    // the connection closed after 3 unanswered (nats.c's defaults: 2 minutes, 2).
    if (s == NATS_OK) s = natsOptions_SetPingInterval(opts, 10'000);
    if (s == NATS_OK) s = natsOptions_SetMaxPingsOut(opts, 3);
    if (s == NATS_OK) s = natsOptions_UseGlobalMessageDelivery(opts, true);  // one delivery thread for all
    if (s == NATS_OK && !t.user.empty())
      s = t.password.empty() ? natsOptions_SetToken(opts, t.user.c_str())
                             : natsOptions_SetUserInfo(opts, t.user.c_str(), t.password.c_str());
    if (s == NATS_OK && t.tls) {
      s = natsOptions_SetSecure(opts, true);
      if (s == NATS_OK) s = natsOptions_SetExpectedHostname(opts, t.host.c_str());
      if (s == NATS_OK && !o.extra_ca_pem.empty()) s = natsOptions_SetCATrustedCertificates(opts, o.extra_ca_pem.c_str());
    }
    if (s == NATS_OK) s = natsConnection_Connect(&l->nc, opts);
    natsOptions_Destroy(opts);
    if (s != NATS_OK) {
      last = connect_error(s, where);
      l->nc = nullptr;
      continue;
    }
    bury(l);  // from here nats.c may call back at any time
    natsInbox* inbox = nullptr;
    s = natsInbox_Create(&inbox);
    if (s == NATS_OK) {
      l->inbox = inbox;
      natsInbox_Destroy(inbox);
      s = natsConnection_Subscribe(&l->replies, l->nc, (l->inbox + ".*").c_str(), on_reply, l.get());
    }
    if (s == NATS_OK) s = natsSubscription_SetPendingLimits(l->replies, -1, -1);  // the window bounds it
    if (s == NATS_OK) return {};
    // Connected but cannot subscribe (permissions): the server's answer, not the address's.
    // The link is not reused for another address (its callbacks may still be on their way).
    auto e = connect_error(s, where);
    natsSubscription_Destroy(l->replies);
    l->replies = nullptr;
    natsConnection_Close(l->nc);  // the engine never touched it (not handed over)
    natsConnection_Destroy(l->nc);
    l->nc = nullptr;
    return e;
  }
  return last;
}

/// Endpoints that name the same server, credentials and TLS share one connection — never one
/// the SSRF guard let reach a private address with one it would not have (private_network_allowed).
std::string server_key(const broker_target& t) {
  return fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", t.tls ? "tls" : "tcp", t.host, t.port, t.user, t.password,
                     t.private_network_allowed ? "private" : "guarded");
}

}  // namespace

struct nats_sink::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor e, broker_sink_options o)
      : ex(std::move(e)), options(std::move(o)), pool(static_cast<std::size_t>(std::max(options.blocking_threads, 1))) {}

  /// One server's connection (engine thread only).
  struct server {
    broker_target target;
    std::shared_ptr<link> live;
    std::shared_ptr<link> connecting;                    ///< the connect under way, if any
    std::vector<std::shared_ptr<pending_call>> waiting;  ///< for the connection being opened
    std::unordered_set<std::string> users;               ///< pool keys (endpoints) on it
  };

  asio::any_io_executor ex;
  broker_sink_options options;
  asio::thread_pool pool;  ///< closes connections (natsConnection_Close may flush for 500 ms)
  std::unordered_map<std::string, server> servers;      ///< by server_key
  std::unordered_map<std::string, std::string> server_of;  ///< pool key → server_key
  std::vector<std::shared_ptr<link>> created;  ///< every link this sink made (the destructor frees them)
  std::thread::id engine_thread;
  bool engine_known = false;
  std::shared_ptr<std::atomic<std::uint64_t>> duplicates = std::make_shared<std::atomic<std::uint64_t>>(0);
  bool stopped = false;
  /// Connections no endpoint uses any more (URL changes, forget()): closed once their
  /// publishes had the time to be confirmed, so an operator's change is not a failure streak.
  std::vector<std::shared_ptr<link>> draining;
  static constexpr std::chrono::seconds drain_grace{10};
  /// Threads opening a connection (one per server at most): the destructor waits for them.
  std::mutex connect_mutex;
  std::condition_variable connect_done;
  int connecting = 0;

  /// Published messages, destroyed together once the engine's turn is over: natsMsg_Destroy
  /// hands each message to nats.c's garbage-collector thread and wakes it; one wake per batch
  /// instead of one per publish (perf: that thread took 12 % of walhook's samples at 5,000/s).
  std::vector<natsMsg*> garbage;
  void dispose(natsMsg* msg) {
    garbage.push_back(msg);
    if (garbage.size() == 1) asio::post(ex, [self = shared_from_this()] { self->collect(); });
  }
  void collect() {
    for (natsMsg* m : garbage) natsMsg_Destroy(m);
    garbage.clear();
  }

  /// Closes `l` once: its unconfirmed publishes fail with broker_closed; a sink thread closes
  /// the nats.c connection (Close flushes and may wait 500 ms for a PONG, which the engine still
  /// reads meanwhile), then the engine stops watching it and frees it.
  void retire(std::shared_ptr<link> l) {
    if (!l || l->retired) return;
    l->retired = true;
    l->closed = true;
    l->fail_all({transport_errc::broker_closed, "the connection was closed by walhook"});
    if (l->nc == nullptr) {
      l->stop_watching();
      return;
    }
    asio::post(pool, [l] {
      natsConnection_Close(l->nc);
      l->post_from_library([l] { free_link(*l); });
    });
  }

  /// On the engine (or in the destructor, once no other thread runs): stops watching `l` and
  /// frees its nats.c objects.
  static void free_link(link& l) {
    l.stop_watching();
    l.socket.reset();
    if (l.nc == nullptr) return;
    natsConnection_Close(l.nc);  // no-op if closed
    natsSubscription_Destroy(l.replies);
    natsConnection_Destroy(l.nc);
    l.replies = nullptr;
    l.nc = nullptr;
  }

  /// Stops new publishes on `l` now and closes it after drain_grace.
  void retire_later(std::shared_ptr<link> l) {
    if (!l) return;
    draining.push_back(l);
    auto timer = std::make_shared<asio::steady_timer>(ex, drain_grace);
    timer->async_wait([self = shared_from_this(), l, timer](boost::system::error_code) {
      std::erase(self->draining, l);
      self->retire(l);
    });
  }

  /// Removes `pool_key` from its server; the server's connection drains when nobody is left.
  void leave(const std::string& pool_key) {
    auto it = server_of.find(pool_key);
    if (it == server_of.end()) return;
    auto sv = servers.find(it->second);
    server_of.erase(it);
    if (sv == servers.end()) return;
    sv->second.users.erase(pool_key);
    if (!sv->second.users.empty()) return;
    retire_later(std::exchange(sv->second.live, nullptr));
    for (auto& w : sv->second.waiting) w->complete(transport_error(transport_errc::cancelled));
    servers.erase(sv);
  }

  /// Opens a connection for server `key` on a thread of its own; its waiters hear the result.
  void start_connect(const std::string& key, const broker_target& t, milliseconds timeout) {
    auto l = std::make_shared<link>();
    l->ex = ex;
    l->engine_thread = engine_thread;
    l->duplicates = duplicates;
    created.push_back(l);
    servers[key].connecting = l;
    {
      std::lock_guard lock(connect_mutex);
      ++connecting;
    }
    // A thread of its own: a server that never answers holds it until the deadline, and never
    // another server's connect (a shared pool would let a few dead servers starve the rest).
    std::thread([self = shared_from_this(), key, t, timeout, l] {
      auto r = connect_blocking(l, t, self->options, timeout);
      asio::post(self->ex, [self, key, t, l, r] { self->connected(key, t, l, r); });
      std::lock_guard lock(self->connect_mutex);
      --self->connecting;
      self->connect_done.notify_all();
    }).detach();
  }

  void connected(const std::string& key, const broker_target&, std::shared_ptr<link> l,
                 boost::system::result<void, transport_error> r) {
    if (r) {
      l->handed_over = true;
      l->arm();
    }
    auto it = servers.find(key);
    // Only the connect this server waits for: the server may have been left (forget, a URL
    // change) and asked for again while this one was still connecting.
    const bool wanted = !stopped && it != servers.end() && it->second.connecting == l;
    if (!wanted) {
      if (r) retire(l);
      return;
    }
    server& s = it->second;
    s.connecting = nullptr;
    if (r) s.live = l;
    post_result outcome = r ? post_result(http_response{}) : post_result(r.error());
    for (auto& w : s.waiting) w->complete(outcome);
    s.waiting.clear();
  }
};

nats_sink::nats_sink(asio::any_io_executor ex, broker_sink_options options)
    : impl_(std::make_shared<impl>(std::move(ex), std::move(options))) {}

nats_sink::~nats_sink() {
  shutdown();
  {
    std::unique_lock lock(impl_->connect_mutex);
    impl_->connect_done.wait(lock, [this] { return impl_->connecting == 0; });
  }
  impl_->pool.join();
  impl_->collect();
  // No thread of ours runs now, and the engine's executor may not outlive us: nats.c's threads
  // post nothing more, and nothing of the reactor's stays in the graveyard.
  for (auto& l : impl_->created) {
    {
      std::lock_guard lock(l->post_mutex);
      l->orphaned = true;
    }
    l->pending.clear();
    impl::free_link(*l);
  }
}

asio::awaitable<post_result> nats_sink::async_post(const std::string&, const http_target&, const http_request&) {
  co_return transport_error(transport_errc::sink_unavailable, "a NATS sink publishes, it does not POST");
}

asio::awaitable<post_result> nats_sink::async_publish(const std::string& pool_key, const broker_target& target,
                                                      const broker_message& message, milliseconds deadline) {
  auto self = impl_;
  const clock_source& clock = *self->options.clock;
  const auto start = clock.steady_now();
  auto remaining = [&] {
    return std::max(std::chrono::duration_cast<milliseconds>(start + deadline - clock.steady_now()), milliseconds{0});
  };
  if (self->stopped) co_return transport_error(transport_errc::cancelled);
  if (!self->engine_known) {  // before any connect thread starts: they all see it
    self->engine_thread = std::this_thread::get_id();
    self->engine_known = true;
  }

  const std::string key = server_key(target);
  if (auto it = self->server_of.find(pool_key); it == self->server_of.end() || it->second != key) {
    self->leave(pool_key);  // a new endpoint, or its URL changed: the old connection may drain
    self->server_of[pool_key] = key;
    auto& fresh = self->servers[key];
    fresh.target = target;
    fresh.users.insert(pool_key);
  }
  auto& s = self->servers[key];
  if (!s.live || s.live->closed) {
    if (s.live) self->retire(std::exchange(s.live, nullptr));
    auto wait = std::make_shared<pending_call>(self->ex);
    wait->timer.expires_after(remaining());
    s.waiting.push_back(wait);
    if (!s.connecting) self->start_connect(key, target, deadline);  // the first waiter's deadline, whole
    co_await wait->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!wait->result)
      co_return transport_error(transport_errc::timeout, fmt::format("connecting to {}:{}", target.host, target.port));
    if (!*wait->result) co_return wait->result->error();
  }
  if (self->stopped) co_return transport_error(transport_errc::cancelled);
  auto sv = self->servers.find(key);
  std::shared_ptr<link> l = sv != self->servers.end() ? sv->second.live : nullptr;
  if (!l || l->closed) co_return transport_error(transport_errc::broker_closed, "the NATS connection closed");
  // The pipelined window: options.max_unconfirmed per endpoint on the connection.
  if (l->pending.size() >= static_cast<std::size_t>(self->options.max_unconfirmed) * std::max<std::size_t>(sv->second.users.size(), 1))
    co_return transport_error(transport_errc::timeout, "too many unconfirmed publishes on the connection");

  const std::uint64_t seq = ++l->next_seq;
  const std::string reply = fmt::format("{}.{}", l->inbox, seq);
  natsMsg* msg = nullptr;
  natsStatus st = natsMsg_Create(&msg, message.subject.c_str(), reply.c_str(), message.body.data(),
                                 static_cast<int>(message.body.size()));
  for (const auto& [name, value] : message.headers)
    if (st == NATS_OK) st = natsMsgHeader_Set(msg, name.c_str(), value.c_str());
  if (st == NATS_OK) st = natsMsgHeader_Set(msg, "Content-Type", "application/json");
  if (st == NATS_OK) st = natsMsgHeader_Set(msg, "Nats-Msg-Id", message.message_id.c_str());  // JetStream's dedupe key
  if (st != NATS_OK) {
    natsMsg_Destroy(msg);
    co_return transport_error(transport_errc::bad_message, natsStatus_GetText(st));
  }
  st = natsConnection_PublishMsg(l->nc, msg);
  self->dispose(msg);
  if (st == NATS_MAX_PAYLOAD)
    co_return transport_error(transport_errc::bad_message, "the message is larger than the server's max_payload");
  if (st == NATS_CONNECTION_CLOSED) {
    l->lost();
    co_return transport_error(transport_errc::broker_closed);
  }
  if (st != NATS_OK) co_return transport_error(transport_errc::broker_refused, natsStatus_GetText(st));

  auto call = std::make_shared<pending_call>(self->ex);
  call->timer.expires_after(remaining());
  l->pending[seq] = call;
  co_await call->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  if (!call->result) {
    l->pending.erase(seq);
    co_return transport_error(transport_errc::timeout, "no PubAck from JetStream");
  }
  post_result r = std::move(*call->result);
  if (r) r->elapsed = std::chrono::duration_cast<std::chrono::microseconds>(clock.steady_now() - start);
  if (!r && r.error() == transport_errc::no_stream && r.error().detail().empty())
    r = transport_error(transport_errc::no_stream, fmt::format("subject {}", message.subject));
  co_return r;
}

void nats_sink::forget(const std::string& pool_key) {
  // Inline when the engine calls (it does, on an endpoint change): posted, it could run after an
  // attempt already joined the endpoint's new server and cancel that attempt's wait for its connect.
  asio::dispatch(impl_->ex, [self = impl_, pool_key] { self->leave(pool_key); });
}

void nats_sink::shutdown() {
  impl_->stopped = true;
  cancel_all();
}

void nats_sink::cancel_all() {
  for (auto& [key, s] : impl_->servers) {
    if (s.live) s.live->fail_all(transport_error(transport_errc::cancelled));
    for (auto& w : s.waiting) w->complete(transport_error(transport_errc::cancelled));
    s.waiting.clear();
    if (impl_->stopped) impl_->retire(std::exchange(s.live, nullptr));
  }
  for (auto& l : impl_->draining) l->fail_all(transport_error(transport_errc::cancelled));
  if (impl_->stopped) {
    for (auto& l : impl_->draining) impl_->retire(l);
    impl_->draining.clear();
  }
}

std::uint64_t nats_sink::duplicates() const { return impl_->duplicates->load(); }

}  // namespace walhook::delivery
