#include "delivery/nats_sink.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <nats/nats.h>

#include <atomic>
#include <condition_variable>
#include <thread>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace walhook::delivery {
namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

/// One attempt (or one wait for a connection) parked on the engine's executor until its result
/// is posted back or its timer — armed with the deadline — fires.
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

/// One connection, shared with nats.c's callbacks (their closure). Never freed while the
/// library may still call back: retired links go to graveyard().
struct link {
  asio::any_io_executor ex;
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  std::atomic<bool> closed{false};
  std::shared_ptr<std::atomic<std::uint64_t>> duplicates;
  std::mutex m;
  std::unordered_map<natsMsg*, std::shared_ptr<pending_call>> pending;  ///< under m

  /// Fails every unconfirmed publish with `e` (any thread).
  void fail_all(const transport_error& e) {
    std::unordered_map<natsMsg*, std::shared_ptr<pending_call>> taken;
    {
      std::lock_guard lock(m);
      taken.swap(pending);
    }
    for (auto& [msg, call] : taken) asio::post(ex, [call = call, e] { call->complete(e); });
  }
};

/// Links whose connection was closed. nats.c may call a closed connection's callbacks after
/// natsConnection_Destroy returns (its own threads hold references), so their closure lives on
/// until the process ends; one small object per connection ever opened.
std::vector<std::shared_ptr<link>>& graveyard() {
  static std::vector<std::shared_ptr<link>> links;
  return links;
}
std::mutex graveyard_mutex;

/// nats.c, on its connection's thread: the connection closed (the server went away; walhook
/// turned reconnection off) or was closed by walhook.
void on_closed(natsConnection*, void* closure) {
  auto* l = static_cast<link*>(closure);
  l->closed = true;
  l->fail_all({transport_errc::broker_closed, "the NATS connection closed"});
}

/// nats.c, on its delivery thread: the PubAck (or the error) of one asynchronous publish.
void on_ack(jsCtx*, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
  auto* l = static_cast<link*>(closure);
  std::shared_ptr<pending_call> call;
  {
    std::lock_guard lock(l->m);
    auto it = l->pending.find(msg);
    if (it == l->pending.end()) return;  // its attempt already timed out
    call = std::move(it->second);
    l->pending.erase(it);
  }
  post_result r = transport_error(transport_errc::broker_refused);
  if (pae == nullptr) {
    if (pa != nullptr && pa->Duplicate) ++*l->duplicates;
    http_response ok;
    ok.status = 200;
    r = ok;
  } else if (pae->Err == NATS_NO_RESPONDERS) {
    r = transport_error(transport_errc::no_stream, fmt::format("subject {}", natsMsg_GetSubject(msg)));
  } else if (pae->Err == NATS_TIMEOUT) {
    r = transport_error(transport_errc::timeout, "no PubAck from JetStream");
  } else if (pae->Err == NATS_CONNECTION_CLOSED) {
    r = transport_error(transport_errc::broker_closed);
  } else {
    const char* text = pae->ErrText != nullptr ? pae->ErrText : natsStatus_GetText(pae->Err);
    r = transport_error(transport_errc::broker_refused,
                        pae->ErrCode != 0 ? fmt::format("{} (JetStream error {})", text, static_cast<int>(pae->ErrCode))
                                          : std::string(text));
  }
  asio::post(l->ex, [call = std::move(call), r = std::move(r)] { call->complete(r); });
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

/// On a sink thread: resolves (SSRF guard), connects to the first address that accepts, and
/// opens the JetStream context whose acks call on_ack with `l`.
boost::system::result<void, transport_error> connect_blocking(link& l, const broker_target& t,
                                                              const broker_sink_options& o, milliseconds timeout) {
  auto addresses = resolve_checked(t.host, t.port, o.allow_private_networks);
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
    if (s == NATS_OK) s = natsOptions_SetClosedCB(opts, on_closed, &l);
    if (s == NATS_OK) s = natsOptions_UseGlobalMessageDelivery(opts, true);
    if (s == NATS_OK && !t.user.empty())
      s = t.password.empty() ? natsOptions_SetToken(opts, t.user.c_str())
                             : natsOptions_SetUserInfo(opts, t.user.c_str(), t.password.c_str());
    if (s == NATS_OK && t.tls) {
      s = natsOptions_SetSecure(opts, true);
      if (s == NATS_OK) s = natsOptions_SetExpectedHostname(opts, t.host.c_str());
      if (s == NATS_OK && !o.extra_ca_pem.empty()) s = natsOptions_SetCATrustedCertificates(opts, o.extra_ca_pem.c_str());
    }
    if (s == NATS_OK) s = natsConnection_Connect(&l.nc, opts);
    natsOptions_Destroy(opts);
    if (s != NATS_OK) {
      last = connect_error(s, where);
      l.nc = nullptr;
      continue;
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = o.max_unconfirmed;
    jo.PublishAsync.AckHandler = on_ack;
    jo.PublishAsync.AckHandlerClosure = &l;
    jo.PublishAsync.StallWait = 1;  // a full window fails the publish at once, never blocks the engine
    s = natsConnection_JetStream(&l.js, l.nc, &jo);
    if (s == NATS_OK) return {};
    last = connect_error(s, where);
    natsConnection_Destroy(l.nc);
    l.nc = nullptr;
  }
  return last;
}

}  // namespace

