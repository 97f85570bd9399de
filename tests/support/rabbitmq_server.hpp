#pragma once
// A throwaway RabbitMQ broker for tests (Debian's rabbitmq-server, started like the tests'
// PostgreSQL): its own temporary directory, free loopback ports for AMQP, Erlang distribution
// and its own epmd (so concurrent test executables never meet), run as the `rabbitmq` user when
// the tests run as root. Faults are real: kill9() SIGKILLs the broker's process group, start()
// brings it back on the same data and ports. The operator's side (exchanges, queues, bindings,
// reading messages back) goes through tests/support/amqp_tool.py, a pika client: an AMQP
// implementation independent of walhook's rabbitmq-c.

#include <chrono>
#include <string>
#include <vector>

#include <sys/types.h>

namespace walhook::test {

/// One message read back by amqp_tool.py drain.
struct amqp_received {
  std::string message_id;
  std::string routing_key;
  std::string exchange;
  std::string content_type;
  int delivery_mode = 0;
  long long timestamp = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  ///< exact bytes
  bool redelivered = false;
  /// The header's value, "" if absent.
  std::string header(const std::string& name) const;
};

class rabbitmq_server {
 public:
  /// Starts the broker and waits until it answers the AMQP protocol header (throws after 120 s).
  rabbitmq_server();
  ~rabbitmq_server();  ///< kills the broker and its epmd, removes the directory
  rabbitmq_server(const rabbitmq_server&) = delete;
  rabbitmq_server& operator=(const rabbitmq_server&) = delete;

  unsigned short port() const { return port_; }
  /// The amqps listener (127.0.0.1): its certificate is for DNS:localhost, signed by ca_pem().
  unsigned short tls_port() const { return tls_port_; }
  /// The PEM of the test CA that signed the broker's certificate.
  const std::string& ca_pem() const { return ca_pem_; }
  /// amqp://guest:guest@127.0.0.1:PORT/%2F?exchange=…&routing_key=…
  std::string url(const std::string& exchange, const std::string& routing_key) const;
  /// How long the last start() took until the broker answered AMQP.
  std::chrono::milliseconds startup_time() const { return startup_time_; }

  /// Starts (again) on the same directory and ports; waits until it answers.
  void start();
  /// SIGKILLs the broker's process group and reaps it (epmd stays).
  void kill9();
  bool running() const { return pid_ > 0; }

  /// rabbitmqctl -n NODE args… as the broker's user; returns the exit code, fills output.
  int ctl(const std::vector<std::string>& args, std::string& output) const;
  /// Turns the memory alarm on (vm_memory_high_watermark of a few bytes: connection.blocked
  /// for publishers) or off (0.8).
  void memory_alarm(bool on) const;

  /// Declares a durable exchange (`type`), and if `queue` is given a durable queue bound to it
  /// with `key`; `max_length` > 0: the queue holds at most that many messages and refuses more
  /// (x-overflow reject-publish: the publisher gets Basic.Nack). Throws if pika fails.
  void declare(const std::string& exchange, const std::string& queue = "", const std::string& key = "",
               const std::string& type = "direct", int max_length = 0) const;
  /// Deletes a queue and/or an exchange.
  void remove(const std::string& exchange, const std::string& queue = "") const;
  /// Reads (and acks) messages of `queue` until `max` (0: no limit) or none came for `idle`.
  std::vector<amqp_received> drain(const std::string& queue, std::size_t max = 0,
                                   std::chrono::milliseconds idle = std::chrono::milliseconds{1000}) const;

 private:
  std::string dir_;
  std::string node_;
  unsigned short port_ = 0, tls_port_ = 0, dist_port_ = 0, epmd_port_ = 0;
  std::string ca_pem_;
  pid_t pid_ = 0;       ///< the broker's process group leader
  pid_t epmd_pid_ = 0;  ///< our own epmd
  std::chrono::milliseconds startup_time_{0};
  std::vector<std::string> env() const;
  void make_certificates();
  std::string as_broker_user(const std::string& command) const;  ///< a shell command line run as the broker's user
};

/// The broker of this test executable, started on first use (one per executable: it takes
/// several seconds to start).
rabbitmq_server& rabbitmq();

}  // namespace walhook::test
