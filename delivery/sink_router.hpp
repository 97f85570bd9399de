#pragma once
// The transport the engine holds: HTTP calls go to the HTTP client, broker publishes to the
// sink of their URL's kind (delivery/destination.hpp). A sink is a transport, not a second
// engine: queues, retries, the breaker and dead letters are the same for every kind. A Kafka
// sink would be one more transport registered here (docs/decisions.md).

#include "delivery/destination.hpp"
#include "delivery/transport.hpp"

#include <array>
#include <memory>

namespace walhook::delivery {

class sink_router final : public transport {
 public:
  /// `http` carries async_post; not owned, must outlive the router.
  explicit sink_router(transport& http) : http_(http) {}
  /// With the NATS and AMQP sinks (either may be null: that scheme answers sink_unavailable).
  sink_router(transport& http, std::unique_ptr<transport> nats, std::unique_ptr<transport> amqp) : http_(http) {
    add(sink_kind::nats, std::move(nats));
    add(sink_kind::amqp, std::move(amqp));
  }

  /// Registers the sink for `kind` (nats or amqp); replaces an earlier one.
  void add(sink_kind kind, std::unique_ptr<transport> sink);
  /// True if a sink for `kind` is registered (http always is).
  bool has(sink_kind kind) const;

  boost::asio::awaitable<post_result> async_post(const std::string& pool_key, const http_target& target,
                                                 const http_request& request) override;
  /// To the sink of target.kind; transport_errc::sink_unavailable if none is registered.
  boost::asio::awaitable<post_result> async_publish(const std::string& pool_key, const broker_target& target,
                                                    const broker_message& message,
                                                    std::chrono::milliseconds deadline) override;
  /// forget, shutdown and cancel_all go to every transport.
  void forget(const std::string& pool_key) override;
  void shutdown() override;
  void cancel_all() override;

 private:
  transport& http_;
  std::array<std::unique_ptr<transport>, 3> sinks_;  ///< by sink_kind; [http] unused
};

}  // namespace walhook::delivery
