// The application's own outbox table (issue 20): `walhook migrate --outbox-table` bridges it into
// walhook.outbox with a trigger (sql/migrations/009_outbox_bridge.sql). Each preset end to end
// against a real PostgreSQL and a real walhook (the webhook-id, the body, aggregate_type); rows that
// do not fit end dead with their reason and never fail the application's INSERT; a rolled-back
// transaction publishes nothing; a re-run is idempotent; and what the application's role can do.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>
#include <set>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

struct setup : test::scenario {
  explicit setup(const std::string& slot) : scenario(slot) { db.exec("CREATE SCHEMA app"); }

  /// `walhook migrate --outbox-table …` on this database; returns the exit code, fills `out`.
  int bridge(std::vector<std::string> args, std::string& out) {
    std::vector<std::string> all{"migrate", "--database-url", url, "--no-slot"};
    all.insert(all.end(), args.begin(), args.end());
    return test::run_walhook(all, out);
  }
  void require_bridge(std::vector<std::string> args) {
    std::string out;
    const int rc = bridge(std::move(args), out);
    INFO(out);
    REQUIRE(rc == 0);
  }
  /// An endpoint that checks signatures; returns its id.
  long long endpoint(const std::string& tenant, const std::string& path, const std::vector<std::string>& types = {}) {
    const auto secret = delivery::generate_secret();
    relay::receiver_behaviour b;
    b.keys = *delivery::parse_secrets(secret);
    rcv->set_behaviour(path, b);
    return test::add_endpoint(db, tenant, rcv->url(path), secret, types);
  }
  /// The body walhook must send for walhook.outbox row `id`, computed from the table.
  std::string expected_body(const std::string& id) {
    auto r = db.exec("SELECT event_type, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), "
                     "payload::text FROM walhook.outbox WHERE id = $1",
                     pg::params{id});
    REQUIRE(r.rows() == 1);
    return fmt::format(R"({{"id":"{}","type":"{}","timestamp":"{}","data":{}}})", id, r.value(0, 0), r.value(0, 1),
                       r.value(0, 2));
  }
  std::map<std::string, relay::received_request> by_id(const std::string& path) {
    std::map<std::string, relay::received_request> out;
    for (auto& r : received(path)) out[r.webhook_id] = r;
    return out;
  }
  std::unique_ptr<test::walhook_process> start(std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), {"--operator-tenant", ""});  // no notices: the test counts what arrives
    auto w = std::make_unique<test::walhook_process>(start_walhook(std::move(extra)));
    REQUIRE(test::eventually([&] { return streaming(); }, 20s));
    return w;
  }
};

/// The scenario's URL as a role of sql/roles.sql (its password placeholder).
std::string as(const std::string& url, const std::string& role) {
  std::string u = url;
  return u.replace(u.find("postgres@"), 9, role + ":change-me@");
}

int psql_file(const std::string& url, const std::string& file) {
  std::string out;
  const int rc = relay::run_process({"psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", file}, "", out);
  INFO(out);
  return rc;
}

}  // namespace

