#include "relay/admin/metrics_cache.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <optional>

namespace walhook::relay {
namespace asio = boost::asio;

struct metrics_cache::state {
  state(asio::any_io_executor ex, compute_fn c, std::chrono::steady_clock::duration f)
      : compute(std::move(c)), fresh_for(f), computed(ex, asio::steady_timer::time_point::max()) {}
  compute_fn compute;
  std::chrono::steady_clock::duration fresh_for;
  std::optional<std::string> text;
  std::chrono::steady_clock::time_point computed_at{};
  bool computing = false;
  bool stopped = false;  ///< stop(): no computation starts any more
  std::uint64_t computations = 0;
  /// Never expires: scrapes waiting for a computation wait on it; each computation's end
  /// cancels it, which wakes them all.
  asio::steady_timer computed;
};

metrics_cache::metrics_cache(asio::any_io_executor ex, compute_fn compute, std::chrono::steady_clock::duration fresh_for)
    : state_(std::make_shared<state>(ex, std::move(compute), fresh_for)), tasks_(ex) {}

metrics_cache::~metrics_cache() { stop(); }

void metrics_cache::stop() {
  state_->stopped = true;
  tasks_.emit(asio::cancellation_type::terminal);
  state_->computed.cancel();
}

std::uint64_t metrics_cache::computations() const { return state_->computations; }

asio::awaitable<std::string> metrics_cache::text() {
  auto s = state_;
  if (s->stopped) co_return s->text.value_or(std::string{});
  const bool fresh = s->text && std::chrono::steady_clock::now() - s->computed_at < s->fresh_for;
  if (fresh) co_return *s->text;
  // Another scrape has it computed now: the last text meanwhile, no second query.
  if (s->computing && s->text) co_return *s->text;
  if (!s->computing) {
    s->computing = true;
    ++s->computations;
    tasks_.spawn(compute_into(s), "metrics refresh");
  }
  // This scrape waits for the computation (it started it, or there is no text yet), unless it
  // already ended (the task may run at once); its end cancels the wait.
  while (s->computing && !s->stopped) {
    co_await s->computed.async_wait(asio::as_tuple(asio::use_awaitable));
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none)
      co_return std::string{};
  }
  co_return s->text.value_or(std::string{});
}

asio::awaitable<void> metrics_cache::compute_into(std::shared_ptr<state> s) {
  // However it ends (cancelled when the listener stops), the next stale scrape may start another.
  struct done_guard {
    state& s;
    ~done_guard() {
      s.computing = false;
      s.computed.cancel();
    }
  } done{*s};
  std::string fresh = co_await s->compute();
  s->text = std::move(fresh);
  s->computed_at = std::chrono::steady_clock::now();
}

}  // namespace walhook::relay
