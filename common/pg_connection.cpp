#include "common/pg_connection.hpp"

#include "common/log.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <charconv>
#include <algorithm>
#include <cstdlib>

namespace walhook::pg {
namespace asio = boost::asio;
using clock = std::chrono::steady_clock;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

namespace {

class pg_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "walhook.pg"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::connect_failed: return "could not connect to PostgreSQL";
      case errc::connection_lost: return "connection to PostgreSQL lost";
      case errc::query_failed: return "PostgreSQL reported an error";
      case errc::timeout: return "PostgreSQL operation timed out";
      case errc::cancelled: return "PostgreSQL operation cancelled";
      case errc::copy_done: return "PostgreSQL ended the COPY stream";
      case errc::not_connected: return "not connected to PostgreSQL";
    }
    return "unknown walhook.pg error";
  }
};

std::string one_line(std::string_view text) {
  std::string out(text);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  for (char& c : out)
    if (c == '\n') c = ' ';
  return out;
}

// Server NOTICEs ("schema already exists, skipping") go to the debug log, not to stderr.
void notice_to_log(void*, const char* message) {
  log::debug("postgres.notice", {{"message", one_line(message ? message : "")}});
}

}  // namespace

const boost::system::error_category& category() {
  static const pg_category cat;
  return cat;
}

std::int64_t query_result::integer(int row, int col) const {
  const auto text = value(row, col);
  std::int64_t v = 0;
  if (std::from_chars(text.data(), text.data() + text.size(), v).ec != std::errc{}) return 0;
  return v;
}

long query_result::affected() const {
  if (!res_) return 0;
  const char* n = PQcmdTuples(res_.get());
  return (n && *n) ? std::strtol(n, nullptr, 10) : 0;
}

/// The Asio side of the socket libpq owns: registered with the reactor, never closed by Asio.
struct connection::waiter {
  explicit waiter(asio::any_io_executor ex) : descriptor(ex), timer(ex) {}
  asio::posix::stream_descriptor descriptor;
  asio::steady_timer timer;
  bool cancelled = false;
};

connection::connection(asio::any_io_executor ex) : ex_(std::move(ex)), waiter_(std::make_unique<waiter>(ex_)) {}

connection::~connection() { close(); }

bool connection::is_open() const { return conn_ && PQstatus(conn_) == CONNECTION_OK; }

std::string connection::parameter(const char* name) const {
  if (!conn_) return {};
  const char* v = PQparameterStatus(conn_, name);
  return v ? v : "";
}

void connection::rebind_socket() {
  error_code ignored;
  if (waiter_->descriptor.is_open()) waiter_->descriptor.release();
  if (conn_ && PQsocket(conn_) >= 0) waiter_->descriptor.assign(PQsocket(conn_), ignored);
}

void connection::cancel() {
  waiter_->cancelled = true;
  error_code ignored;
  if (waiter_->descriptor.is_open()) waiter_->descriptor.cancel(ignored);
  waiter_->timer.cancel();
}

void connection::close() {
  if (waiter_) {
    cancel();
    if (waiter_->descriptor.is_open()) waiter_->descriptor.release();
  }
  if (conn_) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
}

void connection::record_error(const PGresult* res) {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  last_sqlstate_ = state ? state : "";
  const char* primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  if (primary) {
    last_error_ = one_line(primary);
    if (const char* detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL)) last_error_ += " (" + one_line(detail) + ")";
  } else if (res && *PQresultErrorMessage(res)) {
    last_error_ = one_line(PQresultErrorMessage(res));
  } else {
    last_error_ = conn_ ? one_line(PQerrorMessage(conn_)) : "no connection";
  }
}

error_code connection::abandon(error_code ec) {
  // The protocol is mid-command: the connection cannot be reused, and a later call on it would
  // fail forever. Close it, so the owner reconnects.
  if (ec == errc::timeout) {
    last_sqlstate_.clear();
    last_error_ = "PostgreSQL did not answer in time";
  }
  close();
  return ec;
}

