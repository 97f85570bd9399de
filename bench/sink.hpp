#pragma once
// The customers' side of a trial, behind one interface (sink) whatever the destination:
//   http_sink    relay::receiver (Beast, loopback) on its own io_context thread, serving every
//                endpoint of the workload by path with its behaviour, verifying signatures;
//   nats_sink    a JetStream stream per endpoint on a nats-server of its own, read by a
//                subscriber in the bench process (bench/nats_receiver.hpp);
//   amqp_sink    a durable queue per endpoint on a rabbitmq-server of its own, read by a
//                consumer in the bench process (bench/amqp_receiver.hpp).
// Each records every receipt (event id, endpoint path, receipt time) and counts distinct
// (event, endpoint) receipts live, for the backlog the sampler and the max scenario watch.

#include "delivery/destination.hpp"
#include "relay/demo/receiver.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <pthread.h>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace walhook::bench {

/// How an endpoint answers.
struct endpoint_behaviour {
  unsigned status = 200;               ///< the HTTP status it answers (sink::set_status changes it mid-trial)
  std::chrono::milliseconds delay{0};  ///< answer after this long
  double error_rate = 0;               ///< answer 500 with this probability
  bool never = false;                  ///< read the request and never answer (the relay's deadline ends it)
  /// Some requests can be answered 2xx (so the relay's backlog of this endpoint can drain).
  bool can_succeed() const { return !never && error_rate < 1 && status >= 200 && status < 300; }
};

/// One endpoint of the workload.
struct endpoint_spec {
  std::string path;            ///< "/ep/<n>"
  std::size_t tenant = 0;      ///< receives the events of tenant_name(tenant)
  /// Overrides the tenant id the endpoint is created with (tenant_name(tenant) when empty), for
  /// tenants whose events do not come from the load generator (e.g. catchup's "down" tenant,
  /// loaded by SQL). Give such an endpoint a `tenant` index ≥ workload::tenants so the
  /// generator's backlog counter and the latency statistics leave it out.
  std::string tenant_id;
  /// Subscribes to this one of workload::event_types only (walhook.endpoints.event_types);
  /// none: to every event type (event_types NULL).
  std::optional<std::size_t> event_type;
  int max_concurrency = 4;
  endpoint_behaviour behaviour;
  bool measured = true;        ///< part of the latency statistics ("healthy")
  // Filled in when the endpoint is created:
  long long id = 0;
  std::string secret;
};

/// Where the relays deliver and what arrived there. Every call but stop() is thread-safe
/// unless it says otherwise; configure() is called for every endpoint before the relay starts.
class sink {
 public:
  virtual ~sink() = default;
  /// The destination kind endpoints' URLs name (url()).
  virtual delivery::sink_kind kind() const = 0;
  /// Prepares the endpoint's destination (its path, behaviour and signing key; spec.secret
  /// must be set). Call it for every path before the relay starts.
  virtual void configure(const endpoint_spec& spec) = 0;
  /// Changes the status a configured path answers from now on (HTTP only; a broker sink
  /// throws std::logic_error).
  virtual void set_status(const std::string& path, unsigned status) = 0;
  /// The endpoint URL of a configured path (http://127.0.0.1:…/ep/0, nats://127.0.0.1:…/…).
  virtual std::string url(const std::string& path) const = 0;
  /// Distinct (event, path) pairs received with success so far — duplicates not counted
  /// (lock-free).
  virtual std::int64_t answered_ok() const = 0;
  /// The same for one configured path (0 for others).
  virtual std::int64_t answered_ok(const std::string& path) const = 0;
  /// Successful receipts of an (event, path) already received.
  virtual std::int64_t duplicates() const = 0;
  virtual std::int64_t requests_seen() const = 0;
  /// Every receipt so far (copy). A broker's receipts have status 200 and no signature check.
  virtual std::vector<relay::received_request> requests() const = 0;
  /// Peak concurrent requests of a path (HTTP; 0 for a broker, which has no such notion here).
  virtual std::size_t max_concurrent(const std::string& path) const = 0;
  /// CPU seconds of the sink's threads in the bench process (receiver, subscriber).
  virtual double cpu_seconds() const = 0;
  /// CPU seconds of the broker server process so far (nats-server); −1: none (HTTP).
  virtual double broker_cpu_seconds() const { return -1; }
  /// What the sink has to say for the report (broker: messages stored, PubAck duplicates), "".
  virtual std::string notes() const { return {}; }
  /// Stops receiving (idempotent); requests() stays readable.
  virtual void stop() = 0;
};

/// The HTTP receiver: relay::receiver on its own thread.
class http_sink final : public sink {
 public:
  http_sink();
  ~http_sink() override;
  http_sink(const http_sink&) = delete;
  http_sink& operator=(const http_sink&) = delete;

  delivery::sink_kind kind() const override { return delivery::sink_kind::http; }

  /// Configures the path's behaviour and its signing key (spec.secret must be set). Call it for
  /// every path before the relay starts (the per-path counters are created here).
  void configure(const endpoint_spec& spec) override;
  /// Changes the status a configured path answers from now on (its other behaviour and keys
  /// stay), e.g. 503 → 200 when a down endpoint comes back. Thread-safe.
  void set_status(const std::string& path, unsigned status) override;
  std::string url(const std::string& path) const override;

  /// Distinct (event, path) pairs answered with a 2xx so far — duplicates not counted
  /// (thread-safe, lock-free).
  std::int64_t answered_ok() const override { return ok_.load(); }
  /// The same for one configured path (0 for others).
  std::int64_t answered_ok(const std::string& path) const override;
  /// 2xx answers to an (event, path) that had already been answered with a 2xx.
  std::int64_t duplicates() const override { return duplicates_.load(); }
  std::int64_t requests_seen() const override { return seen_.load(); }
  /// Every request so far (copy).
  std::vector<relay::received_request> requests() const override;
  std::size_t max_concurrent(const std::string& path) const override;
  /// CPU seconds of the receiver's thread.
  double cpu_seconds() const override;
  void stop() override;

 private:
  std::unique_ptr<boost::asio::io_context> ioc_;
  std::unique_ptr<relay::receiver> receiver_;
  std::thread thread_;
  pthread_t thread_handle_{};
  std::atomic<std::int64_t> ok_{0};
  std::atomic<std::int64_t> duplicates_{0};
  std::unordered_set<std::string> answered_;  ///< "<webhook-id> <path>", receiver thread only
  /// Distinct 2xx per path. The map is only written by configure() (before the relay sends);
  /// afterwards the receiver thread only looks up and increments.
  std::unordered_map<std::string, std::unique_ptr<std::atomic<std::int64_t>>> ok_by_path_;
  mutable std::mutex behaviours_mutex_;
  std::unordered_map<std::string, relay::receiver_behaviour> behaviours_;  ///< as configured, by path
  std::atomic<std::int64_t> seen_{0};
  bool stopped_ = false;
};

/// The sink for `kind`: http_sink, or a broker's (nats_receiver, amqp_receiver: each starts
/// its own broker; throws std::runtime_error if it cannot).
std::unique_ptr<sink> make_sink(delivery::sink_kind kind);


}  // namespace walhook::bench
