#pragma once
// Versioned schema migrations (sql/migrations/NNN_name.sql), embedded into the binary at build
// time and applied in order by `walhook migrate`. Applied versions are recorded in
// walhook.schema_migrations; applying is idempotent and serialized by an advisory lock.

#include "common/pg_connection.hpp"

#include <boost/asio/awaitable.hpp>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::sql {

struct migration {
  int version;
  std::string_view name;  ///< file stem, e.g. "001_init"
  std::string_view sql;   ///< the file's text (several statements)
};

/// Every migration compiled into this binary, ascending by version.
std::span<const migration> embedded_migrations();

/// What migrate() did.
struct migrate_report {
  std::vector<std::string> applied;  ///< names applied now
  int current_version = 0;           ///< highest version after the call
};

/// Applies the missing migrations on an open connection, each in its own transaction
/// (advisory-locked so concurrent `walhook migrate` runs serialize). Errors: pg::errc
/// (connection::last_error() says which statement failed and why).
boost::asio::awaitable<boost::system::result<migrate_report>> migrate(pg::connection& conn);

/// Highest applied version, 0 if the schema was never migrated.
boost::asio::awaitable<boost::system::result<int>> schema_version(pg::connection& conn);

}  // namespace walhook::sql
