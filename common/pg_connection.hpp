#pragma once
// A non-blocking libpq connection driven by Asio (the "third_party_lib" pattern): libpq does
// the protocol, Asio waits on PQsocket(). Used by the replication client (wal/) and by the state
// store (sql/). Never blocks the event loop; every wait has a deadline.
//
// Thread affinity: one connection belongs to one executor (strand or single-threaded io_context);
// at most one operation at a time.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <libpq-fe.h>

namespace walhook::pg {

using boost::system::error_code;
template <class T>
using result = boost::system::result<T>;

/// Errors of this module. The server's text and SQLSTATE, when there is one, are kept by the
/// connection (connection::last_error(), last_sqlstate()).
enum class errc {
  connect_failed = 1,  ///< PQconnectStart/PQconnectPoll failed (bad URL, refused, auth)
  connection_lost,     ///< socket closed or libpq reported the connection bad
  query_failed,        ///< the server answered with an error (see last_sqlstate())
  timeout,             ///< the operation's deadline passed
  cancelled,           ///< cancel() or close() was called while waiting
  copy_done,           ///< the server ended COPY mode (e.g. replication stream ended)
  not_connected,       ///< called before a successful async_connect
};
const boost::system::error_category& category();
inline error_code make_error_code(errc e) { return {static_cast<int>(e), category()}; }

/// An owned PGresult.
class query_result {
 public:
  query_result() = default;
  explicit query_result(PGresult* r) : res_(r, &PQclear) {}
  PGresult* get() const { return res_.get(); }
  ExecStatusType status() const { return res_ ? PQresultStatus(res_.get()) : PGRES_EMPTY_QUERY; }
  int rows() const { return res_ ? PQntuples(res_.get()) : 0; }
  int columns() const { return res_ ? PQnfields(res_.get()) : 0; }
  bool is_null(int row, int col) const { return PQgetisnull(res_.get(), row, col) != 0; }
  /// Text value of a field (empty for NULL). Valid while this result lives.
  std::string_view value(int row, int col) const {
    return {PQgetvalue(res_.get(), row, col), static_cast<std::size_t>(PQgetlength(res_.get(), row, col))};
  }
  std::optional<std::string> optional_value(int row, int col) const {
    if (is_null(row, col)) return std::nullopt;
    return std::string(value(row, col));
  }
  /// An integer field (int2/int4/int8 text), e.g. an id or a count; 0 for NULL or text that is
  /// not a whole decimal number.
  std::int64_t integer(int row, int col) const;
  /// integer(), or std::nullopt for NULL.
  std::optional<std::int64_t> optional_integer(int row, int col) const {
    if (is_null(row, col)) return std::nullopt;
    return integer(row, col);
  }
  /// Number of rows affected by INSERT/UPDATE/DELETE (PQcmdTuples), 0 if none.
  long affected() const;

 private:
  std::shared_ptr<PGresult> res_;
};

/// Text-format parameters; std::nullopt is SQL NULL.
using params = std::vector<std::optional<std::string>>;

/// One statement of a pipeline (extended query protocol).
struct statement {
  std::string sql;
  params args;
};

/// A CopyData payload received from the server; owns libpq's buffer.
class copy_buffer {
 public:
  copy_buffer() = default;
  copy_buffer(char* data, int size) : data_(data, &PQfreemem), size_(static_cast<std::size_t>(size)) {}
  std::span<const std::byte> bytes() const {
    return {reinterpret_cast<const std::byte*>(data_.get()), size_};
  }

 private:
  std::unique_ptr<char, void (*)(void*)> data_{nullptr, &PQfreemem};
  std::size_t size_ = 0;
};

class connection {
 public:
  using duration = std::chrono::milliseconds;

  explicit connection(boost::asio::any_io_executor ex);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  /// Extra connection parameters (libpq keywords) that override those of the conninfo string.
  using connect_params = std::vector<std::pair<std::string, std::string>>;

  /// Opens the connection (PQconnectStartParams/PQconnectPoll). `conninfo` is a libpq URL or
  /// key=value string; `extra` adds or overrides keywords (e.g. replication=database). With
  /// several hosts (`postgresql://a,b/db?target_session_attrs=read-write`), they are tried in
  /// order, each within the conninfo's connect_timeout or else an equal share of `timeout`
  /// (split_hosts()), so a host that never answers does not use up the whole deadline.
  /// Errors: errc::connect_failed (last_error() has libpq's message), errc::timeout.
  boost::asio::awaitable<error_code> async_connect(std::string conninfo, duration timeout,
                                                   connect_params extra = {});

  /// Runs one statement with the extended protocol (text parameters, text results).
  /// A server error is errc::query_failed with last_error()/last_sqlstate() set. A timeout or
  /// cancel in the middle of a command closes the connection (is_open() turns false): the
  /// protocol state is unknown, so the owner must reconnect.
  boost::asio::awaitable<result<query_result>> async_exec(std::string_view sql, const params& args,
                                                          duration timeout);

