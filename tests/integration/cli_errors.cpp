// Clear one-line errors (issue 2): bad flags, an unreachable database, wal_level not logical,
// a missing schema, missing privileges. Each exits 1 with a message that says what to do.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"
#include "tests/support/scripted_http_server.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <fmt/format.h>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

using namespace walhook;

namespace {

struct outcome {
  int code;
  std::string output;
};

outcome run_cli(const std::vector<std::string>& args) {
  outcome o;
  o.code = test::run_walhook(args, o.output);
  return o;
}

bool one_line(const std::string& s) {
  auto trimmed = s;
  while (!trimmed.empty() && trimmed.back() == '\n') trimmed.pop_back();
  return trimmed.find('\n') == std::string::npos;
}

}  // namespace

TEST_CASE("bad flags and unreachable databases") {
  auto missing = run_cli({"run"});
  CHECK(missing.code != 0);
  CHECK(missing.output.find("--database-url is required") != std::string::npos);

  auto bad_number = run_cli({"run", "--database-url", "postgresql://x", "--max-in-flight", "many"});
  CHECK(bad_number.code != 0);
  CHECK(bad_number.output.find("--max-in-flight") != std::string::npos);

  int closed = relay::free_tcp_port();
  auto refused = run_cli({"run", "--database-url", "postgresql://postgres@127.0.0.1:" + std::to_string(closed) + "/x"});
  CHECK(refused.code == 1);  // run's fatal errors are JSON log lines, like every other line of run
  CHECK(refused.output.starts_with(R"({"ts":)"));
  CHECK(refused.output.find(R"("level":"error","msg":"run.failed","error":"cannot connect to PostgreSQL:)") != std::string::npos);
  CHECK(one_line(refused.output));

  auto bad_json = run_cli({"send", "--database-url", "postgresql://x", "--tenant", "t", "--type", "x", "--data", "{nope"});
  CHECK(bad_json.code == 1);
  CHECK(bad_json.output.starts_with("walhook: --data is not valid JSON"));

  // migrate says it as every other command does: one line, no tab, no extra prefix.
  const std::string unreachable = "postgresql://postgres@127.0.0.1:" + std::to_string(closed) + "/x";
  auto status = run_cli({"status", "--database-url", unreachable});
  auto migrate = run_cli({"migrate", "--database-url", unreachable});
  CHECK(status.code == 1);
  CHECK(migrate.code == 1);
  CHECK(status.output.starts_with("walhook: cannot connect to PostgreSQL: connection to server at \"127.0.0.1\""));
  CHECK(migrate.output == status.output);
  CHECK(migrate.output.find('\t') == std::string::npos);
  CHECK(one_line(migrate.output));
}

TEST_CASE("walhook help: the top-level help, and a command's; walhook demo refuses a console it cannot serve") {
  auto top = run_cli({"help"});
  auto flag = run_cli({"--help"});
  CHECK(top.code == 0);
  CHECK(top.output == flag.output);
  CHECK(top.output.find("endpoint") != std::string::npos);
  CHECK(top.output.find("help") != std::string::npos);
  for (const std::vector<std::string>& words : {std::vector<std::string>{"endpoint", "add"}, {"events"}, {"event"}, {"run"}}) {
    std::vector<std::string> asked{"help"};
    asked.insert(asked.end(), words.begin(), words.end());
    std::vector<std::string> with_flag = words;
    with_flag.push_back("--help");
    auto a = run_cli(asked);
    auto b = run_cli(with_flag);
    CAPTURE(words.front());
    CHECK(a.code == 0);
    CHECK(a.output == b.output);
  }
  CHECK(run_cli({"help", "events"}).output.find("--type") != std::string::npos);
  auto typo = run_cli({"help", "endpoint", "rmove"});
  CHECK(typo.code == 1);
  CHECK(typo.output == "walhook: unknown command 'rmove'; did you mean 'remove'?\n");

  // The demo's console has no token: a non-loopback address fails before anything starts.
  auto demo = run_cli({"demo", "--admin-listen", "0.0.0.0:0"});
  CHECK(demo.code == 1);
  CHECK(demo.output.starts_with("walhook: the demo's console: --admin-listen 0.0.0.0:0 is not a loopback address"));
  CHECK(demo.output.find("starting a throwaway PostgreSQL") == std::string::npos);
  CHECK(one_line(demo.output));
}

TEST_CASE("a database that was never migrated, and a role without REPLICATION") {
  auto& pg = test::cluster();
  pg.psql("CREATE DATABASE never_migrated");
  auto unmigrated = run_cli({"status", "--database-url", pg.url("never_migrated")});
  CHECK(unmigrated.code == 1);
  CHECK(unmigrated.output == "walhook: the walhook schema is missing: run `walhook migrate` first\n");
  auto unmigrated_run = run_cli({"run", "--database-url", pg.url("never_migrated")});
  CHECK(unmigrated_run.code == 1);
  CHECK(unmigrated_run.output.find(R"("error":"the walhook schema is missing: run `walhook migrate` first")") != std::string::npos);

  std::string url = test::fresh_database("privileges");
  pg.psql("CREATE ROLE plain LOGIN");
  std::string plain = url;
  plain.replace(plain.find("postgres@"), 9, "plain@");
  auto no_replication = run_cli({"run", "--database-url", plain});
  CHECK(no_replication.code == 1);
  CHECK(no_replication.output.find("needs the REPLICATION attribute") != std::string::npos);
  CHECK(one_line(no_replication.output));

  pg.psql("ALTER ROLE plain REPLICATION");
  auto no_grants = run_cli({"run", "--database-url", plain});
  CHECK(no_grants.code == 1);
  CHECK(no_grants.output.find("missing privileges on the walhook tables") != std::string::npos);

  // Read-only is not enough, and the message names what is missing.
  pg.psql("GRANT USAGE ON SCHEMA walhook TO plain; GRANT SELECT ON ALL TABLES IN SCHEMA walhook TO plain", "privileges");
  auto read_only = run_cli({"run", "--database-url", plain});
  CHECK(read_only.code == 1);
  CHECK(read_only.output.find("missing privileges on the walhook tables") != std::string::npos);
  CHECK(read_only.output.find("UPDATE on walhook.deliveries") != std::string::npos);
  CHECK(read_only.output.find("SELECT on walhook.deliveries") == std::string::npos);
  CHECK(one_line(read_only.output));
}

TEST_CASE("wal_level not logical") {
  relay::embedded_postgres_options o;
  o.settings = {"wal_level=replica"};
  relay::embedded_postgres replica(o);
  auto migrate = run_cli({"migrate", "--database-url", replica.url()});
  CHECK(migrate.code == 1);
  CHECK(migrate.output.find("wal_level is 'replica': walhook needs wal_level = logical") != std::string::npos);
  auto run = run_cli({"run", "--database-url", replica.url()});
  CHECK(run.code == 1);
  CHECK(run.output.find(R"("msg":"run.failed","error":"wal_level is 'replica': walhook needs wal_level = logical )"
                       R"x((ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL)"})x") != std::string::npos);
  CHECK(one_line(run.output));
}

