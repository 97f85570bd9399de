#pragma once
// A transport whose attempts wait until the test answers them (Redpanda's abstract_client
// fakes are the model). Each call is recorded; answer(i, status) or fail(i, errc) completes it
// when the test next runs the io_context. shutdown() ends every call with `cancelled`.
//
// Thread affinity: the io_context the test runs.

#include "delivery/transport.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace walhook::test {

class fake_transport final : public delivery::transport {
 public:
  explicit fake_transport(boost::asio::any_io_executor ex);
  ~fake_transport() override;

  struct call {
    std::string pool_key;
    delivery::http_target target;
    delivery::http_request request;
    bool answered = false;
    /// First value of a request header, "" if absent.
    std::string header(const std::string& name) const;
  };

  boost::asio::awaitable<delivery::post_result> async_post(
      const std::string& pool_key, const delivery::http_target& target, const delivery::http_request& request) override;
  void forget(const std::string& pool_key) override { forgotten.push_back(pool_key); }
  void shutdown() override;
  /// Counts the calls (cancelled_all); the test answers or fails the calls itself.
  void cancel_all() override { ++cancelled_all; }

  /// Calls in the order they arrived.
  std::size_t calls() const;
  const call& at(std::size_t i) const;
  /// Calls not answered yet.
  std::size_t waiting() const;
  /// Answers call i with an HTTP status (and a Retry-After header, if given).
  void answer(std::size_t i, unsigned status, std::string retry_after = {});
  /// Answers call i with an HTTP status and a response body (kept only if the request asked: keep_body).
  void answer_with_body(std::size_t i, unsigned status, std::string body);
  /// Fails call i with a transport error.
  void fail(std::size_t i, delivery::transport_errc e);
  /// Answers every waiting call with `status`.
  void answer_all(unsigned status);

  std::vector<std::string> forgotten;  ///< pool keys passed to forget()
  bool shut_down = false;
  int cancelled_all = 0;  ///< cancel_all() calls

 private:
  struct pending;
  boost::asio::any_io_executor executor_;
  std::vector<std::shared_ptr<pending>> calls_;
};

}  // namespace walhook::test
