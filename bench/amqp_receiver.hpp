#pragma once
// The broker side of an AMQP trial: a rabbitmq-server of the bench's own (Debian's package; a
// temporary directory in /tmp, on the same disk as the throwaway PostgreSQL; free loopback
// ports for AMQP, Erlang distribution and an epmd of its own; run as the `rabbitmq` user when
// the bench runs as root), a durable topic exchange `bench`, one durable queue per endpoint,
// and a consumer in the bench process (rabbitmq-c, one connection owned by a thread of its own)
// that records the message_id and receipt time of every message.
//
// Endpoint i (path "/ep/i") publishes to
// `amqp://guest:guest@127.0.0.1:PORT/%2F?exchange=bench&routing_key=ep<i>.{event_type}`; its
// queue `bench.ep<i>` is bound with `ep<i>.#`. One queue per endpoint, so two endpoints of one
// tenant publishing the same event id both arrive.
//
// The receipt of a message is when the consumer (basic.consume with no-ack, so the broker
// pushes without a prefetch window) has read its basic.deliver. Unlike JetStream, RabbitMQ may
// deliver a message to a consumer *before* it sends the publisher's confirm (a persistent
// message on a durable queue is confirmed once written to disk, or once every queue it went to
// has delivered and forgotten it): commit-to-receipt here can be shorter than the publisher's
// commit-to-confirm, which is what the relay waits for before it marks a delivery done.
//
// This copies the start and stop logic of tests/support/rabbitmq_server (bench/ does not link
// the tests' support library) without its TLS listener and pika-based operator side.

#include "bench/sink.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <pthread.h>
#include <sys/types.h>

namespace walhook::bench {

/// rabbitmq-server as a child process group: free ports, a directory of its own (removed at
/// the end), its own epmd.
class rabbitmq_process {
 public:
  rabbitmq_process();   ///< starts it; waits (≤ 120 s) until it answers the AMQP header (throws)
  ~rabbitmq_process();  ///< SIGKILLs the broker's process group and its epmd, removes the directory
  rabbitmq_process(const rabbitmq_process&) = delete;
  rabbitmq_process& operator=(const rabbitmq_process&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }  ///< the process group leader (the start script; beam is below it)
  std::string log_path() const { return dir_ + "/server.log"; }
  /// How long the start took until the broker answered AMQP (ms).
  long long startup_ms() const { return startup_ms_; }

 private:
  std::string dir_, node_;
  int port_ = 0, dist_port_ = 0, epmd_port_ = 0;
  pid_t pid_ = 0, epmd_pid_ = 0;
  long long startup_ms_ = 0;
  std::vector<std::string> env() const;
};

/// sink over RabbitMQ (see the file comment). Thread safety as sink's; the consumer's
/// connection is only touched by its thread (configure() hands it the declarations and waits).
class amqp_receiver final : public sink {
 public:
  amqp_receiver();  ///< starts the server, connects the consumer and declares the exchange (throws)
  ~amqp_receiver() override;
  amqp_receiver(const amqp_receiver&) = delete;
  amqp_receiver& operator=(const amqp_receiver&) = delete;

  delivery::sink_kind kind() const override { return delivery::sink_kind::amqp; }
  /// Declares the endpoint's queue, binds it and starts consuming it (blocking: the consumer
  /// thread does it; throws with the broker's reply on failure).
  void configure(const endpoint_spec& spec) override;
  /// A broker has no status to answer: std::logic_error.
  void set_status(const std::string& path, unsigned status) override;
  std::string url(const std::string& path) const override;
  std::int64_t answered_ok() const override { return ok_.load(std::memory_order_relaxed); }
  std::int64_t answered_ok(const std::string& path) const override;
  std::int64_t duplicates() const override { return duplicates_.load(std::memory_order_relaxed); }
  std::int64_t requests_seen() const override { return seen_.load(std::memory_order_relaxed); }
  std::vector<relay::received_request> requests() const override;
  std::size_t max_concurrent(const std::string&) const override { return 0; }
  /// CPU of the consumer thread.
  double cpu_seconds() const override;
  /// CPU of rabbitmq-server's process tree (beam and its helpers; not epmd).
  double broker_cpu_seconds() const override;
  /// Messages received (distinct), redelivered, the broker's start time, a consumer error.
  std::string notes() const override;
  void stop() override;

  /// One endpoint's queue and its counter.
  struct route {
    std::string path, token, queue;
    std::atomic<std::int64_t> ok{0};
  };

 private:
  struct request {  ///< a queue to declare, bind and consume (configure → consumer thread)
    route* r = nullptr;
    bool done = false;
    std::string error;
  };
  void run();  ///< the consumer thread
  void record(route& r, std::int64_t received_at_us, std::string msg_id, bool redelivered);

  std::unique_ptr<rabbitmq_process> server_;
  struct connection;
  std::unique_ptr<connection> conn_;
  std::vector<std::unique_ptr<route>> routes_;
  std::unordered_map<std::string, route*> by_path_;  ///< written by configure() only
  std::unordered_map<std::string, route*> by_tag_;   ///< consumer tag → route; consumer thread only

  std::mutex requests_mutex_;
  std::condition_variable requests_cv_;
  std::deque<request*> requests_;  ///< under requests_mutex_
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  pthread_t thread_handle_{};

  mutable std::mutex mutex_;
  std::vector<relay::received_request> received_;  ///< under mutex_
  std::unordered_set<std::string> answered_;       ///< "<message id> <path>", under mutex_
  std::string consumer_error_;                     ///< under mutex_
  std::atomic<std::int64_t> ok_{0}, duplicates_{0}, seen_{0}, redelivered_{0};
  double final_cpu_ = -1;
  double final_broker_cpu_ = -1;
  std::string final_notes_;
  bool stopped_ = false;
};

}  // namespace walhook::bench
