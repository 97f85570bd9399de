// The operator's CLI (issue 11): endpoint update and rotate-secret followed by a running walhook,
// remove's confirmation, status's nulls, breaker pause and live numbers, typo suggestions, run's
// fatal errors as JSON, and resend (relay/operations/operations.hpp) of a first-try success that left no row.

#include "delivery/signing.hpp"
#include "relay/operations/operations.hpp"
#include "tests/harness/harness.hpp"
#include "tests/support/scripted_http_server.hpp"

#include <boost/asio/executor_work_guard.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

struct setup : test::scenario {
  using scenario::scenario;
  /// `walhook <args> --database-url <url>`: exit code; output in last_output.
  int cli(std::vector<std::string> args) {
    args.push_back("--database-url");
    args.push_back(url);
    return test::run_walhook(args, last_output);
  }
  std::string last_output;
};

/// Lines of `walhook status --json`, by endpoint id.
std::map<long long, std::string> status_lines(const std::string& output) {
  std::map<long long, std::string> out;
  simdjson::dom::parser parser;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.starts_with("walhook: ")) continue;  // a note on stderr (the output has both)
    simdjson::dom::element doc;
    REQUIRE_MESSAGE(parser.parse(line).get(doc) == simdjson::SUCCESS, line);
    out[int64_t(doc["endpoint_id"])] = line;
  }
  return out;
}

std::size_t signatures(const std::string& header) {
  std::size_t n = 0;
  for (auto p = header.find("v1,"); p != std::string::npos; p = header.find("v1,", p + 1)) ++n;
  return n;
}

bool signed_by(const relay::received_request& r, const std::string& secret) {
  auto key = delivery::parse_secret(secret);
  REQUIRE(key.has_value());
  const delivery::signing_key keys[] = {*key};
  return delivery::verify(keys, r.webhook_id, r.webhook_timestamp, r.body, r.webhook_signature);
}

/// Runs walhook on a pseudo-terminal, answers its question with `answer` once it is asked, and
/// returns {exit code, everything it wrote}.
std::pair<int, std::string> run_on_terminal(const std::vector<std::string>& args, const std::string& answer) {
  std::vector<std::string> argv{test::walhook_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  std::string seen;
  bool answered = false;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[512];
    const auto n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;  // EIO: the child closed the terminal
    seen.append(buf, static_cast<std::size_t>(n));
    if (!answered && seen.find("[y/N] ") != std::string::npos) {
      const std::string line = answer + "\n";
      REQUIRE(::write(master, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
      answered = true;
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(master);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), seen};
}

}  // namespace

TEST_CASE("endpoint update: the columns change and the running walhook follows (the next delivery goes to the new URL)") {
  setup s("op_update");
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/old"), delivery::generate_secret());
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  s.publish("t", "order.paid", "{}");
  REQUIRE(test::eventually([&] { return s.received("/old").size() == 1; }, 20s));

  REQUIRE(s.cli({"endpoint", "update", std::to_string(ep), "--url", s.rcv->url("/new"), "--event-types",
                 "order.paid, order.shipped", "--max-concurrency", "2", "--description", "moved"}) == 0);
  CHECK(s.last_output.find(fmt::format("endpoint {}: updated", ep)) != std::string::npos);
  CHECK(s.last_output.find("url, event_types, max_concurrency, description") != std::string::npos);
  pg::params id{std::to_string(ep)};
  CHECK(s.value("SELECT url || ' ' || array_to_string(event_types, ',') || ' ' || max_concurrency || ' ' || description "
                "FROM walhook.endpoints WHERE id = $1",
                id) == s.rcv->url("/new") + " order.paid,order.shipped 2 moved");

  // The stream carries the change: a later event goes to the new URL, a type not listed nowhere.
  std::string filtered_out = s.publish("t", "order.created", "{}");
  std::string paid;
  CHECK(test::eventually(
      [&] {
        if (paid.empty()) paid = s.publish("t", "order.paid", "{}");
        return s.received("/new").size() == 1;
      },
      20s));
  CHECK(s.received("/new").front().webhook_id == paid);
  CHECK(s.received("/old").size() == 1);

  // Back to all types; a contact endpoint that does not exist is refused; nothing given is refused.
  REQUIRE(s.cli({"endpoint", "update", std::to_string(ep), "--event-types", ""}) == 0);
  CHECK(s.value("SELECT event_types IS NULL FROM walhook.endpoints WHERE id = $1", id) == "t");
  CHECK(s.cli({"endpoint", "update", std::to_string(ep), "--contact-endpoint", "9999"}) == 1);
  CHECK(s.last_output == "walhook: --contact-endpoint: no endpoint with id 9999\n");
  CHECK(s.cli({"endpoint", "update", std::to_string(ep)}) == 1);
  CHECK(s.last_output.starts_with("walhook: nothing to update"));
  CHECK(s.cli({"endpoint", "update", std::to_string(ep), "--url", "ftp://x"}) == 1);
  CHECK(s.last_output.starts_with("walhook: --url must be an absolute http:// or https:// URL"));
  long long contact = test::add_endpoint(s.db, "t", s.rcv->url("/contact"), delivery::generate_secret(), {"none"});
  REQUIRE(s.cli({"endpoint", "update", std::to_string(ep), "--contact-endpoint", std::to_string(contact)}) == 0);
  CHECK(s.value("SELECT contact_endpoint_id FROM walhook.endpoints WHERE id = $1", id) == std::to_string(contact));
  REQUIRE(s.cli({"endpoint", "update", std::to_string(ep), "--contact-endpoint", "none"}) == 0);
  CHECK(s.value("SELECT contact_endpoint_id IS NULL FROM walhook.endpoints WHERE id = $1", id) == "t");
  // Removing a contact endpoint leaves no dangling reference, and says so.
  REQUIRE(s.cli({"endpoint", "update", std::to_string(ep), "--contact-endpoint", std::to_string(contact)}) == 0);
  REQUIRE(s.cli({"endpoint", "remove", std::to_string(contact)}) == 0);
  CHECK(s.last_output.find(fmt::format("endpoint {} had it as contact endpoint: now none", ep)) != std::string::npos);
  CHECK(s.value("SELECT contact_endpoint_id IS NULL FROM walhook.endpoints WHERE id = $1", id) == "t");
  // So does a plain DELETE (the removal trigger): an id reused later never gets its notifications.
  long long contact2 = test::add_endpoint(s.db, "t", s.rcv->url("/contact2"), delivery::generate_secret(), {"none"});
  REQUIRE(s.cli({"endpoint", "update", std::to_string(ep), "--contact-endpoint", std::to_string(contact2)}) == 0);
  s.db.exec("DELETE FROM walhook.endpoints WHERE id = $1", pg::params{std::to_string(contact2)});
  CHECK(s.value("SELECT contact_endpoint_id IS NULL FROM walhook.endpoints WHERE id = $1", id) == "t");
  (void)filtered_out;
  CHECK(walhook.stop() == 0);
}

TEST_CASE("endpoint rotate-secret: both secrets sign during the grace period, then walhook drops the old one") {
  setup s("op_rotate");
  const std::string old_secret = delivery::generate_secret();
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/r"), old_secret);
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));

  const std::string new_secret = delivery::generate_secret();
  REQUIRE(s.cli({"endpoint", "rotate-secret", std::to_string(ep), "--grace", "4s", "--secret", new_secret}) == 0);
  CHECK(s.last_output.starts_with("secret: " + new_secret + "\n"));
  CHECK(s.last_output.find("the old one(s) until 20") != std::string::npos);
  pg::params id{std::to_string(ep)};
  CHECK(s.value("SELECT secret FROM walhook.endpoints WHERE id = $1", id) == new_secret + " " + old_secret);
  CHECK(s.value("SELECT secret_grace_until > now() FROM walhook.endpoints WHERE id = $1", id) == "t");

  // During the grace period: two signatures, one for each secret.
  std::string during;
  REQUIRE(test::eventually(
      [&] {
        // The rotation reaches the endpoint directory through the stream; until then one signature.
        for (const auto& r : s.received("/r"))
          if (signatures(r.webhook_signature) == 2) return true;
        s.publish("t", "x", "{}");
        return false;
      },
      20s, 200ms));
  for (const auto& r : s.received("/r")) {
    if (signatures(r.webhook_signature) != 2) continue;
    CHECK(signed_by(r, old_secret));
    CHECK(signed_by(r, new_secret));
  }
  // After it: walhook run keeps only the new secret, and signs with it alone.
  REQUIRE(test::eventually(
      [&] { return s.value("SELECT secret || ' ' || (secret_grace_until IS NULL) FROM walhook.endpoints WHERE id = $1", id) ==
                   new_secret + " true"; },
      20s, 200ms));
  CHECK(walhook.count_in_log("\"secrets.old_dropped\"") == 1);
  s.rcv->clear();
  REQUIRE(test::eventually(
      [&] {
        for (const auto& r : s.received("/r"))
          if (signatures(r.webhook_signature) == 1 && signed_by(r, new_secret) && !signed_by(r, old_secret)) return true;
        s.publish("t", "x", "{}");
        return false;
      },
      20s, 200ms));

  CHECK(s.cli({"endpoint", "rotate-secret", std::to_string(ep), "--grace", "soon"}) == 1);
  CHECK(s.last_output.find("--grace soon: give a duration") != std::string::npos);
  CHECK(s.cli({"endpoint", "rotate-secret", std::to_string(ep), "--secret", new_secret}) == 1);
  CHECK(s.last_output == "walhook: --secret is already one of the endpoint's secrets\n");
  CHECK(walhook.stop() == 0);
}

