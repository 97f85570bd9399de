#pragma once
// A webhook receiver on loopback (Boost.Beast): the demo's customer, the tests' endpoint and the
// bench's sink. Serves many endpoints by path, each with its own behaviour (answer at once,
// after a delay, with scripted or random errors, never), verifies Standard Webhooks signatures
// and records every request with its receipt time and the endpoint's concurrent requests.
//
// Runs on the executor it is given; the recording accessors are thread-safe so a test can read
// them from another thread.

#include "delivery/signing.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace walhook::relay {

struct received_request;

struct receiver_behaviour {
  std::vector<unsigned> script;          ///< statuses of the first requests, in order
  unsigned status = 200;                 ///< then this
  std::chrono::milliseconds delay{0};    ///< before answering
  double error_rate = 0.0;               ///< probability of answering 500 instead
  bool never_answer = false;             ///< read the request, never respond (until stop)
  std::vector<delivery::signing_key> keys;  ///< verify signatures with these (none: not checked)
  std::string retry_after;               ///< Retry-After header on non-2xx answers, if set
  std::string location;                  ///< Location header on 3xx answers, if set (raw bytes)
  std::string fail_marker;               ///< requests whose body contains this…
  unsigned fail_times = 0;               ///< …answer fail_status this many times first
  unsigned fail_status = 500;
  /// When set, decides the answer itself — a status and a JSON body — from the request (its
  /// headers and body, as recorded); the fields above but delay and never_answer are then unused.
  /// Called on the receiver's executor. (Tests play an OAuth2 token endpoint with it.)
  std::function<std::pair<unsigned, std::string>(const received_request&)> respond;
};

struct received_request {
  std::string path;
  std::string webhook_id;
  std::string webhook_timestamp;
  std::string webhook_signature;
  bool signature_valid = false;  ///< false also when the path has no keys
  std::string body;
  std::int64_t received_at_us = 0;  ///< system clock, µs since the Unix epoch
  unsigned status = 0;              ///< what the receiver answered (0: never)
  std::size_t concurrent = 0;       ///< requests in progress on this path, this one included
  /// The request's other headers (Host, User-Agent, an endpoint's own, …), as they came (kept
  /// with the bodies only).
  std::vector<std::pair<std::string, std::string>> headers;
  /// The value of header `name` (case-insensitive), "" if absent.
  std::string header(std::string_view name) const;
};

class receiver {
 public:
  /// Binds address:port (port 0 = any free port) and starts accepting.
  receiver(boost::asio::any_io_executor ex, const std::string& address = "127.0.0.1", unsigned short port = 0);
  ~receiver();
  receiver(const receiver&) = delete;
  receiver& operator=(const receiver&) = delete;

  unsigned short port() const;
  /// "http://127.0.0.1:<port><path>"
  std::string url(const std::string& path) const;

  /// Behaviour of one path; paths without one answer 200.
  void set_behaviour(const std::string& path, receiver_behaviour b);
  /// Called on the receiver's executor for every request, after it was answered (or not).
  void on_request(std::function<void(const received_request&)> callback);
  /// Whether to keep request bodies in the recording (the bench turns it off).
  void keep_bodies(bool keep);

  std::vector<received_request> requests() const;
  std::size_t count(const std::string& path) const;
  std::size_t total() const;
  /// Highest number of concurrent requests seen on a path.
  std::size_t max_concurrent(const std::string& path) const;
  void clear();

  /// Stops accepting and closes every connection (never-answering ones included).
  void stop();

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace walhook::relay
