#include "relay/operations/blocking_db.hpp"

#include "common/log.hpp"

#include <vector>

namespace walhook::relay {

std::string one_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += ' ';
    } else if (c != '\t') {
      out += c;
    }
  }
  return out;
}

blocking_db::blocking_db(const std::string& url, const std::string& application_name, bool replication) {
  // connect_timeout before dbname: a URL's own (per host, e.g. 2 s with several hosts) wins over
  // the 10 s default, since with expand_dbname the URL's settings override earlier keywords.
  const char* keywords[] = {"connect_timeout", "dbname", "application_name", "options",
                            replication ? "replication" : nullptr, nullptr};
  const char* values[] = {"10", url.c_str(), application_name.c_str(), "-c TimeZone=UTC -c DateStyle=ISO", "database",
                          nullptr};
  conn_ = PQconnectdbParams(keywords, values, 1);
  if (conn_)
    PQsetNoticeProcessor(
        conn_, [](void*, const char* msg) { log::debug("postgres.notice", {{"message", one_line(msg ? msg : "")}}); },
        nullptr);
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
    std::string msg = conn_ ? one_line(PQerrorMessage(conn_)) : "out of memory";
    if (conn_) PQfinish(conn_);
    conn_ = nullptr;
    throw unavailable("cannot connect to PostgreSQL: " + msg);
  }
}

blocking_db::~blocking_db() {
  if (conn_) PQfinish(conn_);
}

namespace {
pg::query_result checked(PGconn* conn, pg::query_result res) {
  auto st = res.status();
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    const char* primary = res.get() ? PQresultErrorField(res.get(), PG_DIAG_MESSAGE_PRIMARY) : nullptr;
    std::string msg = primary ? primary : one_line(PQerrorMessage(conn));
    if (const char* hint = res.get() ? PQresultErrorField(res.get(), PG_DIAG_MESSAGE_HINT) : nullptr)
      msg += " (" + std::string(hint) + ")";
    const char* state = res.get() ? PQresultErrorField(res.get(), PG_DIAG_SQLSTATE) : nullptr;
    const char* constraint = res.get() ? PQresultErrorField(res.get(), PG_DIAG_CONSTRAINT_NAME) : nullptr;
    throw pg_error(one_line(msg), state ? state : "", constraint ? constraint : "");
  }
  return res;
}
}  // namespace

pg::query_result blocking_db::exec(const std::string& sql, const pg::params& params) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  return checked(conn_, pg::query_result(PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                                      values.data(), nullptr, nullptr, 0)));
}

pg::query_result blocking_db::simple(const std::string& sql) { return checked(conn_, pg::query_result(PQexec(conn_, sql.c_str()))); }

}  // namespace walhook::relay