void connection::record_connection_error(std::string_view what) {
  last_sqlstate_.clear();
  std::string msg = conn_ ? one_line(PQerrorMessage(conn_)) : std::string();
  last_error_ = msg.empty() ? std::string(what) : std::string(what) + ": " + msg;
}

asio::awaitable<error_code> connection::wait(want w, clock::time_point deadline) {
  auto& wt = *waiter_;
  if (wt.cancelled) co_return errc::cancelled;
  if (!wt.descriptor.is_open()) co_return errc::connection_lost;
  wt.timer.expires_at(deadline);
  using dt = asio::posix::descriptor_base::wait_type;
  namespace ex = asio::experimental;
  // A parallel group of the raw operations, not awaitable_operators' `||`: that one runs each
  // side as a co_spawned coroutine, which honours terminal cancellation only. A `total`
  // cancellation of the caller (a claim at shutdown) was then swallowed by both sides yet
  // counted by the group, which from then on never cancelled the loser: the socket answered,
  // and the query still waited for its timer (statement_timeout, 30 s), holding the reader.
  // Raw operations honour every cancellation type, so the group ends with the first of them.
  bool timer_first = false;
  error_code ec;
  if (w == want::read_or_write) {
    auto [order, ec_read, ec_write, ec_timer] = co_await ex::make_parallel_group(
        wt.descriptor.async_wait(dt::wait_read, asio::deferred), wt.descriptor.async_wait(dt::wait_write, asio::deferred),
        wt.timer.async_wait(asio::deferred)).async_wait(ex::wait_for_one(), asio::use_awaitable);
    timer_first = order[0] == 2;
    ec = order[0] == 0 ? ec_read : order[0] == 1 ? ec_write : ec_timer;
  } else {
    auto [order, ec_io, ec_timer] = co_await ex::make_parallel_group(
        wt.descriptor.async_wait(w == want::read ? dt::wait_read : dt::wait_write, asio::deferred),
        wt.timer.async_wait(asio::deferred)).async_wait(ex::wait_for_one(), asio::use_awaitable);
    timer_first = order[0] == 1;
    ec = timer_first ? ec_timer : ec_io;
  }
  if (wt.cancelled || ec == asio::error::operation_aborted) co_return errc::cancelled;
  if (timer_first) co_return errc::timeout;
  if (ec) co_return errc::connection_lost;
  co_return error_code{};
}

std::vector<host_attempt> split_hosts(const std::string& conninfo, const connection::connect_params& extra) {
  char* parse_error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &parse_error);
  if (parse_error) PQfreemem(parse_error);
  if (!parsed) return {};
  connection::connect_params all;
  for (const PQconninfoOption* o = parsed; o->keyword; ++o)
    if (o->val) all.emplace_back(o->keyword, o->val);
  PQconninfoFree(parsed);
  auto find = [&all](std::string_view keyword) {
    return std::find_if(all.begin(), all.end(), [&](const auto& kv) { return kv.first == keyword; });
  };
  for (const auto& [k, v] : extra) {
    if (auto it = find(k); it != all.end()) it->second = v;
    else all.emplace_back(k, v);
  }
  auto value = [&](std::string_view keyword) {
    auto it = find(keyword);
    return it == all.end() ? std::string() : it->second;
  };
  auto list = [](const std::string& text) {
    std::vector<std::string> out;
    if (text.empty()) return out;
    std::size_t from = 0;
    for (std::size_t comma; (comma = text.find(',', from)) != std::string::npos; from = comma + 1)
      out.push_back(text.substr(from, comma - from));
    out.push_back(text.substr(from));
    return out;
  };
  const auto hosts = list(value("host")), addresses = list(value("hostaddr")), ports = list(value("port"));
  const std::size_t n = std::max(hosts.size(), addresses.size());
  // Lists libpq would refuse (mismatched lengths) are left to libpq to report.
  if (n <= 1 || value("target_session_attrs") == "prefer-standby" || (!hosts.empty() && hosts.size() != n) ||
      (!addresses.empty() && addresses.size() != n) || (ports.size() > 1 && ports.size() != n))
    return {};
  std::optional<std::chrono::seconds> timeout;
  if (const int t = std::atoi(value("connect_timeout").c_str()); t > 0) timeout = std::chrono::seconds{std::max(t, 2)};
  std::vector<host_attempt> out;
  for (std::size_t i = 0; i < n; ++i) {
    host_attempt a{all, timeout};
    for (auto& [k, v] : a.params) {
      if (k == "host") v = hosts[i];
      else if (k == "hostaddr") v = addresses[i];
      else if (k == "port" && ports.size() > 1) v = ports[i];
    }
    out.push_back(std::move(a));
  }
  return out;
}

