#pragma once
// Opening walhook's ordinary (non-replication) sessions the same way everywhere.

#include "common/pg_connection.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <string>
#include <string_view>

namespace walhook::sql {

/// Connects and sets the session up: TimeZone UTC and DateStyle ISO (timestamps are parsed as
/// "YYYY-MM-DD HH:MM:SS.ffffff+00"), jit off, application_name for pg_stat_activity. `extra`
/// adds libpq connection keywords (e.g. TCP keepalives).
boost::asio::awaitable<pg::error_code> open_session(pg::connection& conn, const std::string& conninfo,
                                                    std::string_view application_name,
                                                    std::chrono::milliseconds timeout,
                                                    pg::connection::connect_params extra = {});

}  // namespace walhook::sql