TEST_CASE("the least-privilege roles of sql/roles.sql run walhook and publish events") {
  auto& pg = test::cluster();
  test::scenario s("roles");
  const std::string& url = s.url;
  auto& rcv = s.rcv;
  std::string out;
  REQUIRE(relay::run_process({"psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f",
                              std::string(WALHOOK_SOURCE_DIR) + "/sql/roles.sql"},
                             "", out) == 0);
  auto as = [&](const std::string& role) {
    std::string u = url;
    return u.replace(u.find("postgres@"), 9, role + ":change-me@");
  };
  auto added = run_cli({"endpoint", "add", "--database-url", as("walhook_admin"), "--tenant", "t", "--url", rcv->url("/a")});
  REQUIRE(added.code == 0);
  test::walhook_process relay(test::run_args(as("walhook_relay"), "roles"));
  relay.start();
  relay::blocking_db app(as("walhook_app"));
  REQUIRE(test::eventually([&] { return relay.count_in_log("\"replication.streaming\"") == 1; }, std::chrono::seconds(20)));
  pg::params p{"t", "x", "{}"};
  std::string id = test::query_value(app, "SELECT walhook.publish($1, $2, $3::jsonb)", p);
  CHECK(test::eventually([&] { return rcv->count("/a") == 1; }, std::chrono::seconds(20)));
  // walhook event as walhook_admin: it reads the tenant's slot's delivered snapshot (sql/roles.sql
  // grants it) and infers the first-try success that left no row.
  const std::string endpoint_id = added.output.substr(4, added.output.find('\n') - 4);  // "id: N\n…"
  outcome asked;
  CHECK(test::eventually(
      [&] {
        asked = run_cli({"event", id, "--database-url", as("walhook_admin"), "--slot", "roles"});
        return asked.code == 0 && asked.output.find(fmt::format("{:>8}  delivered ", endpoint_id)) != std::string::npos;
      },
      std::chrono::seconds(20), std::chrono::milliseconds(500)));
  INFO(asked.output);
  // walhook_relay publishes its notifications (an outbox INSERT of its own: sql/roles.sql grants it).
  relay::receiver_behaviour down;
  down.status = 503;
  rcv->set_behaviour("/down", down);
  REQUIRE(run_cli({"endpoint", "add", "--database-url", as("walhook_admin"), "--tenant", "u", "--url", rcv->url("/down")}).code == 0);
  pg::params q{"u", "x", "{}"};
  test::query_value(app, "SELECT walhook.publish($1, $2, $3::jsonb)", q);
  relay::blocking_db admin(as("walhook_admin"));
  CHECK(test::eventually([&] {
    return test::query_value(admin, "SELECT count(*) FROM walhook.outbox WHERE event_type = 'walhook.endpoint.failing'") == "1";
  }, std::chrono::seconds(20)));
  CHECK(relay.count_in_log("state_store.write_given_up") == 0);
  CHECK_THROWS(app.exec("SELECT * FROM walhook.deliveries"));  // the application sees nothing else
  auto status = run_cli({"status", "--database-url", as("walhook_admin")});
  CHECK(status.code == 0);
  CHECK(relay.stop() == 0);
  (void)pg;
}