  /// Runs a string with the simple query protocol (several statements allowed; replication
  /// commands such as IDENTIFY_SYSTEM must use this). Returns the last result; a COPY result
  /// (START_REPLICATION) is returned as soon as it arrives.
  boost::asio::awaitable<result<query_result>> async_simple(std::string_view sql, duration timeout);

  /// Sends all statements in pipeline mode (libpq ≥ 14) followed by one sync: one round trip.
  /// Returns each statement's result in order. If one fails, the rest are aborted by the server
  /// and the call returns errc::query_failed (wrap them in BEGIN…COMMIT for all-or-nothing).
  boost::asio::awaitable<result<std::vector<query_result>>> async_pipeline(std::span<const statement> statements,
                                                                          duration timeout);

  /// Next CopyData message in COPY BOTH/OUT mode. errc::timeout if none arrived within
  /// `timeout` (the stream stays usable); errc::copy_done when the server ended the copy.
  boost::asio::awaitable<result<copy_buffer>> async_read_copy_data(duration timeout);

  /// Queues one CopyData message and flushes it.
  boost::asio::awaitable<error_code> async_write_copy_data(std::span<const std::byte> data, duration timeout);

  /// Waits, without a deadline, until the server ends this idle session — an error such as
  /// "terminating connection due to administrator command" (SQLSTATE 57P01), EOF, or a broken
  /// socket — and returns errc::connection_lost then; errc::cancelled on cancel()/close().
  /// Notices and notifications that arrive meanwhile are consumed. For a session that holds an
  /// advisory lock: the lock is gone exactly when this returns connection_lost.
  boost::asio::awaitable<error_code> async_wait_closed();

  /// Aborts the pending wait, if any, with errc::cancelled. The connection stays open.
  void cancel();
  /// Cancels and closes (PQfinish). Safe to call twice.
  void close();

  bool is_open() const;
  PGconn* native_handle() const { return conn_; }
  /// The server's (or libpq's) message for the last failure, single line.
  const std::string& last_error() const { return last_error_; }
  /// SQLSTATE of the last server error, e.g. "55006" (object_in_use); empty if none.
  const std::string& last_sqlstate() const { return last_sqlstate_; }
  /// Server parameter, e.g. "server_version"; empty if unknown.
  std::string parameter(const char* name) const;

 private:
  struct waiter;
  enum class want { read, write, read_or_write };
  boost::asio::awaitable<error_code> wait(want w, std::chrono::steady_clock::time_point deadline);
  boost::asio::awaitable<error_code> flush(std::chrono::steady_clock::time_point deadline);
  boost::asio::awaitable<result<query_result>> collect(std::chrono::steady_clock::time_point deadline,
                                                       bool stop_at_null);
  boost::asio::awaitable<error_code> connect_once(const std::vector<const char*>& keywords,
                                                  const std::vector<const char*>& values, bool expand_dbname,
                                                  std::chrono::steady_clock::time_point deadline);
  void rebind_socket();
  error_code abandon(error_code ec);
  void record_error(const PGresult* res);
  void record_connection_error(std::string_view what);

  boost::asio::any_io_executor ex_;
  PGconn* conn_ = nullptr;
  std::unique_ptr<waiter> waiter_;
  std::string last_error_;
  std::string last_sqlstate_;
};

/// One host's attempt out of a multi-host conninfo: every keyword libpq would use for it (the
/// conninfo's, then `extra`), with host, hostaddr and port narrowed to that host.
struct host_attempt {
  connection::connect_params params;
  /// The conninfo's connect_timeout, which libpq applies to each host (at least 2 s), if set.
  std::optional<std::chrono::seconds> connect_timeout;
};

/// The hosts of `conninfo` in the order libpq tries them, one attempt each. libpq ignores
/// connect_timeout in PQconnectPoll (its documentation leaves timing to the application), so
/// connection::async_connect() tries them one at a time. Empty when there is a single host, when
/// the conninfo does not parse (libpq reports that itself) or with
/// target_session_attrs=prefer-standby (libpq's own two passes over the hosts): connect as is.
std::vector<host_attempt> split_hosts(const std::string& conninfo, const connection::connect_params& extra);

/// Quotes an SQL identifier ("slot" → "\"slot\"") for commands that cannot take parameters
/// (replication commands, CREATE PUBLICATION).
std::string quote_identifier(std::string_view name);
/// Quotes an SQL string literal ('it''s'), standard_conforming_strings assumed.
std::string quote_literal(std::string_view text);

}  // namespace walhook::pg

template <>
struct boost::system::is_error_code_enum<walhook::pg::errc> : std::true_type {};
