#include "relay/engine/leadership.hpp"

#include "common/log.hpp"
#include "sql/advisory_locks.hpp"
#include "sql/session.hpp"

#include <fmt/format.h>

namespace walhook::relay {
using namespace std::chrono_literals;
using boost::system::error_code;

// The lock of a slot: advisory lock, two-int form, classid = sql::advisory_lock_class, objid = hashtext(slot).
std::string try_lock_statement() {
  return fmt::format("SELECT pg_try_advisory_lock({}, hashtext($1))", sql::advisory_lock_class);
}

leadership::leadership(boost::asio::any_io_executor ex, leadership_options options)
    : options_(std::move(options)), conn_(ex) {}

void leadership::cancel() {
  cancelled_ = true;
  conn_.cancel();
}

void leadership::release() { conn_.close(); }

boost::asio::awaitable<error_code> leadership::acquire() {
  cancelled_ = false;
  // TCP keepalives: a peer that vanished without closing (network partition, power loss) ends
  // the session within about 25 s instead of the kernel's two hours.
  pg::connection::connect_params keepalives{
      {"keepalives", "1"}, {"keepalives_idle", "10"}, {"keepalives_interval", "5"}, {"keepalives_count", "3"}};
  if (auto ec = co_await sql::open_session(conn_, options_.conninfo, "walhook-lock " + options_.instance_name, 10s,
                                           keepalives)) {
    log::warn("leader.connect_failed", {{"error", conn_.last_error()}});
    co_return ec;
  }
  pg::params slot{options_.slot};
  auto tried = co_await conn_.async_exec(try_lock_statement(), slot, 10s);
  if (!tried) co_return tried.error();
  if (tried->value(0, 0) == "t") co_return error_code{};
  auto holder = co_await conn_.async_exec(
      fmt::format("SELECT a.pid, coalesce(a.application_name, ''), coalesce(host(a.client_addr), 'local'), "
                  "a.backend_start FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                  "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = {} "
                  "AND l.objid = hashtext($1)::oid AND l.objsubid = 2",
                  sql::advisory_lock_class),
      slot, 10s);
  if (holder && holder->rows() > 0) {
    std::string name(holder->value(0, 1));
    if (name.starts_with("walhook-lock ")) name = name.substr(13);
    log::info("standby.waiting", {{"slot", options_.slot},
                                  {"active_pid", std::string(holder->value(0, 0))},
                                  {"active_instance", name},
                                  {"active_client", std::string(holder->value(0, 2))},
                                  {"active_since", std::string(holder->value(0, 3))}});
  } else {
    log::info("standby.waiting", {{"slot", options_.slot}});
  }
  if (cancelled_) co_return error_code(pg::errc::cancelled);
  // Block on the server until the active instance's session ends: no polling. (After a day the
  // wait times out, which closes the session; the caller starts over.)
  auto got = co_await conn_.async_exec(fmt::format("SELECT pg_advisory_lock({}, hashtext($1))", sql::advisory_lock_class), slot,
                                       std::chrono::hours{24});
  if (!got) co_return got.error();
  co_return error_code{};
}

boost::asio::awaitable<error_code> leadership::watch() {
  auto ec = co_await conn_.async_wait_closed();
  if (ec != pg::errc::cancelled) log::warn("leader.lost", {{"error", conn_.last_error()}});
  co_return ec;
}

}  // namespace walhook::relay
