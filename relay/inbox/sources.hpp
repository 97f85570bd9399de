#pragma once
// walhook.inbox_sources as the ingest server reads them (sql/migrations/010_inbox.sql): the SQL
// that lists them and the parse of one row into a relay::inbox::source_config.

#include "common/pg_connection.hpp"
#include "relay/inbox/schemes.hpp"

#include <boost/system/result.hpp>

#include <string>
#include <string_view>

namespace walhook::relay::inbox {

/// Every source, one row each, in the columns source_of_row reads. Secrets past their
/// rotation grace (secret_grace_until) are left out by the query itself (PostgreSQL's clock).
extern const std::string_view sources_query;

/// One row of sources_query. Errors: the row's problem in words (check_source's, or an unknown
/// scheme or value source written by hand into the table), never a secret.
boost::system::result<source_config, std::string> source_of_row(const pg::query_result& rows, int row);

/// A source's name as POST /in/{name} and the table allow it: 1–63 of [a-z0-9_-], starting
/// with a letter or digit.
bool valid_source_name(std::string_view name);

/// The tenant of a source's events and destinations (walhook.outbox.tenant_id,
/// walhook.endpoints.tenant_id): "inbox:" + name. Only walhook writes events of it.
std::string inbox_tenant(std::string_view source_name);

}  // namespace walhook::relay::inbox
