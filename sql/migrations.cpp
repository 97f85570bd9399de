#include "sql/migrations.hpp"

#include "sql/advisory_locks.hpp"

#include <fmt/format.h>

namespace walhook::sql {
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {
// Migrations one at a time: the advisory lock's one-bigint-key form (sql/advisory_locks.hpp).
const std::string lock_sql = fmt::format("SELECT pg_advisory_xact_lock({})", advisory_lock_class);
constexpr auto statement_timeout = 120s;
}  // namespace

asio::awaitable<boost::system::result<int>> schema_version(pg::connection& conn) {
  auto exists = co_await conn.async_exec("SELECT to_regclass('walhook.schema_migrations') IS NOT NULL", pg::params{}, 30s);
  if (!exists) co_return exists.error();
  if (exists->value(0, 0) != "t") co_return 0;
  auto v = co_await conn.async_exec("SELECT coalesce(max(version), 0) FROM walhook.schema_migrations", pg::params{}, 30s);
  if (!v) co_return v.error();
  co_return std::stoi(std::string(v->value(0, 0)));
}

asio::awaitable<boost::system::result<migrate_report>> migrate(pg::connection& conn) {
  migrate_report report;
  for (const migration& m : embedded_migrations()) {
    std::string script = fmt::format(
        "BEGIN;\n{};\n"
        "CREATE SCHEMA IF NOT EXISTS walhook;\n"
        "CREATE TABLE IF NOT EXISTS walhook.schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
        "applied_at timestamptz NOT NULL DEFAULT now());\n",
        lock_sql);
    auto begin = co_await conn.async_simple(script, statement_timeout);
    if (!begin) co_return begin.error();
    pg::params version_param{std::to_string(m.version)};
    auto applied = co_await conn.async_exec("SELECT 1 FROM walhook.schema_migrations WHERE version = $1",
                                            version_param, statement_timeout);
    if (!applied) {
      (void)co_await conn.async_simple("ROLLBACK", statement_timeout);
      co_return applied.error();
    }
    if (applied->rows() > 0) {
      (void)co_await conn.async_simple("COMMIT", statement_timeout);
      report.current_version = m.version;
      continue;
    }
    auto run = co_await conn.async_simple(m.sql, statement_timeout);
    if (!run) {
      (void)co_await conn.async_simple("ROLLBACK", statement_timeout);
      co_return run.error();
    }
    pg::params record_params{std::to_string(m.version), std::string(m.name)};
    auto record = co_await conn.async_exec("INSERT INTO walhook.schema_migrations (version, name) VALUES ($1, $2)",
                                           record_params, statement_timeout);
    if (!record) {
      (void)co_await conn.async_simple("ROLLBACK", statement_timeout);
      co_return record.error();
    }
    auto commit = co_await conn.async_simple("COMMIT", statement_timeout);
    if (!commit) co_return commit.error();
    report.applied.emplace_back(m.name);
    report.current_version = m.version;
  }
  co_return report;
}

}  // namespace walhook::sql
