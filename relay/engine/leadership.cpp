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
  // A standby re-checks who holds the lock every minute (lock_timeout): a holder that is not a
  // walhook instance is an incident, reported while it lasts.
  if (auto set = co_await conn_.async_exec("SET lock_timeout = '60s'", {}, 10s); !set) co_return set.error();
  pg::params slot{options_.slot};
  for (;;) {
    auto tried = co_await conn_.async_exec(try_lock_statement(), slot, 10s);
    if (!tried) co_return tried.error();
    if (tried->value(0, 0) == "t") break;
    if (auto ec = co_await check_holder()) co_return ec;
    if (cancelled_) co_return error_code(pg::errc::cancelled);
    // Block on the server until the active instance's session ends: no polling. After a minute
    // the wait ends (lock_not_available) and the holder is checked again.
    auto got = co_await conn_.async_exec(
        fmt::format("SELECT pg_advisory_lock({}, hashtext($1))", sql::advisory_lock_class), slot, 90s);
    if (got) break;
    if (conn_.last_sqlstate() != "55P03") co_return got.error();
  }
  if (foreign_) log::info("leader.lock_foreign_gone", {{"slot", options_.slot}});
  foreign_.reset();
  last_holder_pid_.clear();
  co_return error_code{};
}

// Who holds the lock. walhook's lock sessions run as walhook's role with application_name
// "walhook-lock <instance>"; any role may take an advisory lock, so a holder of another role —
// the application's, say — or another application name is not a walhook instance: the slot
// goes unserved while it holds the lock. That is an incident (error log, /readyz, metric).
boost::asio::awaitable<error_code> leadership::check_holder() {
  const pg::params slot{options_.slot};
  auto holder = co_await conn_.async_exec(
      fmt::format("SELECT a.pid::text, coalesce(a.application_name, ''), coalesce(host(a.client_addr), 'local'), "
                  "coalesce(a.backend_start::text, ''), coalesce(a.usename::text, ''), "
                  "(a.usename IS DISTINCT FROM current_user OR coalesce(a.application_name, '') NOT LIKE 'walhook-lock %') "
                  "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                  "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = {} "
                  "AND l.objid = hashtext($1)::oid AND l.objsubid = 2",
                  sql::advisory_lock_class),
      slot, 10s);
  if (!holder) co_return holder.error();
  if (holder->rows() == 0) {
    if (last_holder_pid_ != "none") log::info("standby.waiting", {{"slot", options_.slot}});
    last_holder_pid_ = "none";
    co_return error_code{};
  }
  const std::string pid(holder->value(0, 0));
  std::string name(holder->value(0, 1));
  const std::string role(holder->value(0, 4));
  const bool foreign = holder->value(0, 5) == "t";
  if (pid == last_holder_pid_) co_return error_code{};  // said already
  last_holder_pid_ = pid;
  if (foreign) {
    foreign_ = fmt::format("pid {}, role {}, application_name \"{}\"", pid, role, name);
    const std::string hint = fmt::format(
        "a session that is not a walhook instance holds the slot's leadership lock: nothing is delivered until it "
        "ends (pg_terminate_backend({}))",
        pid);
    log::error("leader.lock_foreign",
               {{"slot", options_.slot}, {"holder_pid", pid}, {"holder_role", role}, {"holder_application", name},
                {"holder_client", std::string(holder->value(0, 2))},
                {"hint", hint}});
    co_return error_code{};
  }
  if (foreign_) log::info("leader.lock_foreign_gone", {{"slot", options_.slot}});
  foreign_.reset();
  if (name.starts_with("walhook-lock ")) name = name.substr(13);
  log::info("standby.waiting", {{"slot", options_.slot},
                                {"active_pid", pid},
                                {"active_instance", name},
                                {"active_client", std::string(holder->value(0, 2))},
                                {"active_since", std::string(holder->value(0, 3))}});
  co_return error_code{};
}

boost::asio::awaitable<error_code> leadership::watch() {
  auto ec = co_await conn_.async_wait_closed();
  if (ec != pg::errc::cancelled) log::warn("leader.lost", {{"error", conn_.last_error()}});
  co_return ec;
}

}  // namespace walhook::relay
