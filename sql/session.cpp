#include "sql/session.hpp"

#include <fmt/format.h>

namespace walhook::sql {

boost::asio::awaitable<pg::error_code> open_session(pg::connection& conn, const std::string& conninfo,
                                                    std::string_view application_name,
                                                    std::chrono::milliseconds timeout,
                                                    pg::connection::connect_params extra) {
  if (auto ec = co_await conn.async_connect(conninfo, timeout, std::move(extra))) co_return ec;
  auto set = co_await conn.async_simple(
      // jit off: walhook's statements are short; compiling them would cost far more than running them.
      fmt::format("SET TimeZone = 'UTC'; SET DateStyle = 'ISO'; SET jit = off; SET application_name = {}",
                  pg::quote_literal(application_name)),
      timeout);
  if (!set) co_return set.error();
  co_return pg::error_code{};
}

}  // namespace walhook::sql
