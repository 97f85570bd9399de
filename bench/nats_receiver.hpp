#pragma once
// The broker side of a NATS trial: its own `nats-server -js` (Debian's package, /usr/sbin) on a
// free loopback port with a file store in a temporary directory on the same disk as the
// throwaway PostgreSQL, one file-backed stream per endpoint, and an independent subscriber in
// the bench process (nats.c) that records each message the stream stored.
//
// Endpoint i (path "/ep/i") publishes to `nats://127.0.0.1:PORT/bench.ep<i>.{event_type}`; its
// stream BENCH_EP<i> covers `bench.ep<i>.>`. One stream per endpoint, because JetStream drops
// a message whose Nats-Msg-Id (= the event id) the stream already holds: two endpoints of one
// tenant publishing the same event into one stream would be stored once.
//
// The receipt of a message is when an ephemeral push consumer (AckNone, deliver new) of its
// stream hands it to the subscriber's callback: the server delivers to a consumer only what
// the stream has stored, which is when it also sends the publisher's PubAck. So
// commit-to-receipt here is commit → stored by JetStream → read by a consumer, one hop more
// than the publisher's own confirmation (loopback: tens of µs). A plain core-NATS subscription
// would see a message before it was stored, and is not used.

#include "bench/sink.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <pthread.h>
#include <sys/types.h>

namespace walhook::bench {

/// `nats-server -js` as a child process: a free port, a store of its own (removed at the end).
class nats_server_process {
 public:
  nats_server_process();   ///< starts it; waits until JetStream answers (throws on failure)
  ~nats_server_process();  ///< SIGKILL, store removed
  nats_server_process(const nats_server_process&) = delete;
  nats_server_process& operator=(const nats_server_process&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const;  ///< "nats://127.0.0.1:<port>"
  std::string log_path() const { return dir_ + "/nats.log"; }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = 0;
};

/// sink over JetStream (see the file comment). Thread safety as sink's; the subscriber's
/// callbacks run on nats.c's threads.
class nats_receiver final : public sink {
 public:
  nats_receiver();  ///< starts the server and connects the subscriber's connection
  ~nats_receiver() override;
  nats_receiver(const nats_receiver&) = delete;
  nats_receiver& operator=(const nats_receiver&) = delete;

  delivery::sink_kind kind() const override { return delivery::sink_kind::nats; }
  /// Creates the endpoint's stream and subscribes to it (blocking; throws on a JetStream error).
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
  /// CPU of the subscriber's callback threads.
  double cpu_seconds() const override;
  double broker_cpu_seconds() const override;
  /// Messages stored in all streams (from the server, by stream info) vs distinct receipts.
  std::string notes() const override;
  void stop() override;

  /// One endpoint's stream and subscription; the callback's closure.
  struct route;
  /// The subscriber's callback (a nats.c thread): one message of `r`'s stream, received at
  /// `received_at_us` (system clock µs), with Nats-Msg-Id `msg_id`.
  void record(route& r, std::int64_t received_at_us, std::string msg_id);

 private:

  std::unique_ptr<nats_server_process> server_;
  struct connection;
  std::unique_ptr<connection> conn_;
  std::vector<std::unique_ptr<route>> routes_;
  std::unordered_map<std::string, route*> by_path_;  ///< written by configure() only

  mutable std::mutex mutex_;
  std::vector<relay::received_request> received_;     ///< under mutex_
  std::unordered_set<std::string> answered_;          ///< "<msg id> <path>", under mutex_
  std::vector<pthread_t> threads_;                    ///< callback threads seen, under mutex_
  std::atomic<std::int64_t> ok_{0}, duplicates_{0}, seen_{0};
  double final_cpu_ = -1;
  double final_broker_cpu_ = -1;
  std::string final_notes_;
  bool stopped_ = false;
};

}  // namespace walhook::bench