struct nats_sink::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor e, broker_sink_options o)
      : ex(std::move(e)), options(std::move(o)), pool(static_cast<std::size_t>(std::max(options.blocking_threads, 1))) {}

  /// One endpoint's connection (engine thread only).
  struct slot {
    broker_target target;
    std::shared_ptr<link> live;
    bool connecting = false;
    std::vector<std::shared_ptr<pending_call>> waiting;  ///< for the connection being opened
  };

  asio::any_io_executor ex;
  broker_sink_options options;
  asio::thread_pool pool;
  std::unordered_map<std::string, slot> slots;
  std::shared_ptr<std::atomic<std::uint64_t>> duplicates = std::make_shared<std::atomic<std::uint64_t>>(0);
  bool stopped = false;
  /// Connections left after a URL change or forget(): closed once their publishes had the time
  /// to be confirmed (drain_grace), so an operator's change is not a failure streak.
  std::vector<std::shared_ptr<link>> draining;
  static constexpr std::chrono::seconds drain_grace{10};
  /// Threads opening a connection (one per endpoint at most): the destructor waits for them.
  /// broker_sink_options::blocking_threads sizes `pool`, which only closes connections here.
  std::mutex connect_mutex;
  std::condition_variable connect_done;
  int connecting = 0;

  /// Closes `l` on a sink thread (natsConnection_Close flushes and may block) and keeps it in
  /// the graveyard; its unconfirmed publishes fail with broker_closed.
  void retire(std::shared_ptr<link> l) {
    if (!l) return;
    l->closed = true;
    l->fail_all({transport_errc::broker_closed, "the connection was closed by walhook"});
    {
      std::lock_guard lock(graveyard_mutex);
      graveyard().push_back(l);
    }
    asio::post(pool, [l] {
      if (l->js != nullptr) jsCtx_Destroy(l->js);
      if (l->nc != nullptr) {
        natsConnection_Close(l->nc);
        natsConnection_Destroy(l->nc);
      }
    });
  }

  /// Opens a connection for `key` on a sink thread; its waiters hear the result.
  void start_connect(const std::string& key, const broker_target& t, milliseconds timeout) {
    auto l = std::make_shared<link>();
    l->ex = ex;
    l->duplicates = duplicates;
    slots[key].connecting = true;
    {
      std::lock_guard lock(connect_mutex);
      ++connecting;
    }
    // A thread of its own: a server that never answers holds it until the deadline, and never
    // another endpoint's connect (a shared pool would let a few dead servers starve the rest).
    std::thread([self = shared_from_this(), key, t, timeout, l] {
      auto r = connect_blocking(*l, t, self->options, timeout);
      asio::post(self->ex, [self, key, t, l, r] { self->connected(key, t, l, r); });
      std::lock_guard lock(self->connect_mutex);
      --self->connecting;
      self->connect_done.notify_all();
    }).detach();
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

  void connected(const std::string& key, const broker_target& t, std::shared_ptr<link> l,
                 boost::system::result<void, transport_error> r) {
    auto it = slots.find(key);
    const bool wanted = !stopped && it != slots.end() && it->second.target == t;
    if (!wanted) {
      if (r) retire(l);
      if (it != slots.end()) it->second.connecting = false;
      return;
    }
    slot& s = it->second;
    s.connecting = false;
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

  auto& s = self->slots[pool_key];
  if (s.target != target) {  // a new endpoint, or its URL changed: the old connection drains
    self->retire_later(std::exchange(s.live, nullptr));
    s.target = target;
  }
  if (!s.live || s.live->closed) {
    if (s.live) self->retire(std::exchange(s.live, nullptr));
    auto wait = std::make_shared<pending_call>(self->ex);
    wait->timer.expires_after(remaining());
    s.waiting.push_back(wait);
    if (!s.connecting) self->start_connect(pool_key, target, remaining());
    co_await wait->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!wait->result)
      co_return transport_error(transport_errc::timeout, fmt::format("connecting to {}:{}", target.host, target.port));
    if (!*wait->result) co_return wait->result->error();
  }
  if (self->stopped) co_return transport_error(transport_errc::cancelled);
  std::shared_ptr<link> l = self->slots[pool_key].live;
  if (!l || l->closed) co_return transport_error(transport_errc::broker_closed, "the NATS connection closed");

  natsMsg* msg = nullptr;
  natsStatus st = natsMsg_Create(&msg, message.subject.c_str(), nullptr, message.body.data(),
                                 static_cast<int>(message.body.size()));
  for (const auto& [name, value] : message.headers)
    if (st == NATS_OK) st = natsMsgHeader_Set(msg, name.c_str(), value.c_str());
  if (st == NATS_OK) st = natsMsgHeader_Set(msg, "Content-Type", "application/json");
  if (st != NATS_OK) {
    natsMsg_Destroy(msg);
    co_return transport_error(transport_errc::bad_message, natsStatus_GetText(st));
  }
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MsgId = message.message_id.c_str();
  po.MaxWait = std::max<std::int64_t>(remaining().count(), 1);
  auto call = std::make_shared<pending_call>(self->ex);
  call->timer.expires_after(remaining());
  natsMsg* const key = msg;
  {
    std::lock_guard lock(l->m);
    l->pending[key] = call;
  }
  st = js_PublishMsgAsync(l->js, &msg, &po);
  if (st != NATS_OK) {
    {
      std::lock_guard lock(l->m);
      if (auto it = l->pending.find(key); it != l->pending.end() && it->second == call) l->pending.erase(it);
    }
    natsMsg_Destroy(msg);  // still ours: the library did not take it
    if (st == NATS_CONNECTION_CLOSED) co_return transport_error(transport_errc::broker_closed);
    if (st == NATS_TIMEOUT)
      co_return transport_error(transport_errc::timeout, "too many unconfirmed publishes on the connection");
    co_return transport_error(transport_errc::broker_refused, natsStatus_GetText(st));
  }
  co_await call->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  if (!call->result) {
    std::lock_guard lock(l->m);
    // Only our own entry: the message may be gone and its address reused by another publish.
    if (auto it = l->pending.find(key); it != l->pending.end() && it->second == call) l->pending.erase(it);
    co_return transport_error(transport_errc::timeout, "no PubAck from JetStream");
  }
  post_result r = std::move(*call->result);
  if (r) r->elapsed = std::chrono::duration_cast<std::chrono::microseconds>(clock.steady_now() - start);
  co_return r;
}

void nats_sink::forget(const std::string& pool_key) {
  asio::post(impl_->ex, [self = impl_, pool_key] {
    auto it = self->slots.find(pool_key);
    if (it == self->slots.end()) return;
    self->retire_later(std::exchange(it->second.live, nullptr));
    for (auto& w : it->second.waiting) w->complete(transport_error(transport_errc::cancelled));
    self->slots.erase(it);
  });
}

void nats_sink::shutdown() {
  impl_->stopped = true;
  cancel_all();
}

void nats_sink::cancel_all() {
  for (auto& [key, s] : impl_->slots) {
    if (s.live) s.live->fail_all(transport_error(transport_errc::cancelled));
    for (auto& w : s.waiting) w->complete(transport_error(transport_errc::cancelled));
    s.waiting.clear();
    if (impl_->stopped) impl_->retire(std::exchange(s.live, nullptr));
  }
  if (impl_->stopped) {
    for (auto& l : impl_->draining) impl_->retire(l);
    impl_->draining.clear();
  }
}

std::uint64_t nats_sink::duplicates() const { return impl_->duplicates->load(); }

}  // namespace walhook::delivery
