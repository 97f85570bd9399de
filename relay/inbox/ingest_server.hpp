#pragma once
// `walhook ingest --listen HOST:PORT` (docs/inbox.md): the receiving half's HTTP server
// (Boost.Beast; TLS with --tls-cert/--tls-key). Stateless — sources come from
// walhook.inbox_sources, every write goes to PostgreSQL — so several may run behind one load
// balancer.
//
//   POST /in/{source}  verify (relay/inbox/schemes.hpp), then walhook.inbox_accept() in a
//                      shared transaction (relay/inbox/group_commit.hpp); the answer comes after
//                      COMMIT: 200 accepted or duplicate, 409 the id was used with another body
//   GET  /healthz      200 while the process runs and a database session is up, else 503
// and, on --metrics-listen only (keep it private: it names the sources):
//   GET  /metrics      Prometheus text: walhook_inbox_requests_total{source,outcome}, …
//
// Refusals, each counted and never written: 404 unknown source (counted without its name: a
// stranger's made-up names must not grow the metrics), 413 a body over the source's
// max_body_bytes (refused from Content-Length before it is read), 401 missing header, bad
// signature or stale timestamp, 400 a body that is not JSON or lacks a usable id, type or
// order key, 405 another method, 503 with Retry-After when the database is down or the commit
// queue is too long (load shedding: the sender retries later).

#include "relay/inbox/group_commit.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace walhook::relay::inbox {

struct ingest_options {
  std::string database_url;
  std::string listen_address = "127.0.0.1";  ///< numeric address to bind
  unsigned short listen_port = 0;             ///< 0: any free port (port() tells)
  std::optional<std::string> metrics_address;  ///< --metrics-listen: /metrics there
  unsigned short metrics_port = 0;
  std::string tls_cert_file, tls_key_file;  ///< both or neither (PEM)
  group_commit_options commit;
  std::size_t max_connections = 1024;          ///< more wait in the kernel's backlog
  std::size_t max_connections_per_client = 64; ///< per client IP address; more are closed at once
  std::chrono::seconds read_deadline{10};      ///< a request (and the idle wait before it)
  std::chrono::seconds sources_refresh{5};     ///< walhook.inbox_sources is read again this often
  std::chrono::seconds retry_after{5};         ///< Retry-After of a 503
};

class ingest_server {
 public:
  /// Binds (throws std::runtime_error with the reason if it cannot: port in use, bad TLS files),
  /// then serves on `ex`'s thread until stop().
  ingest_server(boost::asio::any_io_executor ex, ingest_options options);
  ~ingest_server();
  ingest_server(const ingest_server&) = delete;
  ingest_server& operator=(const ingest_server&) = delete;

  unsigned short port() const;
  std::optional<unsigned short> metrics_port() const;
  /// The /metrics text.
  std::string metrics_text() const;
  /// SIGTERM: stops accepting, closes connections waiting for a request, lets every request
  /// under way get its answer (its commit, or its wait's end; `grace` at most), then stop().
  boost::asio::awaitable<void> drain(std::chrono::milliseconds grace);
  /// Ends everything now: connections are cut, requests waiting for a commit get no answer.
  void stop();

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace walhook::relay::inbox
