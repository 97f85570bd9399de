#pragma once
// A real NATS server with JetStream for the broker sink's tests: `nats-server -js` (Debian's
// package) on a free loopback port with its store in a temporary directory, killed and
// restarted like PostgreSQL. Streams are managed through the JetStream API over the server's
// own protocol, and messages are read back by tests/support/nats_read_stream.py, which shares
// no code with walhook or nats.c.

#include <chrono>
#include <string>
#include <vector>

#include <sys/types.h>

namespace walhook::test {

class nats_server {
 public:
  nats_server();   ///< starts it and waits until it accepts connections (throws on failure)
  /// With TLS required: the server's certificate and key (PEM files).
  nats_server(std::string tls_cert_file, std::string tls_key_file);
  ~nats_server();  ///< SIGKILL, store removed
  nats_server(const nats_server&) = delete;
  nats_server& operator=(const nats_server&) = delete;

  int port() const { return port_; }
  /// "nats://127.0.0.1:<port>"
  std::string url() const;
  /// SIGKILL: a crash; the store survives for restart().
  void kill9();
  /// Starts it again on the same port and store; waits until it accepts connections.
  void restart();
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }  ///< to SIGSTOP it (a broker that stops answering)

  /// Creates (or updates) a file-backed stream over `subjects` (JetStream API,
  /// $JS.API.STREAM.CREATE): `max_msgs` (-1: none) with discard=new, so a full stream refuses
  /// new messages; duplicate window `duplicate_window`.
  void create_stream(const std::string& name, const std::vector<std::string>& subjects, long max_msgs = -1,
                     std::chrono::seconds duplicate_window = std::chrono::seconds{120});
  void delete_stream(const std::string& name);

  /// One message of a stream as the independent reader saw it.
  struct stored_message {
    long long seq = 0;
    std::string subject;
    std::string msg_id;  ///< Nats-Msg-Id header
    std::vector<std::pair<std::string, std::string>> headers;
    std::string data;  ///< the body, exact bytes
  };
  /// Every message of stream `name`, in sequence order (tests/support/nats_read_stream.py).
  std::vector<stored_message> read_stream(const std::string& name) const;

 private:
  int port_ = 0;
  pid_t pid_ = 0;
  std::string dir_;
  std::string tls_cert_, tls_key_;
  void start();
  /// One JetStream API request through the reader script; returns the JSON answer.
  std::string api(const std::string& subject, const std::string& body) const;
};

}  // namespace walhook::test
