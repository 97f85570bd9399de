// The tenant portal (/portal/ of `walhook run --api-listen`, docs/tenant-api.md "The portal") in
// headless Chromium against a real walhook, PostgreSQL and receiver: a one-time link from
// `walhook tenant portal-link` opens a session and leaves the address (a second use is refused);
// the customer adds an endpoint (its secret shown once), resends an event from the event list
// (the receiver gets it again with the same webhook-id) and rotates the secret; the session's
// cookie alone is refused without its CSRF token; another tenant's endpoint is 404; an expired
// session signs the page out; CSP allows no inline script; every change is in the audit log.
// With WALHOOK_SCREENSHOTS_DIR set it writes portal.png there (docs/). Skipped without Chromium
// unless WALHOOK_REQUIRE_BROWSER=1 (it_console's first case says which).

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"
#include "tests/support/headless_browser.hpp"
#include "tests/support/http_call.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <simdjson.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

using namespace walhook;
using namespace std::chrono_literals;

namespace {

const bool no_browser = test::find_chromium().empty() && !(std::getenv("WALHOOK_REQUIRE_BROWSER") &&
                                                            std::string_view(std::getenv("WALHOOK_REQUIRE_BROWSER")) == "1");

std::string click(const std::string& selector) {
  return fmt::format("(() => {{ const e = document.querySelector({}); if (!e) throw new Error('no ' + {}); e.click(); return true; }})()",
                     test::js_string(selector), test::js_string(selector));
}

/// `walhook tenant portal-link`: the link of its "link: " line ("" if it failed).
std::string portal_link(const std::string& url, const std::string& tenant, unsigned short port) {
  std::string out;
  if (test::run_walhook({"tenant", "portal-link", "--database-url", url, "--tenant", tenant, "--expires", "15m",
                         "--base-url", fmt::format("http://127.0.0.1:{}/", port)},
                        out) != 0)
    return {};
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("(^|\n)link: (\\S+)\n"))) return {};
  return m[2];
}

}  // namespace