asio::awaitable<error_code> connection::async_connect(std::string conninfo, duration timeout,
                                                      connect_params extra) {
  const auto deadline = clock::now() + timeout;
  const auto hosts = split_hosts(conninfo, extra);
  if (hosts.empty()) {
    // "dbname" with expand_dbname = 1 expands a URL or key=value string; later keywords override.
    std::vector<const char*> keywords{"dbname"};
    std::vector<const char*> values{conninfo.c_str()};
    for (const auto& [k, v] : extra) {
      keywords.push_back(k.c_str());
      values.push_back(v.c_str());
    }
    co_return co_await connect_once(keywords, values, true, deadline);
  }
  // One host at a time, each within its connect_timeout or an equal share of what is left: in
  // PQconnectPoll libpq never gives up on a host by itself, so a host that accepts TCP but never
  // answers (a hung server), or whose SYNs go unanswered (a dead machine), would use up the whole
  // deadline on every attempt and the next host — a promoted standby — would never be tried.
  std::string errors;
  error_code ec = errc::timeout;
  for (std::size_t i = 0; i < hosts.size() && clock::now() < deadline; ++i) {
    const auto now = clock::now();
    const auto share = hosts[i].connect_timeout ? clock::duration(*hosts[i].connect_timeout)
                                                : (deadline - now) / static_cast<int>(hosts.size() - i);
    std::vector<const char*> keywords, values;
    for (const auto& [k, v] : hosts[i].params) {
      keywords.push_back(k.c_str());
      values.push_back(v.c_str());
    }
    ec = co_await connect_once(keywords, values, false, std::min(deadline, now + share));
    if (!ec || ec == errc::cancelled) co_return ec;
    errors += (errors.empty() ? "" : "; ") + last_error_;
  }
  last_error_ = errors.empty() ? "connection timed out" : errors;
  co_return ec;
}

asio::awaitable<error_code> connection::connect_once(const std::vector<const char*>& keywords_in,
                                                     const std::vector<const char*>& values_in, bool expand_dbname,
                                                     clock::time_point deadline) {
  close();
  waiter_->cancelled = false;
  last_error_.clear();
  last_sqlstate_.clear();
  std::vector<const char*> keywords = keywords_in, values = values_in;
  keywords.push_back(nullptr);
  values.push_back(nullptr);
  conn_ = PQconnectStartParams(keywords.data(), values.data(), expand_dbname ? 1 : 0);
  if (conn_) PQsetNoticeProcessor(conn_, &notice_to_log, nullptr);
  if (!conn_ || PQstatus(conn_) == CONNECTION_BAD) {
    record_connection_error("connection failed");
    co_return errc::connect_failed;
  }
  PostgresPollingStatusType poll = PGRES_POLLING_WRITING;
  for (;;) {
    if (poll == PGRES_POLLING_OK) break;
    if (poll == PGRES_POLLING_FAILED) {
      record_connection_error("connection failed");
      co_return errc::connect_failed;
    }
    rebind_socket();  // libpq may open a new socket per address it tries
    error_code ec = co_await wait(poll == PGRES_POLLING_READING ? want::read : want::write, deadline);
    if (ec == errc::timeout) {
      record_connection_error("connection timed out");
      co_return ec;
    }
    if (ec == errc::cancelled) co_return ec;
    // A closed or reset socket is reported by PQconnectPoll itself.
    poll = PQconnectPoll(conn_);
  }
  rebind_socket();
  if (PQsetnonblocking(conn_, 1) != 0) {
    record_connection_error("could not set non-blocking mode");
    co_return errc::connect_failed;
  }
  co_return error_code{};
}