TEST_CASE("endpoint remove: refuses without --force when pending deliveries would end dead and no one can confirm") {
  setup s("op_remove");
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/x"), delivery::generate_secret());
  long long idle = test::add_endpoint(s.db, "t", s.rcv->url("/y"), delivery::generate_secret());
  for (int i = 0; i < 3; ++i) {
    std::string event = s.publish("t", "x", "{}");
    pg::params p{std::to_string(ep), event};
    s.db.exec("INSERT INTO walhook.deliveries (endpoint_id, event_id, status, next_attempt_at, event_created_at) "
              "VALUES ($1, $2::uuid, 'pending', now() + interval '1 hour', now())",
              p);
  }
  // stdin is /dev/null here: not a terminal.
  CHECK(s.cli({"endpoint", "remove", std::to_string(ep)}) == 1);
  CHECK(s.last_output == fmt::format("walhook: endpoint {} has 3 pending deliveries; removing it ends them. Not removed: confirm "
                                     "on a terminal, or give --force\n",
                                     ep));
  pg::params id{std::to_string(ep)};
  CHECK(s.value("SELECT count(*) FROM walhook.endpoints WHERE id = $1", id) == "1");
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'pending'", id) == "3");

  // On a terminal it asks; anything but y keeps the endpoint.
  const std::vector<std::string> remove{"endpoint", "remove", std::to_string(ep), "--database-url", s.url};
  auto [declined, asked] = run_on_terminal(remove, "n");
  CHECK(declined == 1);
  CHECK(asked.find(fmt::format("endpoint {} has 3 pending deliveries; removing it ends them. Remove it? [y/N] ", ep)) != std::string::npos);
  CHECK(s.value("SELECT count(*) FROM walhook.endpoints WHERE id = $1", id) == "1");
  long long confirmed_ep = test::add_endpoint(s.db, "t", s.rcv->url("/z"), delivery::generate_secret());
  s.db.exec("INSERT INTO walhook.deliveries (endpoint_id, event_id, status, next_attempt_at, event_created_at) "
            "VALUES ($1, gen_random_uuid(), 'pending', now(), now())",
            pg::params{std::to_string(confirmed_ep)});
  auto [confirmed, said] =
      run_on_terminal({"endpoint", "remove", std::to_string(confirmed_ep), "--database-url", s.url}, "y");
  CHECK(confirmed == 0);
  CHECK(said.find(fmt::format("endpoint {}: removed; 1 open delivery ended dead", confirmed_ep)) != std::string::npos);
  CHECK(s.value("SELECT count(*) FROM walhook.endpoints WHERE id = $1", pg::params{std::to_string(confirmed_ep)}) == "0");

  REQUIRE(s.cli({"endpoint", "remove", std::to_string(ep), "--force"}) == 0);
  CHECK(s.last_output == fmt::format("endpoint {}: removed; 3 open deliveries ended dead\n", ep));
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1", id) == "0");
  CHECK(s.value("SELECT count(*) FROM walhook.endpoints WHERE id = $1", id) == "0");
  // Nothing to lose: no question.
  REQUIRE(s.cli({"endpoint", "remove", std::to_string(idle)}) == 0);
  CHECK(s.cli({"endpoint", "remove", std::to_string(idle)}) == 1);
  CHECK(s.last_output == fmt::format("walhook: no endpoint with id {}\n", idle));
}