TEST_CASE("each preset end to end: the application inserts into its own table, its endpoint gets the event") {
  setup s("ot_presets");
  // walhook's own shape, with a tenant column.
  s.db.exec("CREATE TABLE app.events (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), tenant_id text, event_type text, "
            "payload jsonb, aggregate_id text, merge_key text, created_at timestamptz DEFAULT now())");
  // Debezium's outbox (its usual DDL): no tenant column.
  s.db.exec("CREATE TABLE app.outbox (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, "
            "type text NOT NULL, payload jsonb)");
  // A plain outbox: a bigint id (the webhook-id is derived from it) and a text payload.
  s.db.exec("CREATE TABLE app.outbox_events (id bigserial PRIMARY KEY, aggregate_type text, aggregate_id text, "
            "event_type text, payload text, created_at timestamp DEFAULT (now() AT TIME ZONE 'UTC'))");
  s.db.exec("CREATE TABLE app.orders (id bigint PRIMARY KEY, status text)");
  s.require_bridge({"--outbox-table", "app.events", "--preset", "walhook"});
  s.require_bridge({"--outbox-table", "app.outbox", "--preset", "debezium", "--tenant", "acme"});
  s.require_bridge({"--outbox-table", "app.outbox_events", "--preset", "plain", "--tenant", "globex"});
  s.endpoint("acme", "/acme");
  s.endpoint("globex", "/globex");
  auto w = s.start();

  // Each in the transaction of its business change, as an application writes its outbox.
  s.db.exec("BEGIN");
  s.db.exec("INSERT INTO app.orders VALUES (1, 'created')");
  const std::string walhook_row = test::query_value(
      s.db, "INSERT INTO app.events (tenant_id, event_type, payload, aggregate_id) "
            "VALUES ('acme', 'order.created', '{\"order\": 1}', '1') RETURNING id");
  const std::string debezium_row = "5b8e3f0c-9a47-4b5e-8d2a-3f1e6c7d8a90";
  s.db.exec("INSERT INTO app.outbox VALUES ($1, 'order', '1', 'order.paid', '{\"order\": 1, \"total\": 12.50}')",
            pg::params{debezium_row});
  const std::string plain_row = test::query_value(
      s.db, "INSERT INTO app.outbox_events (aggregate_type, aggregate_id, event_type, payload) "
            "VALUES ('invoice', 'inv-9', 'invoice.issued', '{\"invoice\": \"inv-9\"}') RETURNING id");
  s.db.exec("COMMIT");
  // A rolled-back transaction publishes nothing, through any bridge.
  s.db.exec("BEGIN");
  s.db.exec("INSERT INTO app.outbox VALUES ('0e6a1c1e-0000-4000-8000-000000000001', 'order', '2', 'order.paid', '{}')");
  s.db.exec("INSERT INTO app.outbox_events (event_type, payload) VALUES ('invoice.issued', '{}')");
  s.db.exec("ROLLBACK");
  // A marker committed after it: once it arrives, the rolled-back rows would have too.
  const std::string marker = "0e6a1c1e-0000-4000-8000-000000000002";
  s.db.exec("INSERT INTO app.outbox VALUES ($1, 'order', '3', 'order.marker', '{}')", pg::params{marker});

  // The plain row's webhook-id is derived from its table and id: a version 8 UUID, the same each time.
  const std::string derived = s.value("SELECT walhook.outbox_bridge_id('app.outbox_events', $1)::text", {plain_row});
  CHECK(derived.size() == 36);
  CHECK(derived[14] == '8');
  CHECK(s.value("SELECT walhook.outbox_bridge_id('app.outbox_events', $1)::text", {plain_row}) == derived);
  CHECK(s.value("SELECT walhook.outbox_bridge_id('app.other_table', $1)::text", {plain_row}) != derived);

  REQUIRE(test::eventually([&] { return s.by_id("/acme").size() == 3 && s.by_id("/globex").size() == 1; }, 20s));
  auto acme = s.by_id("/acme");
  auto globex = s.by_id("/globex");
  for (const auto& id : {walhook_row, debezium_row, marker}) {
    CAPTURE(id);
    REQUIRE(acme.contains(id));
    CHECK(acme[id].signature_valid);
    CHECK(acme[id].body == s.expected_body(id));
  }
  REQUIRE(globex.contains(derived));
  CHECK(globex[derived].signature_valid);
  CHECK(globex[derived].body == s.expected_body(derived));
  CHECK(globex[derived].body.ends_with(R"(,"data":{"invoice": "inv-9"}})"));
  CHECK(acme[debezium_row].body.ends_with(R"(,"data":{"order": 1, "total": 12.50}})"));
  // What each preset mapped, as walhook.outbox holds it.
  CHECK(s.value("SELECT concat_ws('|', tenant_id, event_type, aggregate_type, aggregate_id) FROM walhook.outbox WHERE id = $1",
                {debezium_row}) == "acme|order.paid|order|1");
  CHECK(s.value("SELECT concat_ws('|', tenant_id, event_type, aggregate_type, aggregate_id) FROM walhook.outbox WHERE id = $1",
                {derived}) == "globex|invoice.issued|invoice|inv-9");
  CHECK(s.value("SELECT concat_ws('|', tenant_id, event_type, aggregate_id) FROM walhook.outbox WHERE id = $1",
                {walhook_row}) == "acme|order.created|1");
  // Nothing of the rolled-back transaction, anywhere.
  CHECK(s.value("SELECT count(*) FROM walhook.outbox") == "4");
  CHECK(s.received("/acme", 0).size() == 3);
  CHECK(s.received("/globex", 0).size() == 1);

  // The rest of walhook works on the copies: a resend goes out again with the same webhook-id.
  const std::string globex_endpoint = s.value("SELECT id FROM walhook.endpoints WHERE tenant_id = 'globex'");
  std::string out;
  REQUIRE(test::run_walhook({"resend", "--database-url", s.url, "--endpoint", globex_endpoint, "--event", derived}, out) == 0);
  REQUIRE(test::eventually([&] { return s.received("/globex").size() == 2; }, 20s));
  CHECK(s.received("/globex").back().webhook_id == derived);
  CHECK(s.received("/globex").back().body == globex[derived].body);
  // And `walhook recover` delivers acme's bridged events again, read back from walhook.outbox.
  REQUIRE(test::run_walhook({"recover", "--database-url", s.url, "--slot", s.slot, "--since", "-infinity", "--tenant",
                             "acme", "--wait", "--wait-timeout", "20"},
                            out) == 0);
  INFO(out);
  REQUIRE(test::eventually([&] { return s.received("/acme").size() == 6; }, 20s));
  std::map<std::string, int> twice;
  for (const auto& r : s.received("/acme")) ++twice[r.webhook_id];
  CHECK(twice == std::map<std::string, int>{{walhook_row, 2}, {debezium_row, 2}, {marker, 2}});
  CHECK(w->stop() == 0);
}

