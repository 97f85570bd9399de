#pragma once
// /metrics served from the last computed text (docs/api.md, Metrics): computing it reads the
// database (each endpoint's oldest pending age, on the engine's state-store connection, the one
// that also claims retries), so a scrape flood must not become a query flood. A text younger than
// `fresh_for` (1 s) is served as it is; a scrape that finds it older has it computed and waits
// for it, while the scrapes that come meanwhile get the previous text (or, before there is any,
// wait for the same computation). So a lone scrape (Prometheus) gets numbers at most a second
// old, and the database sees at most one such query at a time and one per second.
//
// Thread affinity: one executor (the engine's).

#include "common/task_group.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace walhook::relay {

/// How long a computed /metrics text is served before a scrape has it computed again.
inline constexpr std::chrono::milliseconds metrics_fresh_for{1000};

class metrics_cache {
 public:
  /// Computes the text (engine::metrics_text()).
  using compute_fn = std::function<boost::asio::awaitable<std::string>()>;

  metrics_cache(boost::asio::any_io_executor ex, compute_fn compute,
                std::chrono::steady_clock::duration fresh_for = metrics_fresh_for);
  ~metrics_cache();
  metrics_cache(const metrics_cache&) = delete;
  metrics_cache& operator=(const metrics_cache&) = delete;

  /// The text: as last computed if younger than `fresh_for`, or while another scrape has it
  /// computed; else computed now (this scrape waits). "" if the awaiting coroutine is cancelled
  /// meanwhile, or the cache stopped without a text.
  boost::asio::awaitable<std::string> text();
  /// Cancels a computation that runs and starts none any more (the listener stops); scrapes
  /// waiting for it get the text there is, or "".
  void stop();
  /// Computations started so far (tests).
  std::uint64_t computations() const;

 private:
  struct state;
  /// One computation into `s`, owned by tasks_.
  static boost::asio::awaitable<void> compute_into(std::shared_ptr<state> s);
  std::shared_ptr<state> state_;  ///< shared with the running computation
  task_group tasks_;              ///< the computation
};

}  // namespace walhook::relay
