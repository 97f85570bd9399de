// Who may run what (issue 11): sql/roles.sql on a database never migrated, `walhook migrate` as
// walhook_migrator (CREATE on the database and REPLICATION, not a superuser; REPLICATION alone is
// not enough), the file again for the runtime roles — and a delivery to a receiver that checks
// the Standard Webhooks signature with its own code (scripts/webhook-receiver, Python standard
// library), so the signature is verified by something other than walhook's verifier.

#include "relay/operations/sources.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

using namespace walhook;

namespace {

int psql_file(const std::string& url, const std::string& file, std::string& out) {
  return relay::run_process({"psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", file}, "", out);
}

std::string as(const std::string& url, const std::string& role) {
  std::string u = url;
  return u.replace(u.find("postgres@"), 9, role + ":change-me@");
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("walhook_migrator migrates a new database; the other roles run walhook; an independent verifier accepts") {
  auto& pg = test::cluster();
  pg.psql("CREATE DATABASE roles_new");
  const std::string url = pg.url("roles_new");
  const std::string roles = std::string(WALHOOK_SOURCE_DIR) + "/sql/roles.sql";

  // Before migrate: the roles are created, the file stops at the missing schema.
  std::string out;
  REQUIRE(psql_file(url, roles, out) == 0);
  CHECK(out.find("Run walhook migrate as walhook_migrator") != std::string::npos);

  // REPLICATION alone does not create the schema.
  pg.psql("CREATE ROLE replication_only LOGIN REPLICATION PASSWORD 'change-me'");
  CHECK(test::run_walhook({"migrate", "--database-url", as(url, "replication_only")}, out) == 1);
  CHECK(out.find("permission denied for database roles_new") != std::string::npos);

  // Slot names are cluster-wide: this database gets its own.
  REQUIRE(test::run_walhook({"migrate", "--database-url", as(url, "walhook_migrator"), "--slot", "roles_new"}, out) == 0);
  CHECK(out.find("created replication slot roles_new") != std::string::npos);
  relay::blocking_db super(url);
  CHECK(test::query_value(super, "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'walhook'") ==
        "walhook_migrator");
  CHECK(test::query_value(super, "SELECT rolsuper FROM pg_roles WHERE rolname = 'walhook_migrator'") == "f");

  // After migrate: the grants; running the file again changes nothing and fails nothing.
  REQUIRE(psql_file(url, roles, out) == 0);
  REQUIRE(psql_file(url, roles, out) == 0);
  CHECK(test::run_walhook({"migrate", "--database-url", as(url, "walhook_migrator"), "--slot", "roles_new"}, out) == 0);

  // A receiver that shares no code with walhook.
  const std::string secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const int port = relay::free_tcp_port();
  const auto log = std::filesystem::temp_directory_path() / ("walhook-it-roles-receiver-" + std::to_string(::getpid()));
  std::filesystem::remove(log);
  const pid_t receiver = relay::spawn_process({"/usr/bin/env", "python3", std::string(WALHOOK_SOURCE_DIR) + "/scripts/webhook-receiver",
                                               "--secret", secret, "--port", std::to_string(port)},
                                              log.string());
  REQUIRE(test::eventually([&] { return test::http_get(static_cast<unsigned short>(port), "/healthz").first == 200; },
                           std::chrono::seconds(20)));

  const std::string hook = "http://127.0.0.1:" + std::to_string(port) + "/hook";
  REQUIRE(test::run_walhook({"endpoint", "add", "--database-url", as(url, "walhook_admin"), "--tenant", "t", "--url", hook,
                             "--secret", secret},
                            out) == 0);
  test::walhook_process relay(test::run_args(as(url, "walhook_relay"), "roles_new"));
  relay.start();
  REQUIRE(test::eventually([&] { return relay.count_in_log("\"replication.streaming\"") == 1; }, std::chrono::seconds(20)));
  REQUIRE(test::run_walhook({"send", "--database-url", as(url, "walhook_app"), "--tenant", "t", "--type", "order.paid",
                             "--data", R"({"order_id": 7})"},
                            out) == 0);
  std::string event_id = out.substr(0, out.find('\n'));
  CHECK(test::eventually([&] { return read_all(log.string()).find("\"webhook_id\": \"" + event_id + "\"") != std::string::npos; },
                         std::chrono::seconds(20)));
  const std::string received = read_all(log.string());
  CAPTURE(received);
  CHECK(received.find("\"valid\": true, \"type\": \"order.paid\"") != std::string::npos);
  CHECK(received.find("\"valid\": false") == std::string::npos);

  CHECK(relay.stop() == 0);
  ::kill(receiver, SIGTERM);
  ::waitpid(receiver, nullptr, 0);
  std::filesystem::remove(log);

  // Outbox cursors and dead ranges (issue 18) are walhook's: the application role can neither
  // read nor write them (it could make an endpoint skip events, or learn other tenants' ranges);
  // the admin role reads them, and may not move a cursor.
  relay::blocking_db app(as(url, "walhook_app"));
  for (const char* sql : {"SELECT count(*) FROM walhook.endpoint_cursors", "SELECT count(*) FROM walhook.dead_ranges",
                          "INSERT INTO walhook.endpoint_cursors (endpoint_id, tenant_id, covered, reason) "
                          "VALUES (1, 't', pg_current_snapshot(), 'x')",
                          "DELETE FROM walhook.endpoint_cursors",
                          // Inbox processing (migration 011): the application cannot make an endpoint
                          // defer (or retry) what it is told, nor reset an event's deferrals.
                          "UPDATE walhook.endpoints SET defer_statuses = '{500}', max_deferrals = 1000",
                          "UPDATE walhook.inbox_sources SET retry_schedule_ms = '{100}'",
                          "UPDATE walhook.deliveries SET deferrals = 0"}) {
    CAPTURE(sql);
    CHECK_THROWS_WITH(app.exec(sql), doctest::Contains("permission denied"));
  }
  relay::blocking_db admin(as(url, "walhook_admin"));
  CHECK(test::query_value(admin, "SELECT count(*) FROM walhook.endpoint_cursors") == "0");
  CHECK(test::query_value(admin, "SELECT count(*) FROM walhook.dead_ranges") == "0");
  CHECK_THROWS_WITH(admin.exec("UPDATE walhook.endpoint_cursors SET covered = pg_current_snapshot()"),
                    doctest::Contains("permission denied"));

  // walhook run's role runs retention over the inbox's tables (the statement walhook runs) and
  // shows the sources in the console, but reads neither a source's secret nor a reused id's body.
  REQUIRE(test::run_walhook({"inbox", "source", "add", "--database-url", as(url, "walhook_admin"), "--name", "partner",
                             "--scheme", "standard-webhooks", "--secret", secret, "--destination", hook},
                            out) == 0);
  relay::blocking_db relay_role(as(url, "walhook_relay"));
  const auto expire = read_all(std::string(WALHOOK_SOURCE_DIR) + "/sql/statements/delete_expired.sql");
  CHECK_NOTHROW(relay_role.exec(expire, pg::params{"720", "100"}));
  const auto sources = relay::operations::source_statuses(relay_role);
  REQUIRE(sources.size() == 1);
  CHECK(sources.front().name == "partner");
  CHECK(sources.front().retry_schedule_ms == "60000,300000,900000");
  for (const char* sql : {"SELECT secret FROM walhook.inbox_sources", "SELECT body FROM walhook.inbox_key_reuse",
                          "SELECT * FROM walhook.inbox_sources", "UPDATE walhook.inbox_sources SET max_deferrals = 0"}) {
    CAPTURE(sql);
    CHECK_THROWS_WITH(relay_role.exec(sql), doctest::Contains("permission denied"));
  }
}