TEST_CASE("a row that does not fit ends dead with a readable reason, never fails the INSERT; later rows are delivered") {
  setup s("ot_poison");
  s.db.exec("CREATE TABLE app.outbox (id text, account text, kind text, body text, body_bytes bytea)");
  s.require_bridge({"--outbox-table", "app.outbox", "--columns", "id=id,tenant=account,type=kind,payload=body"});
  s.endpoint("acme", "/acme");
  auto w = s.start({"--behind", "rows"});  // dead rows are written as rows: this test reads them
  // Every INSERT succeeds, whatever its row holds.
  for (const char* row : {"('r1', 'acme', 'order.paid', 'not json')",
                          "('r2', 'acme', NULL, '{}')",
                          "(NULL, 'acme', 'order.paid', '{}')",
                          "('r4', NULL, 'order.paid', '{}')",
                          "('r5', 'acme', 'walhook.endpoint.disabled', '{}')",
                          "('r6', 'acme', 'order.paid', NULL)",
                          "('r7', 'acme', 'order.paid', '{\"ok\": true}')",
                          "('r7', 'acme', 'order.paid', '{\"again\": true}')"}) {
    CAPTURE(row);
    CHECK_NOTHROW(s.db.exec(fmt::format("INSERT INTO app.outbox (id, account, kind, body) VALUES {}", row)));
  }
  CHECK(s.value("SELECT count(*) FROM app.outbox") == "8");  // the application's table has every row
  const std::string good = s.value("SELECT walhook.outbox_bridge_id('app.outbox', 'r7')::text");
  REQUIRE(test::eventually([&] { return s.received("/acme").size() == 1; }, 20s));
  CHECK(s.received("/acme").front().webhook_id == good);
  CHECK(s.received("/acme").front().body.ends_with(R"("data":{"ok": true}})"));

  // Each row that did not fit: one walhook.outbox row, never sent, with its reason; the ones of
  // this tenant and a usable type end dead at its endpoint with that reason.
  CHECK(s.value("SELECT count(*) FROM walhook.outbox WHERE rejected IS NOT NULL") == "7");
  const std::map<std::string, std::string> reasons{
      {"r1", "the payload is not JSON (invalid input syntax for type json)"},
      {"r2", "the event type is NULL"},
      {"(no id)", "the id is NULL or empty"},
      {"r4", "the tenant is NULL"},
      {"r5", "event types walhook.* are reserved for walhook's own notifications (got walhook.endpoint.disabled)"},
      {"r6", "the payload is NULL"},
      {"r7", "the id " + good + " is already in walhook.outbox (that event was published before)"}};
  for (const auto& [id, reason] : reasons) {
    CAPTURE(id);
    CHECK(s.value("SELECT count(*) FROM walhook.outbox WHERE rejected = $1",
                  {fmt::format("app.outbox row {}: {}", id, reason)}) == "1");
  }
  // A usable tenant and type: the endpoint shows it dead (r1, r6, the second r7, NULL id); a NULL
  // or reserved type is '(none)', which the endpoint (all types) also gets dead; a NULL tenant
  // reaches no endpoint (tenants never cross): walhook logs and counts it.
  REQUIRE(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.deliveries WHERE status = 'dead'") == "6"; }, 20s));
  CHECK(s.value("SELECT last_error FROM walhook.deliveries d JOIN walhook.outbox o ON o.id = d.event_id "
                "WHERE o.rejected LIKE 'app.outbox row r1:%'") ==
        "the outbox bridge could not map app.outbox row r1: the payload is not JSON (invalid input syntax for type json)");
  CHECK(test::eventually([&] { return w->count_in_log("\"outbox.malformed_row\"") == 7; }, 20s));
  // A replay sends none of them: they end dead again with the same reason.
  std::string out;
  const std::string endpoint = s.value("SELECT id FROM walhook.endpoints");
  REQUIRE(test::run_walhook({"replay", "--database-url", s.url, "--endpoint", endpoint}, out) == 0);
  CHECK(test::eventually([&] { return s.value("SELECT count(*) FROM walhook.deliveries WHERE status = 'dead' AND attempts = 0 "
                                               "AND last_error LIKE 'the outbox bridge could not map %'") == "6" &&
                                      s.value("SELECT count(*) FROM walhook.deliveries WHERE status <> 'dead'") == "0"; },
                         20s));
  // Later rows still go.
  s.db.exec("INSERT INTO app.outbox (id, account, kind, body) VALUES ('r9', 'acme', 'order.paid', '{}')");
  REQUIRE(test::eventually([&] { return s.received("/acme").size() == 2; }, 20s));
  CHECK(s.received("/acme", 0).size() == 2);  // nothing else was ever sent
  CHECK(w->stop() == 0);
}

TEST_CASE("a bytea payload (Debezium's binary variant) is taken when it is UTF-8 JSON; timestamp is read as UTC") {
  setup s("ot_bytea");
  s.db.exec("CREATE TABLE app.outbox (id uuid DEFAULT gen_random_uuid(), type text, payload bytea, at timestamp)");
  s.require_bridge({"--outbox-table", "app.outbox", "--columns", "id=id,type=type,payload=payload,created_at=at",
                    "--tenant", "acme"});
  s.db.exec("INSERT INTO app.outbox (type, payload, at) VALUES ('a', convert_to('{\"é\": 1}', 'UTF8'), '2026-01-02 03:04:05')");
  s.db.exec("INSERT INTO app.outbox (type, payload) VALUES ('b', '\\xff00'::bytea)");
  CHECK(s.value("SELECT payload::text || ' ' || created_at FROM walhook.outbox WHERE event_type = 'a'") ==
        "{\"é\": 1} 2026-01-02 03:04:05+00");
  CHECK(s.value("SELECT rejected LIKE 'app.outbox row %: the payload is not JSON (invalid byte sequence%' "
                "FROM walhook.outbox WHERE event_type = 'b'") == "t");
  // Parsing a payload happens in a block that writes nothing: 500 rows in one transaction take
  // no subtransaction ids (500 would overflow the backend's cache of 64).
  const long long before = std::stoll(s.value("SELECT pg_current_xact_id()::text"));
  s.db.exec("INSERT INTO app.outbox (type, payload) SELECT 'c', convert_to('{\"n\": ' || n || '}', 'UTF8') "
            "FROM generate_series(1, 500) n");
  const long long after = std::stoll(s.value("SELECT pg_current_xact_id()::text"));
  CHECK(after - before < 10);
  CHECK(s.value("SELECT count(DISTINCT xid) || ' ' || count(*) FROM walhook.outbox WHERE event_type = 'c'") == "1 500");
}

TEST_CASE("migrate --outbox-table: a re-run replaces the bridge; errors name what is wrong; --remove-outbox-bridge") {
  setup s("ot_cli");
  s.db.exec("CREATE TABLE app.outbox (id uuid, aggregatetype text, aggregateid text, type text, payload jsonb)");
  std::string out;
  REQUIRE(s.bridge({"--outbox-table", "app.outbox", "--preset", "debezium", "--tenant", "acme"}, out) == 0);
  CHECK(out.find("app.outbox bridged to walhook.outbox") != std::string::npos);
  REQUIRE(s.bridge({"--outbox-table", "app.outbox", "--preset", "debezium", "--tenant", "globex"}, out) == 0);
  CHECK(s.value("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'app.outbox'::regclass") == "1");
  CHECK(s.value("SELECT count(*) || ' ' || min(tenant) FROM walhook.outbox_bridges") == "1 globex");
  s.db.exec("INSERT INTO app.outbox VALUES (gen_random_uuid(), 'order', '1', 'order.paid', '{}')");
  CHECK(s.value("SELECT count(*) || ' ' || min(tenant_id) FROM walhook.outbox") == "1 globex");  // once, the new mapping
  REQUIRE(test::run_walhook({"status", "--database-url", s.url}, out) == 0);
  CHECK(out.find("outbox bridges") != std::string::npos);
  CHECK(out.find("app.outbox") != std::string::npos);
  CHECK(out.find("globex") != std::string::npos);

  struct refusal {
    std::vector<std::string> args;
    std::string says;
  };
  const refusal refusals[] = {
      {{"--outbox-table", "app.nope", "--preset", "debezium", "--tenant", "t"}, "table app.nope does not exist"},
      {{"--outbox-table", "app.outbox", "--preset", "debezium", "--tenant", "t", "--columns", "type=kind"},
       "column \"kind\" (mapped to type) does not exist in app.outbox; its columns: id (uuid), aggregatetype (text), "
       "aggregateid (text), type (text), payload (jsonb)"},
      {{"--outbox-table", "app.outbox", "--preset", "debezium"}, "give --tenant T"},
      {{"--outbox-table", "app.outbox", "--preset", "kafka"}, "unknown --preset 'kafka'"},
      {{"--outbox-table", "walhook.endpoints", "--columns", "type=url,payload=url", "--tenant", "t"},
       "walhook.endpoints is walhook's own table"},
      {{"--outbox-table", "app.outbox", "--columns", "type=type,payload=aggregateid,created_at=type", "--tenant", "t"},
       "the created_at column type is of type text: walhook takes timestamptz or timestamp"},
      {{"--preset", "debezium"}, "--preset requires --outbox-table"},
  };
  for (const auto& r : refusals) {
    CAPTURE(r.says);
    CHECK(s.bridge(r.args, out) != 0);  // 1, or CLI11's own code for a flag that needs another
    CAPTURE(out);
    CHECK(out.find(r.says) != std::string::npos);
  }
  // A failed re-run leaves the bridge as it was.
  CHECK(s.value("SELECT tenant FROM walhook.outbox_bridges") == "globex");

  REQUIRE(s.bridge({"--remove-outbox-bridge", "app.outbox"}, out) == 0);
  CHECK(out.find("removed the outbox bridge of app.outbox") != std::string::npos);
  s.db.exec("INSERT INTO app.outbox VALUES (gen_random_uuid(), 'order', '2', 'order.paid', '{}')");
  CHECK(s.value("SELECT count(*) FROM walhook.outbox") == "1");
  CHECK(s.value("SELECT count(*) FROM pg_proc WHERE proname LIKE 'outbox_bridge_%' AND proname NOT IN "
                "('outbox_bridge_id', 'outbox_bridge_derived_id', 'outbox_bridge_fault')") == "0");
  CHECK(s.bridge({"--remove-outbox-bridge", "app.outbox"}, out) == 1);
  CHECK(out.find("app.outbox has no outbox bridge") != std::string::npos);

  REQUIRE(test::run_walhook({"migrate", "--help"}, out) == 0);
  for (const char* flag : {"--outbox-table", "--preset", "--columns", "--tenant", "--remove-outbox-bridge"}) {
    CAPTURE(flag);
    CHECK(out.find(flag) != std::string::npos);
  }
}

TEST_CASE("what the application's role can do with a bridge: insert its rows, and nothing of walhook's") {
  // A database migrated by walhook_migrator (sql/roles.sql), the application's table owned by
  // walhook_app: the real split of rights.
  auto& pg = test::cluster();
  pg.psql("CREATE DATABASE ot_roles");
  const std::string url = pg.url("ot_roles");
  const std::string roles = std::string(WALHOOK_SOURCE_DIR) + "/sql/roles.sql";
  REQUIRE(psql_file(url, roles) == 0);
  std::string out;
  REQUIRE(test::run_walhook({"migrate", "--database-url", as(url, "walhook_migrator"), "--no-slot"}, out) == 0);
  REQUIRE(psql_file(url, roles) == 0);
  relay::blocking_db super(url);
  super.exec("CREATE SCHEMA app AUTHORIZATION walhook_app");
  relay::blocking_db app(as(url, "walhook_app"));
  app.exec("CREATE TABLE app.outbox (id uuid DEFAULT gen_random_uuid(), aggregatetype text, aggregateid text, type text, "
           "payload jsonb)");
  app.exec("CREATE TABLE app.other (id uuid DEFAULT gen_random_uuid(), type text, payload jsonb)");

  // The migrator needs the table owner's TRIGGER grant, and says so; a re-run needs no more.
  const std::vector<std::string> bridge{"migrate", "--database-url", as(url, "walhook_migrator"), "--no-slot",
                                        "--outbox-table", "app.outbox", "--preset", "debezium", "--tenant", "acme"};
  app.exec("GRANT USAGE ON SCHEMA app TO walhook_migrator");
  CHECK(test::run_walhook(bridge, out) == 1);
  CHECK(out.find("needs USAGE on the table's schema and the TRIGGER privilege on the table: GRANT TRIGGER ON app.outbox "
                 "TO <role>") != std::string::npos);
  app.exec("GRANT TRIGGER ON app.outbox TO walhook_migrator");
  REQUIRE(test::run_walhook(bridge, out) == 0);
  REQUIRE(test::run_walhook(bridge, out) == 0);
  const std::string fn = test::query_value(super, "SELECT function_name FROM walhook.outbox_bridges");
  CHECK(test::query_value(super, "SELECT pg_get_userbyid(proowner) || ' ' || prosecdef FROM pg_proc WHERE proname = $1",
                          {fn}) == "walhook_migrator true");

  // Its own rows go in (the trigger runs with the migrator's right to insert into walhook.outbox).
  app.exec("INSERT INTO app.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', '1', 'order.paid', '{}')");
  CHECK(test::query_value(super, "SELECT tenant_id || ' ' || by_walhook FROM walhook.outbox") == "acme false");
  // A type walhook reserves does not become one of walhook's notifications: a rejected row.
  app.exec("INSERT INTO app.outbox (aggregatetype, aggregateid, type, payload) "
           "VALUES ('order', '1', 'walhook.endpoint.disabled', '{}')");
  CHECK(test::query_value(super, "SELECT count(*) FROM walhook.outbox WHERE by_walhook OR event_type LIKE 'walhook.%'") == "0");

  // The function is not the application's to call or to attach elsewhere (with another table's
  // rows, under this bridge's tenant); nor is the installer, nor the rejected marker.
  for (const std::string& sql : {"SELECT walhook." + fn + "()",
                                "CREATE TRIGGER steal AFTER INSERT ON app.other FOR EACH ROW EXECUTE FUNCTION walhook." + fn + "()",
                                std::string("SELECT walhook.bridge_outbox_table('app.other', '{\"type\": \"type\", "
                                            "\"payload\": \"payload\"}', 'acme')"),
                                std::string("SELECT walhook.unbridge_outbox_table('app.outbox')"),
                                std::string("INSERT INTO walhook.outbox (tenant_id, event_type, payload, rejected) "
                                            "VALUES ('t', 'x', '{}', 'no')"),
                                std::string("UPDATE walhook.outbox_bridges SET tenant = 'globex'")}) {
    CAPTURE(sql);
    CHECK_THROWS_WITH(app.exec(sql), doctest::Contains("permission denied"));
  }
  // What it had before stays: publish(), now with an aggregate type.
  CHECK_NOTHROW(app.exec("SELECT walhook.publish('acme', 'order.paid', '{}', aggregate_type => 'order')"));
  CHECK_NOTHROW(app.exec("SELECT walhook.publish('acme', 'order.paid', '{}', 'k', '1')"));
  CHECK(test::query_value(super, "SELECT count(*) FROM walhook.outbox WHERE aggregate_type = 'order'") == "2");

  // Removing the bridge drops a trigger, which is the table owner's to do: the migrator is told how.
  const std::vector<std::string> remove{"migrate", "--database-url", as(url, "walhook_migrator"), "--no-slot",
                                        "--remove-outbox-bridge", "app.outbox"};
  CHECK(test::run_walhook(remove, out) == 1);
  CHECK(out.find("the owner runs DROP TRIGGER walhook_outbox_bridge ON app.outbox, then run this again") != std::string::npos);
  app.exec("DROP TRIGGER walhook_outbox_bridge ON app.outbox");
  CHECK(test::run_walhook(remove, out) == 0);
  CHECK(test::query_value(super, "SELECT count(*) FROM walhook.outbox_bridges") == "0");
}

TEST_CASE("the table's owner cannot make the bridge run its own casts: built-in types only, checked on every row") {
  // The review's attack: the bridge is SECURITY DEFINER and converts the mapped columns; a type
  // of the table owner's own, with a cast function of theirs, would run with the bridge's rights.
  setup s("ot_casts");
  s.db.exec("CREATE TABLE app.pwned (who text)");
  s.db.exec("CREATE TYPE app.evil AS (t text)");
  s.db.exec("CREATE FUNCTION app.evil_to_text(app.evil) RETURNS text LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO app.pwned VALUES (current_user); RETURN ($1).t; END $$");
  s.db.exec("CREATE CAST (app.evil AS text) WITH FUNCTION app.evil_to_text(app.evil)");
  // A type named like a built-in one, in another schema, is not taken either.
  s.db.exec("CREATE TYPE app.jsonb AS (t text)");
  s.db.exec("CREATE TABLE app.sneaky (id uuid, aggregatetype text, aggregateid text, type app.evil, payload jsonb)");
  std::string out;
  CHECK(s.bridge({"--outbox-table", "app.sneaky", "--preset", "debezium", "--tenant", "acme"}, out) != 0);
  CHECK(out.find("not one of PostgreSQL's own") != std::string::npos);
  s.db.exec("CREATE TABLE app.sneaky2 (id uuid, aggregatetype text, aggregateid text, type text, payload app.jsonb)");
  CHECK(s.bridge({"--outbox-table", "app.sneaky2", "--preset", "debezium", "--tenant", "acme"}, out) != 0);
  CHECK(out.find("not one of PostgreSQL's own") != std::string::npos);

  // Bridged while the types were built-in, then altered: every row is rejected unread.
  s.db.exec("CREATE TABLE app.outbox (id uuid, aggregatetype text, aggregateid text, type text, payload jsonb)");
  s.require_bridge({"--outbox-table", "app.outbox", "--preset", "debezium", "--tenant", "acme"});
  s.db.exec("ALTER TABLE app.outbox ALTER COLUMN type TYPE app.evil USING row(type)::app.evil");
  s.db.exec("INSERT INTO app.outbox VALUES (gen_random_uuid(), 'a', '1', row('order.paid')::app.evil, '{}')");
  CHECK(s.value("SELECT count(*) FROM app.pwned") == "0");
  CHECK(s.value("SELECT rejected FROM walhook.outbox").find("type changed since the bridge was made") != std::string::npos);
  // Bridged again, the altered type is refused at once.
  CHECK(s.bridge({"--outbox-table", "app.outbox", "--preset", "debezium", "--tenant", "acme"}, out) != 0);
  CHECK(s.value("SELECT count(*) FROM app.pwned") == "0");
}
