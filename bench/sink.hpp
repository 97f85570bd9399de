#pragma once
// The customers' side of a trial: relay::receiver (Beast, loopback) on its own io_context
// thread, serving every endpoint of the workload by path with its behaviour, verifying
// signatures, and counting 2xx answers live (for the backlog the max scenario watches).

#include "relay/receiver.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <pthread.h>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace walhook::bench {

/// How an endpoint answers.
struct endpoint_behaviour {
  std::chrono::milliseconds delay{0};  ///< answer after this long
  double error_rate = 0;               ///< answer 500 with this probability
  bool never = false;                  ///< read the request and never answer (the relay's deadline ends it)
};

/// One endpoint of the workload.
struct endpoint_spec {
  std::string path;            ///< "/ep/<n>"
  std::size_t tenant = 0;      ///< receives the events of tenant_name(tenant)
  int max_concurrency = 4;
  endpoint_behaviour behaviour;
  bool measured = true;        ///< part of the latency statistics ("healthy")
  // Filled in when the endpoint is created:
  long long id = 0;
  std::string secret;
};

class sink {
 public:
  sink();
  ~sink();
  sink(const sink&) = delete;
  sink& operator=(const sink&) = delete;

  /// Configures the path's behaviour and its signing key (spec.secret must be set).
  void configure(const endpoint_spec& spec);
  std::string url(const std::string& path) const;

  /// Distinct (event, path) pairs answered with a 2xx so far — duplicates not counted
  /// (thread-safe, lock-free).
  std::int64_t answered_ok() const { return ok_.load(); }
  /// 2xx answers to an (event, path) that had already been answered with a 2xx.
  std::int64_t duplicates() const { return duplicates_.load(); }
  std::int64_t requests_seen() const { return seen_.load(); }
  /// Every request so far (copy).
  std::vector<relay::received_request> requests() const;
  std::size_t max_concurrent(const std::string& path) const;
  /// CPU seconds of the receiver's thread.
  double cpu_seconds() const;
  void stop();

 private:
  std::unique_ptr<boost::asio::io_context> ioc_;
  std::unique_ptr<relay::receiver> receiver_;
  std::thread thread_;
  pthread_t thread_handle_{};
  std::atomic<std::int64_t> ok_{0};
  std::atomic<std::int64_t> duplicates_{0};
  std::unordered_set<std::string> answered_;  ///< "<webhook-id> <path>", receiver thread only
  std::atomic<std::int64_t> seen_{0};
  bool stopped_ = false;
};

}  // namespace walhook::bench