asio::awaitable<error_code> connection::flush(clock::time_point deadline) {
  for (;;) {
    int r = PQflush(conn_);
    if (r == 0) co_return error_code{};
    if (r < 0) {
      record_connection_error("could not send to server");
      co_return errc::connection_lost;
    }
    // Libpq's advice: wait for either; if the server sent something, read it so it can't block us.
    if (error_code ec = co_await wait(want::read_or_write, deadline)) co_return abandon(ec);
    if (!PQconsumeInput(conn_)) {
      record_connection_error("connection lost");
      co_return errc::connection_lost;
    }
  }
}

asio::awaitable<result<query_result>> connection::collect(clock::time_point deadline, bool stop_at_null) {
  query_result last;
  bool failed = false;
  for (;;) {
    while (PQisBusy(conn_)) {
      if (error_code ec = co_await wait(want::read, deadline)) co_return abandon(ec);
      if (!PQconsumeInput(conn_)) {
        record_connection_error("connection lost");
        co_return errc::connection_lost;
      }
    }
    PGresult* raw = PQgetResult(conn_);
    if (!raw) break;
    query_result res(raw);
    ExecStatusType st = res.status();
    if (st == PGRES_COPY_BOTH || st == PGRES_COPY_OUT || st == PGRES_COPY_IN) co_return res;
    if (st == PGRES_FATAL_ERROR || st == PGRES_NONFATAL_ERROR || st == PGRES_BAD_RESPONSE) {
      if (!failed) record_error(res.get());
      failed = true;
    }
    last = std::move(res);
    if (stop_at_null && st == PGRES_PIPELINE_SYNC) break;
  }
  if (failed) co_return errc::query_failed;
  if (PQstatus(conn_) == CONNECTION_BAD) {
    record_connection_error("connection lost");
    co_return errc::connection_lost;
  }
  co_return last;
}

asio::awaitable<result<query_result>> connection::async_exec(std::string_view sql, const params& args,
                                                             duration timeout) {
  if (!is_open()) co_return errc::not_connected;
  waiter_->cancelled = false;
  auto deadline = clock::now() + timeout;
  std::vector<const char*> values;
  values.reserve(args.size());
  for (const auto& a : args) values.push_back(a ? a->c_str() : nullptr);
  std::string text(sql);
  if (!PQsendQueryParams(conn_, text.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                         nullptr, 0)) {
    record_connection_error("could not send query");
    co_return errc::connection_lost;
  }
  if (error_code ec = co_await flush(deadline)) co_return ec;
  co_return co_await collect(deadline, false);
}

asio::awaitable<result<query_result>> connection::async_simple(std::string_view sql, duration timeout) {
  if (!is_open()) co_return errc::not_connected;
  waiter_->cancelled = false;
  auto deadline = clock::now() + timeout;
  std::string text(sql);
  if (!PQsendQuery(conn_, text.c_str())) {
    record_connection_error("could not send query");
    co_return errc::connection_lost;
  }
  if (error_code ec = co_await flush(deadline)) co_return ec;
  co_return co_await collect(deadline, false);
}

