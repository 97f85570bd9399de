#pragma once
// The admin HTTP endpoint of `walhook run --admin-listen HOST:PORT` (Boost.Beast):
//   GET /metrics  Prometheus text exposition of the engine (engine::metrics_text)
//   GET /healthz  200 while the process runs
//   GET /readyz   200 while this instance streams the slot, 503 otherwise (standby, reconnecting)

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace walhook::relay {

class engine;

class admin_server {
 public:
  /// Binds `listen` ("127.0.0.1:9187", "[::1]:9187" or ":9187" for all addresses). Throws
  /// std::runtime_error on a bad address or a port in use.
  admin_server(boost::asio::any_io_executor ex, const std::string& listen, engine& e);
  ~admin_server();
  unsigned short port() const;
  void stop();

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace walhook::relay