TEST_CASE("endpoint list, status and errors never show a URL's credentials (issue 9 #8)") {
  const std::string url = test::fresh_database("redaction");
  const std::string secret = "s3cretpassw0rd";
  auto refused = run_cli({"endpoint", "add", "--database-url", url, "--tenant", "t", "--url",
                          "https://admin:" + secret + "@hooks.example.com/in"});
  CHECK(refused.code != 0);
  CHECK(refused.output.find("https://***@hooks.example.com/in") != std::string::npos);
  CHECK(refused.output.find("must not carry credentials") != std::string::npos);  // says why
  CHECK(refused.output.find(secret) == std::string::npos);

  auto added = run_cli({"endpoint", "add", "--database-url", url, "--tenant", "t", "--url",
                        "https://hooks.example.com/in?token=" + secret});
  REQUIRE(added.code == 0);
  relay::blocking_db db(url);
  // Invalid URLs only get in by SQL; a 100 KB one too.
  test::add_endpoint(db, "t", "https://admin:" + secret + "@" + std::string(100 * 1024, 'h') + "/", delivery::generate_secret());
  for (const auto& args : std::vector<std::vector<std::string>>{{"endpoint", "list", "--database-url", url},
                                                                {"status", "--database-url", url},
                                                                {"status", "--json", "--database-url", url}}) {
    CAPTURE(args[1]);
    auto shown = run_cli(args);
    CHECK(shown.code == 0);
    CHECK(shown.output.find(secret) == std::string::npos);
    CHECK(shown.output.size() < 4096);
  }
  CHECK(run_cli({"endpoint", "list", "--database-url", url}).output.find("https://hooks.example.com/in?***") !=
        std::string::npos);
}