asio::awaitable<result<std::vector<query_result>>> connection::async_pipeline(std::span<const statement> statements,
                                                                             duration timeout) {
  if (!is_open()) co_return errc::not_connected;
  waiter_->cancelled = false;
  auto deadline = clock::now() + timeout;
  if (!PQenterPipelineMode(conn_)) {
    record_connection_error("could not enter pipeline mode");
    co_return errc::connection_lost;
  }
  struct exit_guard {
    PGconn* const& c;  // the connection may have been closed meanwhile (conn_ = nullptr)
    ~exit_guard() {
      if (c) PQexitPipelineMode(c);
    }
  } guard{conn_};
  for (const auto& st : statements) {
    std::vector<const char*> values;
    values.reserve(st.args.size());
    for (const auto& a : st.args) values.push_back(a ? a->c_str() : nullptr);
    if (!PQsendQueryParams(conn_, st.sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                           nullptr, 0)) {
      record_connection_error("could not queue pipelined query");
      co_return errc::connection_lost;
    }
  }
  if (!PQpipelineSync(conn_)) {
    record_connection_error("could not send pipeline sync");
    co_return errc::connection_lost;
  }
  if (error_code ec = co_await flush(deadline)) co_return ec;

  std::vector<query_result> results;
  results.reserve(statements.size());
  bool failed = false;
  // Each statement yields its result(s) then a NULL; the sync yields PGRES_PIPELINE_SYNC.
  for (;;) {
    while (PQisBusy(conn_)) {
      if (error_code ec = co_await wait(want::read, deadline)) co_return abandon(ec);
      if (!PQconsumeInput(conn_)) {
        record_connection_error("connection lost");
        co_return errc::connection_lost;
      }
    }
    PGresult* raw = PQgetResult(conn_);
    if (!raw) continue;  // end of one statement's results
    query_result res(raw);
    ExecStatusType st = res.status();
    if (st == PGRES_PIPELINE_SYNC) break;
    if (st == PGRES_FATAL_ERROR || st == PGRES_NONFATAL_ERROR || st == PGRES_BAD_RESPONSE) {
      if (!failed) record_error(res.get());
      failed = true;
    }
    results.push_back(std::move(res));
  }
  if (failed) co_return errc::query_failed;
  co_return results;
}

asio::awaitable<result<copy_buffer>> connection::async_read_copy_data(duration timeout) {
  if (!conn_) co_return errc::not_connected;
  waiter_->cancelled = false;
  auto deadline = clock::now() + timeout;
  for (;;) {
    char* buf = nullptr;
    int n = PQgetCopyData(conn_, &buf, 1);
    if (n > 0) co_return copy_buffer(buf, n);
    if (n == 0) {
      if (error_code ec = co_await wait(want::read, deadline)) co_return ec;
      if (!PQconsumeInput(conn_)) {
        record_connection_error("replication connection lost");
        co_return errc::connection_lost;
      }
      continue;
    }
    if (n == -1) {
      // The server ended the copy; its final result says why (e.g. the slot was dropped).
      auto res = co_await collect(deadline, false);
      if (!res && res.error() != errc::query_failed) record_connection_error("replication stream ended");
      if (res) last_error_ = "server ended the replication stream";
      co_return errc::copy_done;
    }
    record_connection_error("replication stream failed");
    co_return errc::connection_lost;
  }
}

asio::awaitable<error_code> connection::async_write_copy_data(std::span<const std::byte> data, duration timeout) {
  if (!conn_) co_return errc::not_connected;
  waiter_->cancelled = false;
  auto deadline = clock::now() + timeout;
  for (;;) {
    int r = PQputCopyData(conn_, reinterpret_cast<const char*>(data.data()), static_cast<int>(data.size()));
    if (r == 1) break;
    if (r < 0) {
      record_connection_error("could not send CopyData");
      co_return errc::connection_lost;
    }
    if (error_code ec = co_await wait(want::write, deadline)) co_return abandon(ec);
  }
  co_return co_await flush(deadline);
}

asio::awaitable<error_code> connection::async_wait_closed() {
  if (!is_open()) co_return errc::not_connected;
  waiter_->cancelled = false;
  for (;;) {
    error_code ec = co_await wait(want::read, clock::time_point::max());
    if (ec == errc::cancelled) co_return ec;
    if (ec || !PQconsumeInput(conn_) || PQstatus(conn_) == CONNECTION_BAD) {
      record_connection_error("session ended");
      co_return errc::connection_lost;
    }
    while (PGnotify* n = PQnotifies(conn_)) PQfreemem(n);
  }
}

std::string quote_identifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string quote_literal(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  out += '\'';
  return out;
}

}  // namespace walhook::pg