TEST_CASE("tenant portal in Chromium: one-time link, add an endpoint, resend, rotate, CSRF, expiry" *
          doctest::skip(no_browser)) {
  test::scenario s("tenant_portal");
  const auto theirs = test::add_endpoint(s.db, "globex", s.rcv->url("/globex"), delivery::generate_secret());
  auto walhook = s.start_walhook({"--api-listen", "127.0.0.1:0"});
  INFO(walhook.log_tail(6000));
  REQUIRE(test::eventually([&] { return walhook.count_in_log("\"replication.streaming\"") == 1; }, 30s));
  const auto port = walhook.api_port();
  REQUIRE(port != 0);
  {
    auto page = test::call(port, "GET", "/portal/");
    CHECK(page.status == 200);
    CHECK(page.headers["Content-Security-Policy"].find("default-src 'self'") != std::string::npos);
    CHECK(page.body.find("<script>") == std::string::npos);  // no inline script: app.js alone
    CHECK(test::call(port, "GET", "/portal/nothing.js").status == 404);
  }
  std::string out;
  CHECK(test::run_walhook({"tenant", "portal-link", "--database-url", s.url, "--tenant", "inbox:x"}, out) != 0);

  const auto link = portal_link(s.url, "acme", port);
  REQUIRE(link.find("/portal/#code=") != std::string::npos);
  const auto code = link.substr(link.find("#code=") + 6);

  test::headless_browser b({.binary = test::find_chromium(), .width = 1300, .height = 900, .timeout = 30s});
  b.navigate(link);
  const bool ready = b.wait_for("document.body.dataset.ready === 'true'", 15s);
  if (!ready) MESSAGE("page: " << b.evaluate_string("document.body.innerText"));
  REQUIRE(ready);
  CHECK(b.evaluate_string("location.href") == fmt::format("http://127.0.0.1:{}/portal/", port));  // the code left
  CHECK(b.evaluate_string("document.getElementById('tenant').textContent") == "acme");
  // The code opened one session: a second exchange is refused.
  CHECK(b.evaluate_string(fmt::format("fetch('/portal/session', {{method: 'POST', headers: {{'Content-Type': "
                                      "'application/json'}}, body: JSON.stringify({{code: {}}})}}).then(r => String(r.status))",
                                      test::js_string(code))) == "401");

  // --- add an endpoint: its secret is shown once
  b.evaluate(fmt::format("document.getElementById('new-url').value = {}; document.getElementById('new-types').value = "
                         "'order.paid'; true",
                         test::js_string(s.rcv->url("/acme"))));
  b.evaluate(click("#add-endpoint button[type=submit]"));
  const bool added = b.wait_for("document.querySelectorAll('#endpoints tbody tr[data-endpoint]').length === 1", 15s);
  if (!added) MESSAGE("page: " << b.evaluate_string("document.body.innerText"));
  REQUIRE(added);
  const auto first_secret = b.evaluate_string("document.getElementById('secret').textContent");
  CHECK(first_secret.starts_with("whsec_"));
  const auto ep = std::stoll(b.evaluate_string("document.querySelector('#endpoints tbody tr[data-endpoint]').dataset.endpoint"));
  CHECK(s.value("SELECT tenant_id FROM walhook.endpoints WHERE id = $1", {std::to_string(ep)}) == "acme");

  // --- an event reaches it; resent from the event list, it comes again with the same webhook-id
  const auto event = s.publish("acme", "order.paid", R"({"order": 42})");
  REQUIRE(test::eventually([&] { return s.received("/acme").size() == 1; }, 20s));
  b.evaluate(click("#events-form button[type=submit]"));
  const auto row = fmt::format("#events tr[data-event=\"{}\"]", event);
  REQUIRE(b.wait_for(fmt::format("!!document.querySelector({})", test::js_string(row)), 15s));
  b.evaluate(click(row + " button"));
  REQUIRE(test::eventually([&] { return s.received("/acme").size() == 2; }, 20s));
  CHECK(s.received("/acme")[1].webhook_id == event);
  CHECK(s.received("/acme")[1].webhook_id == s.received("/acme")[0].webhook_id);

  // --- rotate the secret: asked twice, then shown once
  const auto rotate = fmt::format("#endpoints tr[data-endpoint=\"{}\"] button:nth-of-type(3)", ep);
  b.evaluate(click(rotate));
  CHECK(b.evaluate_string(fmt::format("document.querySelector({}).textContent", test::js_string(rotate))) ==
        "Confirm rotation");
  b.evaluate(click(rotate));
  REQUIRE(b.wait_for(fmt::format("document.getElementById('secret').textContent !== {}", test::js_string(first_secret)),
                     15s));
  CHECK(b.evaluate_string("document.getElementById('secret').textContent").starts_with("whsec_"));

  if (const char* dir = std::getenv("WALHOOK_SCREENSHOTS_DIR")) {
    std::ofstream(std::filesystem::path(dir) / "portal.png", std::ios::binary) << b.screenshot();
  }
  // The one error the page met: the refused second use of the code (a 401 the test asked for).
  for (const auto& e : b.page_errors()) {
    INFO(e);
    CHECK(e.find("401") != std::string::npos);
  }

  // --- the cookie alone is refused (CSRF); with its token it reaches acme's data and no other's
  const std::string cookies = b.call("Network.getCookies");
  std::smatch m;
  REQUIRE(std::regex_search(cookies, m, std::regex(R"re("name":"walhook_portal"[^}]*?"value":"([A-Za-z0-9_-]+)")re")));
  const std::string cookie = "walhook_portal=" + std::string(m[1]);
  CHECK(cookies.find("\"httpOnly\":true") != std::string::npos);
  CHECK(cookies.find("\"sameSite\":\"Strict\"") != std::string::npos);
  const auto csrf = b.evaluate_string("sessionStorage.getItem('walhook.csrf')");
  CHECK(test::call(port, "GET", "/v1/endpoints", {{"Cookie", cookie}}).status == 403);
  CHECK(test::call(port, "GET", "/v1/endpoints", {{"Cookie", cookie}, {"X-CSRF-Token", std::string(43, 'A')}}).status == 401);
  CHECK(test::call(port, "GET", "/v1/endpoints", {{"Cookie", cookie}, {"X-CSRF-Token", csrf}}).status == 200);
  CHECK(test::call(port, "GET", fmt::format("/v1/endpoints/{}", theirs), {{"Cookie", cookie}, {"X-CSRF-Token", csrf}})
            .status == 404);

  // --- the audit log names the session, never a token
  CHECK(s.value("SELECT string_agg(action, ',' ORDER BY id) FROM walhook.tenant_audit WHERE tenant_id = 'acme'") ==
        "endpoint.create,delivery.resend,endpoint.rotate_secret");
  CHECK(s.value("SELECT bool_and(token LIKE 'portal:%') FROM walhook.tenant_audit WHERE tenant_id = 'acme'") == "t");

  // --- sign out: the session ends (a stray logout without a cookie changes nothing, and walhook runs on)
  CHECK(test::call(port, "POST", "/portal/logout").status == 200);
  CHECK(walhook.running());
  b.evaluate(click("#sign-out"));
  REQUIRE(b.wait_for("document.getElementById('message').textContent === 'Signed out.'", 15s));
  CHECK(test::call(port, "GET", "/v1/endpoints", {{"Cookie", cookie}, {"X-CSRF-Token", csrf}}).status == 401);
  CHECK(walhook.running());

  // --- an expired session signs the page out
  b.navigate(portal_link(s.url, "acme", port));
  REQUIRE(b.wait_for("document.body.dataset.ready === 'true'", 15s));
  s.value("UPDATE walhook.portal_sessions SET expires_at = now() - interval '1 second'");
  b.evaluate(click("#events-form button[type=submit]"));
  CHECK(b.wait_for("document.getElementById('message').textContent.includes('session has ended')", 15s));
  CHECK(b.evaluate_bool("document.getElementById('endpoints-section').hidden"));

  // --- the operator ends a tenant's sessions (a link that leaked)
  {
    const auto third = portal_link(s.url, "acme", port);
    auto started = test::call(port, "POST", "/portal/session", {{"Content-Type", "application/json"}},
                              fmt::format(R"({{"code": "{}"}})", third.substr(third.find("#code=") + 6)));
    REQUIRE(started.status == 200);
    const auto set = started.headers["Set-Cookie"];
    const auto session = set.substr(0, set.find(';'));
    simdjson::dom::parser parser;
    const std::string token(std::string_view(parser.parse(started.body)["csrf"]));
    CHECK(test::call(port, "GET", "/v1/endpoints", {{"Cookie", session}, {"X-CSRF-Token", token}}).status == 200);
    REQUIRE(test::run_walhook({"tenant", "portal-logout", "--database-url", s.url, "--tenant", "acme"}, out) == 0);
    CHECK(out.find("1 portal sessions ended") != std::string::npos);
    CHECK(test::call(port, "GET", "/v1/endpoints", {{"Cookie", session}, {"X-CSRF-Token", token}}).status == 401);
  }
  CHECK(walhook.stop() == 0);
}
