#include "relay/admin/db_worker.hpp"

#include "common/log.hpp"
#include "relay/admin/http_status.hpp"
#include "relay/operations/blocking_db.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

namespace walhook::relay {
namespace asio = boost::asio;

namespace {

/// The worker's connection, used on the worker thread only.
struct connection_state {
  std::string url;
  std::unique_ptr<blocking_db> db;

  bool connection_bad() const { return !db || PQstatus(db->native()) != CONNECTION_OK; }

  /// An action that failed half-way leaves nothing behind.
  void rollback() {
    if (!db || PQtransactionStatus(db->native()) == PQTRANS_IDLE) return;
    try {
      db->exec("ROLLBACK");
    } catch (const user_error&) {
      db.reset();
    }
  }

  /// The answer to a user error, or nullopt if the connection broke under it (the caller says
  /// 503 "database unreachable"); rolls back what the job began.
  std::optional<api_response> unless_unreachable(const user_error& e) {
    if (connection_bad()) {
      db.reset();
      return error_response(503, fmt::format("database unreachable: {}", e.what()));
    }
    rollback();
    return std::nullopt;
  }

  /// PostgreSQL refused a statement: by its SQLSTATE, the caller's input or the server's trouble.
  static api_response refused(const pg_error& e) {
    const unsigned status = http_status_of(e.kind());
    if (status < 500) return error_response(status, e.what());
    log::warn("admin.database_failed", {{"sqlstate", e.sqlstate()}, {"error", e.what()}});
    if (e.kind() == error_kind::timed_out)
      return error_response(status,
                            fmt::format("the database did not answer in time (statement timeout, 10 s): {}", e.what()));
    return error_response(status, fmt::format("database failure ({}): {}", e.sqlstate(), e.what()));
  }

  api_response with_db(const db_worker::job& f) {
    try {
      if (connection_bad()) {
        db.reset();
        db = std::make_unique<blocking_db>(url, "walhook-admin");
        db->exec("SET statement_timeout = '10s'");
      }
      return f(*db);
    } catch (const pg_error& e) {
      if (auto unreachable = unless_unreachable(e)) return *unreachable;
      return refused(e);
    } catch (const user_error& e) {
      // walhook's own checks (relay/operations/, the body, the route): 4xx by kind.
      if (auto unreachable = unless_unreachable(e)) return *unreachable;
      return error_response(e);
    } catch (const std::exception& e) {
      db.reset();  // its state is unknown
      log::error("admin.api_failed", {{"error", e.what()}});
      return error_response(500, e.what());
    }
  }
};

}  // namespace

struct db_worker::impl {
  std::shared_ptr<connection_state> state;
  asio::thread_pool pool{1};  ///< one thread: jobs in order
};

db_worker::db_worker(std::string database_url) : impl_(std::make_unique<impl>()) {
  impl_->state = std::make_shared<connection_state>(connection_state{std::move(database_url), nullptr});
}

db_worker::~db_worker() { impl_->pool.join(); }

asio::awaitable<api_response> db_worker::run(job f) {
  return asio::co_spawn(
      impl_->pool, [s = impl_->state, f = std::move(f)]() -> asio::awaitable<api_response> { co_return s->with_db(f); },
      asio::use_awaitable);
}

void db_worker::stop() {
  impl_->pool.stop();
  impl_->pool.join();
}

}  // namespace walhook::relay