TEST_CASE("--ca-file: an unreadable or empty file is a clear start-up error (issue 9 #11d)") {
  auto missing = run_cli({"run", "--database-url", "postgresql://x", "--ca-file", "/nonexistent/ca.pem"});
  CHECK(missing.code == 1);
  CHECK(missing.output.find("--ca-file /nonexistent/ca.pem: cannot read it: No such file or directory") != std::string::npos);
  CHECK(one_line(missing.output));

  const auto junk = std::filesystem::temp_directory_path() / fmt::format("walhook-junk-{}.pem", ::getpid());
  std::ofstream(junk) << "not a certificate\n";
  auto empty = run_cli({"run", "--database-url", "postgresql://x", "--ca-file", junk.string()});
  std::filesystem::remove(junk);
  CHECK(empty.code == 1);
  CHECK(empty.output.find("no PEM certificate in it") != std::string::npos);
}

TEST_CASE("--ca-file: an endpoint of a private CA is delivered; an unknown CA's says so in last_error") {
  namespace asio = boost::asio;
  // Two TLS endpoints on loopback: one with a certificate of our private CA, one self-signed.
  test::certificate_spec ca_spec;
  ca_spec.common_name = "walhook it private CA";
  const auto ca = test::make_certificate(ca_spec);
  test::certificate_spec leaf;
  leaf.is_ca = false;
  leaf.subject_alt_names = "IP:127.0.0.1";
  leaf.issuer = &ca;
  asio::io_context ioc;
  test::scripted_http_server private_ca_server(ioc, asio::ip::address_v4::loopback(), test::make_certificate(leaf));
  test::scripted_http_server unknown_ca_server(ioc, asio::ip::address_v4::loopback(),
                                               test::make_test_certificate("IP:127.0.0.1"));
  auto work = asio::make_work_guard(ioc);
  std::thread server_thread([&] { ioc.run(); });  // the servers are touched on this thread only until join

  const auto ca_file = std::filesystem::temp_directory_path() / fmt::format("walhook-ca-{}.pem", ::getpid());
  std::ofstream(ca_file) << ca.certificate_pem;
  test::scenario s("ca_file");
  auto& db = s.db;
  const auto good = test::add_endpoint(db, "t", private_ca_server.url("/hook"), delivery::generate_secret());
  const auto bad = test::add_endpoint(db, "t", unknown_ca_server.url("/hook"), delivery::generate_secret());
  auto relay = s.start_walhook({"--ca-file", ca_file.string(), "--record", "all"}, "relay");
  REQUIRE(test::eventually([&] { return relay.count_in_log("\"replication.streaming\"") == 1; }, std::chrono::seconds(20)));
  pg::params p{"t", "order.paid", "{}"};
  test::query_value(db, "SELECT walhook.publish($1, $2, $3::jsonb)", p);
  const auto status_of = [&](long long endpoint) {
    pg::params q{std::to_string(endpoint)};
    return test::query_value(db, "SELECT status || ' ' || coalesce(last_error, '') FROM walhook.deliveries WHERE endpoint_id = $1::bigint", q);
  };
  CHECK(test::eventually([&] { return status_of(good).starts_with("delivered"); }, std::chrono::seconds(20)));
  CHECK(test::eventually([&] { return status_of(bad).find("unknown CA") != std::string::npos; }, std::chrono::seconds(20)));
  MESSAGE("unknown CA endpoint: " << status_of(bad));
  CHECK(relay.stop() == 0);
  std::filesystem::remove(ca_file);

  work.reset();
  asio::post(ioc, [&] {
    private_ca_server.stop();
    unknown_ca_server.stop();
  });
  server_thread.join();
  CHECK(private_ca_server.requests().size() == 1);
  CHECK(unknown_ca_server.requests().empty());
  CHECK(unknown_ca_server.failed_handshakes() >= 1);
}