TEST_CASE("status: a breaker-paused endpoint shows as paused; --json writes null for absent values; live numbers via --admin-url") {
  setup s("op_status");
  relay::receiver_behaviour down;
  down.status = 503;
  s.rcv->set_behaviour("/down", down);
  long long bad = test::add_endpoint(s.db, "t", s.rcv->url("/down"), delivery::generate_secret());
  long long good = test::add_endpoint(s.db, "t", s.rcv->url("/up"), delivery::generate_secret());
  auto walhook = s.start_walhook({"--breaker-threshold", "1", "--breaker-pause-s", "3600"});
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  s.publish("t", "x", "{}");
  pg::params id{std::to_string(bad)};
  REQUIRE(test::eventually(
      [&] { return s.value("SELECT paused_until > now() FROM walhook.endpoint_health WHERE endpoint_id = $1", id) == "t"; }, 20s));
  REQUIRE(test::eventually([&] { return s.received("/up").size() == 1; }, 20s));

  REQUIRE(s.cli({"status", "--json"}) == 0);
  auto rows = status_lines(s.last_output);
  REQUIRE(rows.size() == 2);
  simdjson::dom::parser parser;
  simdjson::dom::element paused = parser.parse(rows[bad]);
  CHECK(std::string_view(paused["status"]) == "active");
  CHECK(bool(paused["paused_by_breaker"]));
  CHECK(std::string_view(paused["paused_until"]).ends_with("Z"));
  CHECK(std::string_view(paused["last_error"]).find("503") != std::string_view::npos);
  CHECK(paused["disabled_reason"].is_null());
  CHECK(paused["queued"].is_null());     // no --admin-url: the live numbers are unknown, not 0
  CHECK(paused["in_flight"].is_null());
  CHECK(int64_t(paused["pending"]) == 1);
  simdjson::dom::parser parser2;
  simdjson::dom::element healthy = parser2.parse(rows[good]);
  CHECK(!bool(healthy["paused_by_breaker"]));
  for (const char* absent : {"paused_until", "last_error", "disabled_reason"}) {
    CAPTURE(absent);
    CHECK(healthy[absent].is_null());
  }
  CHECK(rows[good].find("\"\"") == std::string::npos);

  REQUIRE(s.cli({"status"}) == 0);
  std::string paused_line, healthy_line;
  std::istringstream text(s.last_output);
  for (std::string line; std::getline(text, line);) {
    if (line.starts_with(fmt::format("{:>6}  ", bad))) paused_line = line;
    if (line.starts_with(fmt::format("{:>6}  ", good))) healthy_line = line;
  }
  CHECK(paused_line.find("paused (breaker)") != std::string::npos);
  CHECK(healthy_line.find("paused") == std::string::npos);
  CHECK(s.last_output.find("give --admin-url http://HOST:PORT") != std::string::npos);

  // --admin-url: the running walhook's live numbers (GET /api/endpoints, docs/api.md), with the token.
  namespace asio = boost::asio;
  asio::io_context ioc;
  test::scripted_http_server api(ioc);
  std::string authorization;
  std::vector<std::string> targets;
  api.set_handler([&](const test::recorded_request& r) {
    authorization = r.header("Authorization");
    targets.push_back(r.target);
    if (r.target == "/api/overview")  // a standby: its zeros must not pass for "nothing in flight"
      return test::scripted_action::respond(200, {"Content-Type: application/json"}, R"({"streaming": false})");
    // Two pages (docs/api.md): the CLI follows "next".
    if (r.target == "/api/endpoints?limit=1000")
      return test::scripted_action::respond(
          200, {"Content-Type: application/json"},
          fmt::format(R"({{"endpoints": [{{"id": {}, "queued": 7, "in_flight": 3}}], "next": "page-2"}})", bad));
    if (r.target == "/api/endpoints?limit=1000&after=page-2")
      return test::scripted_action::respond(
          200, {"Content-Type: application/json"},
          fmt::format(R"({{"endpoints": [{{"id": {}, "queued": 1, "in_flight": 0}}], "next": null}})", good));
    return test::scripted_action::respond(404);
  });
  auto work = asio::make_work_guard(ioc);
  std::thread server([&] { ioc.run(); });
  const auto token_file = std::filesystem::temp_directory_path() / fmt::format("walhook-token-{}", ::getpid());
  std::ofstream(token_file) << "t0ken\n";
  std::string base = api.url("/");
  base.pop_back();
  int rc = s.cli({"status", "--json", "--admin-url", base, "--admin-token-file", token_file.string()});
  const std::string live_output = s.last_output;
  int text_rc = s.cli({"status", "--admin-url", base, "--admin-token-file", token_file.string()});
  const std::string live_text = s.last_output;
  work.reset();
  ioc.stop();
  server.join();
  std::filesystem::remove(token_file);
  REQUIRE(rc == 0);
  CHECK(text_rc == 0);
  CHECK(authorization == "Bearer t0ken");
  auto live = status_lines(live_output);
  simdjson::dom::parser parser3;
  simdjson::dom::element l = parser3.parse(live[bad]);
  CHECK(int64_t(l["queued"]) == 7);
  CHECK(int64_t(l["in_flight"]) == 3);
  simdjson::dom::element g = parser3.parse(live[good]);
  CHECK(int64_t(g["queued"]) == 1);  // from the second page
  CHECK(std::count(targets.begin(), targets.end(), "/api/endpoints?limit=1000&after=page-2") == 2);  // --json, then text
  CHECK(live_text.find("give --admin-url http://HOST:PORT") == std::string::npos);
  CHECK(live_text.find("is not streaming the slot (a standby, or reconnecting)") != std::string::npos);

  // A walhook that does not answer: the rows still show, with a line saying why the live numbers do not.
  int closed = relay::free_tcp_port();
  REQUIRE(s.cli({"status", "--json", "--admin-url", fmt::format("http://127.0.0.1:{}", closed)}) == 0);
  CHECK(s.last_output.find("walhook: live numbers not shown: --admin-url") != std::string::npos);
  CHECK(s.last_output.find("\"queued\":null") != std::string::npos);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("typos get the nearest command or option; run's fatal errors are JSON log lines") {
  std::string out;
  CHECK(test::run_walhook({"sned"}, out) != 0);
  CHECK(out == "walhook: unknown command 'sned'; did you mean 'send'?\n");
  CHECK(test::run_walhook({"send", "--tenat", "x"}, out) != 0);
  CHECK(out == "walhook: unknown option '--tenat'; did you mean '--tenant'?\n");
  CHECK(test::run_walhook({"endpoint", "rotate-secrte", "1"}, out) != 0);
  CHECK(out == "walhook: unknown command 'rotate-secrte'; did you mean 'rotate-secret'?\n");
  CHECK(test::run_walhook({"frobnicate"}, out) != 0);
  CHECK(out == "walhook: unknown command 'frobnicate'\n");  // nothing near enough to suggest
  CHECK(test::run_walhook({"endpoint", "add", "--help"}, out) == 0);
  CHECK(out.find("comma-separated, exact match of event_type (no wildcards); default all") != std::string::npos);

  int closed = relay::free_tcp_port();
  CHECK(test::run_walhook({"run", "--database-url", fmt::format("postgresql://postgres@127.0.0.1:{}/x", closed)}, out) == 1);
  simdjson::dom::parser parser;
  simdjson::dom::element line;
  REQUIRE_MESSAGE(parser.parse(out).get(line) == simdjson::SUCCESS, out);
  CHECK(std::string_view(line["level"]) == "error");
  CHECK(std::string_view(line["msg"]) == "run.failed");
  CHECK(std::string_view(line["error"]).starts_with("cannot connect to PostgreSQL:"));
}

TEST_CASE("resend: a first-try success left no row; resend delivers the same webhook-id again") {
  setup s("op_resend");
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/c"), delivery::generate_secret());
  long long other_tenant = test::add_endpoint(s.db, "u", s.rcv->url("/u"), delivery::generate_secret());
  auto walhook = s.start_walhook();  // --record failed (the default)
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  std::string event = s.publish("t", "x", R"({"n": 1})");
  REQUIRE(test::eventually([&] { return s.received("/c").size() == 1; }, 20s));
  pg::params key{std::to_string(ep), event};
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND event_id = $2::uuid", key) == "0");

  relay::blocking_db db(s.url);  // as the admin API does: its own connection, reused across actions
  auto c = relay::operations::resend(db, ep, event);
  CHECK(c.endpoint_id == ep);
  CHECK(c.action == "resent");
  CHECK(c.deliveries == 1);
  CHECK(c.note.empty());
  REQUIRE(test::eventually([&] { return s.received("/c").size() == 2; }, 20s));
  auto got = s.received("/c");
  CHECK(got[1].webhook_id == event);
  CHECK(got[1].body == got[0].body);
  CHECK(test::eventually(
      [&] { return s.value("SELECT status FROM walhook.deliveries WHERE endpoint_id = $1 AND event_id = $2::uuid", key) == "delivered"; },
      20s));
  // A delivered row: again.
  relay::operations::resend(db, ep, event);
  REQUIRE(test::eventually([&] { return s.received("/c").size() == 3; }, 20s));

  // Refusals, each leaving the connection usable.
  CHECK_THROWS_WITH(relay::operations::resend(db, other_tenant, event),
                    doctest::Contains(fmt::format("is of tenant 't', endpoint {} of tenant 'u'", other_tenant).c_str()));
  CHECK_THROWS_WITH(relay::operations::resend(db, ep, "00000000-0000-0000-0000-000000000000"),
                    doctest::Contains("no event 00000000-0000-0000-0000-000000000000 in walhook.outbox"));
  CHECK_THROWS_WITH(relay::operations::resend(db, 9999, event), "no endpoint with id 9999");
  CHECK_THROWS_WITH(relay::operations::resend(db, ep, "nope"), doctest::Contains("is not a UUID"));
  CHECK(walhook.stop() == 0);

  // With walhook stopped, rows set by hand: an attempt in flight, a newer state of the merge key pending.
  s.db.exec("UPDATE walhook.deliveries SET status = 'sending' WHERE endpoint_id = $1 AND event_id = $2::uuid", key);
  CHECK_THROWS_WITH(relay::operations::resend(db, ep, event), doctest::Contains("is in flight now"));
  std::string older = s.publish("t", "state", R"({"v": 1})", "entity-1");
  std::string newer = s.publish("t", "state", R"({"v": 2})", "entity-1");
  s.db.exec("INSERT INTO walhook.deliveries (endpoint_id, event_id, merge_key, status, next_attempt_at, event_created_at) "
            "VALUES ($1, $2::uuid, 'entity-1', 'pending', now() + interval '1 hour', now())",
            pg::params{std::to_string(ep), newer});
  CHECK_THROWS_WITH(relay::operations::resend(db, ep, older),
                    doctest::Contains(
                        fmt::format("a newer state of merge key 'entity-1' is pending for endpoint {} (event {})", ep, newer).c_str()));
  // The pending one itself may be resent (it becomes due now).
  auto again = relay::operations::resend(db, ep, newer);
  CHECK(again.deliveries == 1);
  CHECK(s.value("SELECT next_attempt_at <= now() FROM walhook.deliveries WHERE endpoint_id = $1 AND event_id = $2::uuid",
                pg::params{std::to_string(ep), newer}) == "t");
  // A paused endpoint: resent, with a note saying when it goes out.
  relay::operations::set_status(db, ep, "pause");
  s.db.exec("UPDATE walhook.deliveries SET status = 'dead' WHERE endpoint_id = $1 AND event_id = $2::uuid", key);
  auto paused = relay::operations::resend(db, ep, event);
  CHECK(paused.note.find("is paused: they go out after `walhook endpoint resume") != std::string::npos);
  // An endpoint the routing never sent the event to (added later, or not subscribed): resent, said so.
  long long later = test::add_endpoint(s.db, "t", s.rcv->url("/later"), delivery::generate_secret(), {"other.type"});
  auto unrouted = relay::operations::resend(db, later, event);
  CHECK(unrouted.note.find(fmt::format("endpoint {} was added after the event", later)) != std::string::npos);
  CHECK(unrouted.note.find(fmt::format("endpoint {} does not subscribe to x", later)) != std::string::npos);
  // SHA-256 of the decoded keys (computed independently with Python's hashlib).
  CHECK(relay::operations::secret_fingerprints("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=") ==
        "sha256:f74e1720b761 sha256:d504fb47186b");
  CHECK(relay::operations::secret_fingerprints("not a secret").empty());
}

// ------------------------------------------------------------------------------ issue 19 #8, #10

namespace {

/// A file holding `text`, removed with the object.
struct temp_file {
  explicit temp_file(const std::string& text) {
    static int n = 0;
    path = std::filesystem::temp_directory_path() / fmt::format("walhook-secret-{}-{}", ::getpid(), ++n);
    std::ofstream(path) << text;
  }
  ~temp_file() { std::filesystem::remove(path); }
  std::filesystem::path path;
};

/// `walhook <args> --database-url <url>` with stdin read from `input_file`.
int cli_with_stdin(setup& s, std::vector<std::string> args, const std::filesystem::path& input_file) {
  std::vector<std::string> argv{"/bin/sh", "-c", "exec \"$0\" \"$@\" < \"$WALHOOK_TEST_STDIN\"", test::walhook_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--database-url");
  argv.push_back(s.url);
  ::setenv("WALHOOK_TEST_STDIN", input_file.c_str(), 1);
  const int rc = relay::run_process(argv, "", s.last_output);
  ::unsetenv("WALHOOK_TEST_STDIN");
  return rc;
}

std::string url_as(const std::string& url, const std::string& role) {
  std::string u = url;
  return u.replace(u.find("postgres@"), 9, role + ":change-me@");
}

}  // namespace

TEST_CASE("--secret-file FILE and - (stdin): endpoint add and rotate-secret take the secret off the command line") {
  setup s("op_secret_file");
  const std::string first = delivery::generate_secret(), second = delivery::generate_secret(), third = delivery::generate_secret();
  temp_file file("  " + first + "  \n# the first line only\n");
  REQUIRE(s.cli({"endpoint", "add", "--tenant", "t", "--url", s.rcv->url("/f"), "--secret-file", file.path.string()}) == 0);
  // The output names it by fingerprint only.
  CHECK(s.last_output.find(first) == std::string::npos);
  CHECK(s.last_output.find("secret: from --secret-file (" + relay::operations::secret_fingerprints(first) + ")") !=
        std::string::npos);
  const std::string id = s.value("SELECT max(id) FROM walhook.endpoints");
  pg::params p{id};
  CHECK(s.value("SELECT secret FROM walhook.endpoints WHERE id = $1", p) == first);

  temp_file piped(second + "\n");
  REQUIRE(cli_with_stdin(s, {"endpoint", "rotate-secret", id, "--grace", "1h", "--secret-file", "-"}, piped.path) == 0);
  CHECK(s.last_output.find(second) == std::string::npos);
  CHECK(s.value("SELECT secret FROM walhook.endpoints WHERE id = $1", p) == second + " " + first);

  // Refusals: both flags, an empty file, a missing one; nothing changes.
  CHECK(s.cli({"endpoint", "rotate-secret", id, "--secret", third, "--secret-file", file.path.string()}) != 0);
  CHECK(s.last_output.find("excludes") != std::string::npos);
  temp_file empty("\n");
  CHECK(s.cli({"endpoint", "rotate-secret", id, "--secret-file", empty.path.string()}) == 1);
  CHECK(s.last_output.find("no secret in it") != std::string::npos);
  CHECK(s.cli({"endpoint", "add", "--tenant", "t", "--url", s.rcv->url("/g"), "--secret-file", "/nonexistent/secret"}) == 1);
  CHECK(s.last_output.find("--secret-file /nonexistent/secret: cannot read it") != std::string::npos);
  CHECK(s.value("SELECT secret FROM walhook.endpoints WHERE id = $1", p) == second + " " + first);
  CHECK(s.value("SELECT count(*) FROM walhook.endpoints") == "1");
}

TEST_CASE("rotate-secret --grace 0: the old secret goes at once — the next delivery is signed with the new one alone") {
  setup s("op_grace_zero");
  const std::string old_secret = delivery::generate_secret(), new_secret = delivery::generate_secret();
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/z"), old_secret);
  auto walhook = s.start_walhook();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  s.publish("t", "x", "{}");
  REQUIRE(test::eventually([&] { return s.received("/z").size() == 1; }, 20s));
  CHECK(signed_by(s.received("/z")[0], old_secret));

  REQUIRE(s.cli({"endpoint", "rotate-secret", std::to_string(ep), "--grace", "0", "--secret", new_secret}) == 0);
  CHECK(s.last_output.find("the old secret(s) are gone; deliveries are signed with the new secret alone") != std::string::npos);
  pg::params id{std::to_string(ep)};
  CHECK(s.value("SELECT secret || ' ' || (secret_grace_until IS NULL) FROM walhook.endpoints WHERE id = $1", id) ==
        new_secret + " true");
  // Committed after the rotation, so walhook reads the change first (one stream, commit order).
  const std::string after = s.publish("t", "x", "{}");
  REQUIRE(test::eventually([&] { return s.received("/z").size() == 2; }, 20s));
  const auto r = s.received("/z")[1];
  CHECK(r.webhook_id == after);
  CHECK(signatures(r.webhook_signature) == 1);
  CHECK(signed_by(r, new_secret));
  CHECK_FALSE(signed_by(r, old_secret));
  CHECK(walhook.stop() == 0);
}

TEST_CASE("secret drop: run checks its privilege; an expired secret stops signing while its drop fails, which is retried and reported") {
  setup s("op_secret_drop");
  std::string out;
  REQUIRE(relay::run_process({"psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", s.url, "-f",
                              std::string(WALHOOK_SOURCE_DIR) + "/sql/roles.sql"},
                             "", out) == 0);
  const std::string relay_url = url_as(s.url, "walhook_relay");
  const std::string old_secret = delivery::generate_secret(), new_secret = delivery::generate_secret();
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/d"), old_secret);
  pg::params id{std::to_string(ep)};

  // Preflight: a role that may not drop expired secrets does not start.
  s.db.exec("REVOKE UPDATE (secret_grace_until) ON walhook.endpoints FROM walhook_relay");
  // (Under `timeout`: a walhook that started anyway would run until stopped.)
  std::vector<std::string> refused{"timeout", "60", test::walhook_binary()};
  for (const auto& a : test::run_args(relay_url, s.slot)) refused.push_back(a);
  CHECK(relay::run_process(refused, "", out) == 1);
  INFO(out);
  CHECK(out.find("missing privileges on the walhook tables") != std::string::npos);
  CHECK(out.find(": UPDATE on walhook.endpoints (secret_grace_until)\"}") != std::string::npos);  // that one alone
  s.db.exec("GRANT UPDATE (secret_grace_until) ON walhook.endpoints TO walhook_relay");

  test::walhook_process walhook(test::run_args(relay_url, s.slot));
  walhook.start();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  // The privilege goes while walhook runs; a rotation with a short grace.
  s.db.exec("REVOKE UPDATE (secret, secret_grace_until) ON walhook.endpoints FROM walhook_relay");
  REQUIRE(s.cli({"endpoint", "rotate-secret", std::to_string(ep), "--grace", "3s", "--secret", new_secret}) == 0);
  // Every failed try is reported, not just the first (5 s, then 10 s apart).
  REQUIRE(test::eventually([&] { return walhook.count_in_log(R"("msg":"secrets.drop_expired_failed")") >= 2; }, 60s));
  CHECK(walhook.count_in_log(R"("level":"warn","msg":"secrets.drop_expired_failed")") >= 2);
  CHECK(walhook.log().find(R"("failures":2)") != std::string::npos);
  CHECK(walhook.log().find("\"retry_in_s\":") != std::string::npos);
  // The row still holds both secrets, past the grace: only the new one signs.
  REQUIRE(test::eventually([&] { return s.value("SELECT secret_grace_until < now() FROM walhook.endpoints WHERE id = $1", id) == "t"; },
                           20s, 200ms));
  CHECK(s.value("SELECT secret FROM walhook.endpoints WHERE id = $1", id) == new_secret + " " + old_secret);
  s.rcv->clear();
  const std::string event = s.publish("t", "x", "{}");
  REQUIRE(test::eventually([&] { return s.received("/d").size() == 1; }, 20s));
  const auto r = s.received("/d")[0];
  CHECK(r.webhook_id == event);
  CHECK(signatures(r.webhook_signature) == 1);
  CHECK(signed_by(r, new_secret));
  CHECK_FALSE(signed_by(r, old_secret));
  // The privilege back: a later try drops the old secret.
  s.db.exec("GRANT UPDATE (secret, secret_grace_until) ON walhook.endpoints TO walhook_relay");
  CHECK(test::eventually(
      [&] { return s.value("SELECT secret || ' ' || (secret_grace_until IS NULL) FROM walhook.endpoints WHERE id = $1", id) ==
                   new_secret + " true"; },
      60s, 500ms));
  CHECK(walhook.count_in_log("\"secrets.old_dropped\"") == 1);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("the operator tenant's name is reserved: endpoint add needs --operator for it, send refuses it; inbox tenants are refused") {
  setup s("op_reserved");
  CHECK(s.cli({"endpoint", "add", "--tenant", "walhook-operator", "--url", s.rcv->url("/o")}) == 1);
  CHECK(s.last_output.find("tenant 'walhook-operator' is reserved for walhook's operator notifications") != std::string::npos);
  CHECK(s.last_output.find("give --operator") != std::string::npos);
  CHECK(s.cli({"endpoint", "add", "--url", s.rcv->url("/o")}) == 1);
  CHECK(s.last_output.find("--tenant is required (or --operator") != std::string::npos);
  // An inbox source's tenant is not a customer's: its endpoints may reach private networks.
  CHECK(s.cli({"endpoint", "add", "--tenant", "inbox:shop", "--url", s.rcv->url("/o")}) == 1);
  CHECK(s.last_output.find("tenant 'inbox:shop' is an inbox source's") != std::string::npos);
  CHECK(s.cli({"endpoint", "add", "--tenant", "Inbox:shop", "--url", s.rcv->url("/o")}) == 1);
  CHECK(s.value("SELECT count(*) FROM walhook.endpoints") == "0");

  REQUIRE(s.cli({"endpoint", "add", "--operator", "--url", s.rcv->url("/o"), "--event-types", "walhook.endpoint.disabled"}) == 0);
  REQUIRE(s.cli({"endpoint", "add", "--operator", "--tenant", "ops", "--url", s.rcv->url("/p")}) == 0);
  REQUIRE(s.cli({"endpoint", "add", "--tenant", "walhook-operators", "--url", s.rcv->url("/q")}) == 0);  // only the name itself
  CHECK(s.value("SELECT string_agg(tenant_id, ',' ORDER BY id) FROM walhook.endpoints") ==
        "walhook-operator,ops,walhook-operators");

  CHECK(s.cli({"send", "--tenant", "walhook-operator", "--type", "order.paid", "--data", "{}"}) == 1);
  CHECK(s.last_output == "walhook: tenant 'walhook-operator' is walhook's operator tenant: only walhook publishes there\n");
  CHECK(s.value("SELECT count(*) FROM walhook.outbox") == "0");
  REQUIRE(s.cli({"send", "--tenant", "ops", "--type", "order.paid", "--data", "{}"}) == 0);
}

TEST_CASE("resume after the SSRF guard's refusal: the old error is not shown as current (status table, --json)") {
  setup s("op_resume_error");
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/hook"), delivery::generate_secret());
  pg::params id{std::to_string(ep)};
  // The README's first hour: walhook run without --allow-private-networks, a receiver on
  // loopback. A retry waits 30–60 min (--backoff-base-ms): only resume sends it sooner.
  const std::vector<std::string> slow_retry{"--backoff-base-ms", "3600000"};
  test::walhook_process guarded({"run", "--database-url", s.url, "--slot", s.slot, "--backoff-base-ms", "3600000"}, "guarded");
  guarded.start();
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  s.publish("t", "order.paid", "{}");
  REQUIRE(test::eventually(
      [&] { return s.value("SELECT last_error FROM walhook.endpoint_health WHERE endpoint_id = $1", id).find("SSRF guard") !=
                   std::string::npos; },
      20s));
  CHECK(guarded.stop() == 0);
  REQUIRE(s.cli({"status", "--json"}) == 0);
  CHECK(status_lines(s.last_output)[ep].find("SSRF guard") != std::string::npos);  // current, so shown

  // The way out the README gives: the flag, then resume.
  auto walhook = s.start_walhook(slow_retry);
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  CHECK(s.received("/hook").empty());  // the pending delivery waits out its backoff
  REQUIRE(s.cli({"endpoint", "resume", std::to_string(ep)}) == 0);
  CHECK(s.last_output.starts_with(fmt::format("endpoint {}: resumed; 1 delivery due now\n", ep)));
  CHECK(s.last_output.find("its last error, from before the resume, is cleared: address blocked by the SSRF guard") !=
        std::string::npos);
  REQUIRE(test::eventually([&] { return s.received("/hook").size() == 1; }, 20s));
  REQUIRE(test::eventually(
      [&] { return s.value("SELECT status FROM walhook.deliveries WHERE endpoint_id = $1", id) == "delivered"; }, 20s));

  // Healthy now: no error in the health row, in status --json or in the table.
  CHECK(s.value("SELECT coalesce(last_error, 'none') || ' ' || coalesce(last_status::text, 'none') || ' ' || "
                "consecutive_failures FROM walhook.endpoint_health WHERE endpoint_id = $1",
                id) == "none none 0");
  REQUIRE(s.cli({"status", "--json"}) == 0);
  simdjson::dom::parser parser;
  simdjson::dom::element row = parser.parse(status_lines(s.last_output)[ep]);
  CHECK(row["last_error"].is_null());
  CHECK(int64_t(row["consecutive_failures"]) == 0);
  REQUIRE(s.cli({"status"}) == 0);
  std::string line;
  std::istringstream text(s.last_output);
  for (std::string l; std::getline(text, l);)
    if (l.starts_with(fmt::format("{:>6}  ", ep))) line = l;
  CHECK(line.ends_with(" -"));  // the last_error column
  CHECK(line.find("SSRF") == std::string::npos);
  CHECK(walhook.stop() == 0);
}

TEST_CASE("walhook event: a first-try success from before a restart is delivered, inferred and said why; events --type") {
  setup s("op_event");
  long long ep = test::add_endpoint(s.db, "t", s.rcv->url("/e"), delivery::generate_secret());
  long long shipped_only = test::add_endpoint(s.db, "t", s.rcv->url("/s"), delivery::generate_secret(), {"order.shipped"});
  auto walhook = s.start_walhook();  // --record failed (the default): a first-try success leaves no row
  REQUIRE(test::eventually([&] { return s.streaming(); }, 20s));
  const std::string paid = s.publish("t", "order.paid", R"({"n": 1})");
  const std::string shipped = s.publish("t", "order.shipped", R"({"n": 2})");
  REQUIRE(test::eventually([&] { return s.received("/e").size() == 2 && s.received("/s").size() == 1; }, 20s));
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries") == "0");
  // walhook records its delivered snapshot about every second while streaming.
  REQUIRE(test::eventually(
      [&] {
        return s.value("SELECT pg_visible_in_snapshot(o.xid, p.delivered_snapshot) FROM walhook.outbox o, "
                       "walhook.slot_progress p WHERE o.id = $1::uuid AND p.slot_name = $2",
                       {paid, s.slot}) == "t";
      },
      20s));
  CHECK(walhook.stop() == 0);  // the in-memory record of attempts goes with the process

  auto again = s.start_walhook({"--admin-listen", "127.0.0.1:0"});
  REQUIRE(test::eventually([&] { return s.streaming() && again.admin_port() != 0; }, 20s));
  REQUIRE(s.cli({"event", paid}) == 0);
  const std::string table = s.last_output;
  INFO(table);
  CHECK(table.starts_with(fmt::format("event {}: tenant t, type order.paid, created 20", paid)));
  CHECK(table.find(fmt::format("{:>8}  {:<10} {:>8} {:>11}  {}\n", ep, "delivered", "-", "-", s.rcv->url("/e"))) !=
        std::string::npos);
  CHECK(table.find(fmt::format("why: inferred from walhook's records: no delivery row (a first-try success leaves none "
                               "with --record failed), routed to it, and its transaction (xid ")) != std::string::npos);
  CHECK(table.find(fmt::format("is in the delivered snapshot of slot {}", s.slot)) != std::string::npos);
  CHECK(table.find(fmt::format("{:>8}  ", shipped_only)) == std::string::npos);  // not subscribed: not shown
  // The slot is found in walhook.slot_progress; another one named has no snapshot to ask.
  REQUIRE(s.cli({"event", paid, "--slot", "nope"}) == 0);
  CHECK(s.last_output.find(fmt::format("{:>8}  unknown ", ep)) != std::string::npos);
  CHECK(s.last_output.find("walhook's records cannot tell: walhook has recorded no delivered snapshot for slot nope") !=
        std::string::npos);

  // --json is the admin API's answer; the API (from the running walhook) says the same.
  REQUIRE(s.cli({"event", paid, "--json"}) == 0);
  simdjson::dom::parser parser;
  simdjson::dom::element cli = parser.parse(s.last_output);
  REQUIRE(cli["endpoints"].get_array().size() == 1);
  auto line = cli["endpoints"].at(0);
  CHECK(int64_t(line["endpoint_id"]) == ep);
  CHECK(std::string_view(line["verdict"]) == "delivered");
  CHECK(line["delivery"].is_null());
  const std::string reason{std::string_view(line["reason"])};
  CHECK(reason.starts_with("inferred from walhook's records"));
  const auto [status, body] = test::http_get(again.admin_port(), "/api/events/" + paid);
  REQUIRE(status == 200);
  simdjson::dom::parser parser2;
  simdjson::dom::element api = parser2.parse(body);
  CHECK(std::string_view(api["endpoints"].at(0)["verdict"]) == "delivered");
  CHECK(std::string_view(api["endpoints"].at(0)["reason"]) == reason);

  // A paused endpoint follows the outbox by cursor: what its cursor owes has no row and no
  // attempt, and is pending — owed, said so — not unknown.
  long long paused = test::add_endpoint(s.db, "d", s.rcv->url("/d"), delivery::generate_secret());
  REQUIRE(test::eventually([&] { return s.acknowledged(s.value("SELECT pg_current_wal_lsn()::text")); }, 20s));
  REQUIRE(s.cli({"endpoint", "pause", std::to_string(paused)}) == 0);
  REQUIRE(test::eventually([&] { return s.acknowledged(s.value("SELECT pg_current_wal_lsn()::text")); }, 20s));
  std::string owed;
  for (int i = 0; i < 3; ++i) owed = s.publish("d", "order.paid", "{}");
  REQUIRE(test::eventually(
      [&] {
        return s.acknowledged(s.value("SELECT pg_current_wal_lsn()::text")) &&
               s.value("SELECT count(*) FROM walhook.endpoint_cursors WHERE endpoint_id = $1", {std::to_string(paused)}) == "1";
      },
      20s));
  CHECK(s.value("SELECT count(*) FROM walhook.deliveries WHERE event_id = $1::uuid", {owed}) == "0");
  REQUIRE(s.cli({"event", owed}) == 0);
  CHECK(s.last_output.find(fmt::format("{:>8}  {:<10}", paused, "pending")) != std::string::npos);
  CHECK(s.last_output.find("why: owed by its outbox cursor: the endpoint follows walhook.outbox since ") != std::string::npos);
  CHECK(s.received("/d").empty());

  CHECK(s.cli({"event", "00000000-0000-0000-0000-000000000000"}) == 1);
  CHECK(s.last_output == "walhook: no event with id 00000000-0000-0000-0000-000000000000 (the outbox row is gone, or never was)\n");
  CHECK(s.cli({"event", "nope"}) == 1);
  CHECK(s.last_output == "walhook: event id 'nope' is not a UUID (walhook.outbox.id, the webhook-id)\n");

  // walhook events --type: only those event types.
  REQUIRE(s.cli({"events", "--tenant", "t", "--type", "order.shipped"}) == 0);
  CHECK(s.last_output.find(shipped) != std::string::npos);
  CHECK(s.last_output.find(paid) == std::string::npos);
  CHECK(std::count(s.last_output.begin(), s.last_output.end(), '\n') == 1);
  REQUIRE(s.cli({"events", "--tenant", "t", "--type", "order.paid, order.shipped"}) == 0);
  CHECK(std::count(s.last_output.begin(), s.last_output.end(), '\n') == 2);
  CHECK(again.stop() == 0);
}
