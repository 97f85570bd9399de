#pragma once
// The admin API's database worker: one blocking connection (relay/operations/blocking_db.hpp)
// on a thread of its own, so a slow query or PostgreSQL being down never blocks the engine's io
// thread. Reads and actions run on it in order; what they throw becomes the answer here, once:
// a user error by its kind (relay/admin/http_status.hpp), a statement PostgreSQL refused by its
// SQLSTATE, an unreachable database 503 (the connection is made again next time).
//
// Thread affinity: run() and stop() from the engine's executor; the functions given to run()
// run on the worker thread.

#include "relay/admin/request.hpp"

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <memory>
#include <string>

namespace walhook::relay {

class blocking_db;

/// The worker thread and its connection; owned by the admin API, outlives every job it runs.
class db_worker {
 public:
  /// What runs on the worker: reads and writes with the connection, returns the answer; throws
  /// what blocking_db and relay/operations/ throw (or invalid_input, not_found, … of its own).
  using job = std::function<api_response(blocking_db&)>;

  /// Connects to `database_url` lazily, at the first job (application_name walhook-admin,
  /// statement_timeout 10 s).
  explicit db_worker(std::string database_url);
  /// Joins the thread: a query still running ends within statement_timeout.
  ~db_worker();
  db_worker(const db_worker&) = delete;
  db_worker& operator=(const db_worker&) = delete;

  /// Runs `f` on the worker thread and answers what it returns or, if it throws: a user error
  /// with the status of its kind (4xx; 503/504 for PostgreSQL's trouble, logged as
  /// admin.database_failed), 503 "database unreachable: …" if the connection broke, 500 for
  /// anything else (logged as admin.api_failed). An action that failed half-way is rolled
  /// back. The awaiting coroutine resumes on its own executor. Not a coroutine itself: GCC 12
  /// destroyed a temporary std::function argument of a coroutine twice (its captures freed twice).
  boost::asio::awaitable<api_response> run(job f);

  /// Stops the thread after the job it runs, if any; later jobs never finish.
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace walhook::relay
