// Interpreting pgoutput rows of walhook's tables (relay/core/rows.hpp): text[] literals, endpoints
// (with unchanged-TOAST columns), outbox events and the webhook body built from them.

#include "relay/core/rows.hpp"

#include <doctest/doctest.h>
#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

using namespace walhook::relay;
namespace pgo = walhook::wal::pgoutput;

namespace {

using strings = std::vector<std::string>;

pgo::relation make_relation(std::string name, const std::vector<std::string>& columns) {
  pgo::relation rel;
  rel.oid = 16400;
  rel.schema = "walhook";
  rel.name = std::move(name);
  for (const auto& c : columns) rel.columns.push_back({0, c, 25, -1});
  return rel;
}

pgo::tuple_value text(std::string v) { return {pgo::value_kind::text, std::move(v)}; }
pgo::tuple_value null() { return {pgo::value_kind::null, {}}; }
pgo::tuple_value unchanged() { return {pgo::value_kind::unchanged_toast, {}}; }

std::string joined(const std::optional<strings>& v) {
  if (!v) return "<nullopt>";
  std::string out = "[";
  for (std::size_t i = 0; i < v->size(); ++i) {
    if (i) out += "|";
    out += (*v)[i];
  }
  return out + "]";
}

constexpr std::string_view secret_a = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";        // 24-byte key
constexpr std::string_view secret_b = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";  // 32-byte key

const pgo::relation endpoints_rel = make_relation(
    "endpoints", {"id", "tenant_id", "url", "secret", "event_types", "max_concurrency", "status", "ordering"});

pgo::tuple endpoint_tuple(std::string id = "7", std::string url = "https://hooks.example.com/in?x=1",
                          pgo::tuple_value event_types = null()) {
  return {text(std::move(id)), text("tenant-1"), text(std::move(url)), text(std::string(secret_a)),
          std::move(event_types), text("6"), text("active"), text("none")};
}

const pgo::relation outbox_rel = make_relation(
    "outbox", {"seq", "id", "tenant_id", "event_type", "aggregate_id", "merge_key", "payload", "created_at"});

const std::string event_id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

pgo::tuple outbox_tuple() {
  return {text("42"),          text(event_id),
          text("tenant-1"),    text("order.paid"),
          text("order-17"),    text("order-17:status"),
          text(R"({"amount": 42, "currency": "EUR"})"), text("2026-11-30 03:23:51.123456+00")};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// parse_text_array

TEST_CASE("parse_text_array: PostgreSQL's text[] output") {
  CHECK(joined(parse_text_array("{}")) == "[]");
  CHECK(joined(parse_text_array("{a}")) == "[a]");
  CHECK(joined(parse_text_array("{order.created,order.paid}")) == "[order.created|order.paid]");
  CHECK(joined(parse_text_array(R"({"a b",c})")) == "[a b|c]");
  CHECK(joined(parse_text_array(R"({"a,b","{x}"})")) == "[a,b|{x}]");
  CHECK(joined(parse_text_array(R"({"say \"hi\"","back\\slash"})")) == R"([say "hi"|back\slash])");
  CHECK(joined(parse_text_array(R"({"\\"})")) == R"([\])");
  CHECK(joined(parse_text_array(R"({""})")) == "[]" + std::string{});  // one empty string...
  CHECK(parse_text_array(R"({""})")->size() == 1);                     // ...not an empty array
  CHECK(joined(parse_text_array(R"({"",""})")) == "[|]");
  CHECK(joined(parse_text_array("{ünïcode,日本}")) == "[ünïcode|日本]");
}

TEST_CASE("parse_text_array: NULL elements are skipped; a quoted \"NULL\" is a string") {
  CHECK(joined(parse_text_array("{NULL}")) == "[]");
  CHECK(joined(parse_text_array("{a,NULL,b}")) == "[a|b]");
  CHECK(joined(parse_text_array(R"({"NULL",NULL})")) == "[NULL]");
  CHECK(joined(parse_text_array("{NULLS,xNULL}")) == "[NULLS|xNULL]");
}

TEST_CASE("parse_text_array: malformed literals are nullopt") {
  for (std::string_view bad : {"", "{", "}", "a", "a,b", "{a", "a}", "[1:1]={a}", "{a,}", "{,}", "{,a}",
                               "{a,,b}", R"({"a})", R"({"a\"})", R"({"a"b})", R"({"a""b"})", R"({a"b})",
                               R"({"a",})", "{{a},{b}}", "{{a}}", "{a{b}", "{a}b}", "{}}"}) {
    CAPTURE(bad);
    CHECK(joined(parse_text_array(bad)) == "<nullopt>");
  }
}

// ---------------------------------------------------------------------------------------------
// row_view

TEST_CASE("row_view: column states by name") {
  const auto rel = make_relation("t", {"a", "b", "c", "d", "e"});
  const pgo::tuple tuple{text("x"), null(), unchanged(), {pgo::value_kind::binary, std::string("\x01\x02", 2)}};
  row_view row(rel, tuple);
  std::string_view v;
  CHECK(row.get("a", v) == row_view::state::value);
  CHECK(v == "x");
  CHECK(row.get("b", v) == row_view::state::null);
  CHECK(row.get("c", v) == row_view::state::unchanged);
  CHECK(row.get("d", v) == row_view::state::value);
  CHECK(v == std::string_view("\x01\x02", 2));
  CHECK(row.get("e", v) == row_view::state::absent);  // tuple shorter than the relation
  CHECK(row.get("zzz", v) == row_view::state::absent);
  CHECK(row.text("a") == "x");
  CHECK_FALSE(row.text("b"));
  CHECK_FALSE(row.text("c"));
  CHECK_FALSE(row.text("e"));
  CHECK_FALSE(row.text("zzz"));
}

// ---------------------------------------------------------------------------------------------
// endpoint_from_row

TEST_CASE("endpoint_from_row: an inserted row") {
  const auto tuple = endpoint_tuple();
  auto e = endpoint_from_row(row_view(endpoints_rel, tuple), nullptr);
  REQUIRE(e.has_value());
  CHECK(e->id == 7);
  CHECK(e->tenant_id == "tenant-1");
  CHECK(e->url == "https://hooks.example.com/in?x=1");
  CHECK(e->secret == secret_a);
  CHECK(e->config_error.empty());
  REQUIRE(e->target);
  CHECK(e->target->http.tls);
  CHECK(e->target->http.host == "hooks.example.com");
  CHECK(e->target->http.port == "443");
  CHECK(e->target->http.target == "/in?x=1");
  REQUIRE(e->keys.size() == 1);
  CHECK(e->keys[0].bytes.size() == 24);
  CHECK(e->max_concurrency == 6);
  CHECK(e->status == endpoint_status::active);
  CHECK_FALSE(e->aggregate_ordering);
}

TEST_CASE("endpoint_from_row: only an inbox destination's target may reach private networks") {
  CHECK_FALSE(endpoint_from_row(row_view(endpoints_rel, endpoint_tuple("7", "http://10.0.0.5/in")), nullptr)
                  ->target->http.private_network_allowed);
  for (const char* tenant : {"inbox:shop", "inbox:", "INBOX:shop", "shop:inbox:", "acme"}) {
    CAPTURE(tenant);
    for (const char* url : {"http://10.0.0.5/in", "nats://10.0.0.5:4222/orders", "amqp://10.0.0.5/?routing_key=k"}) {
      CAPTURE(url);
      auto t = endpoint_tuple("7", url);
      t[1] = text(tenant);
      auto e = endpoint_from_row(row_view(endpoints_rel, t), nullptr);
      REQUIRE(e->target);
      const bool own = std::string_view(tenant) == "inbox:shop";
      CHECK(e->target->http.private_network_allowed == (own && e->target->kind == walhook::delivery::sink_kind::http));
      CHECK(e->target->broker.private_network_allowed == (own && e->target->kind != walhook::delivery::sink_kind::http));
    }
  }
}

TEST_CASE("endpoint_from_row: NULL event_types subscribes to all; a list to those only") {
  const auto all_tuple = endpoint_tuple("1", "https://a.example/", null());
  auto all = endpoint_from_row(row_view(endpoints_rel, all_tuple), nullptr);
  REQUIRE(all.has_value());
  CHECK_FALSE(all->event_types);
  CHECK(all->subscribed("order.paid"));
  CHECK(all->subscribed(""));

  const auto some_tuple = endpoint_tuple("1", "https://a.example/", text("{order.paid,\"user signed up\"}"));
  auto some = endpoint_from_row(row_view(endpoints_rel, some_tuple), nullptr);
  REQUIRE(some.has_value());
  CHECK(joined(some->event_types) == "[order.paid|user signed up]");
  CHECK(some->subscribed("order.paid"));
  CHECK(some->subscribed("user signed up"));
  CHECK_FALSE(some->subscribed("order.created"));
  CHECK_FALSE(some->subscribed("order"));

  const auto none_tuple = endpoint_tuple("1", "https://a.example/", text("{}"));
  auto none = endpoint_from_row(row_view(endpoints_rel, none_tuple), nullptr);
  REQUIRE(none.has_value());
  REQUIRE(none->event_types);
  CHECK_FALSE(none->subscribed("order.paid"));

  // An unparseable list subscribes to nothing rather than to everything.
  const auto bad_tuple = endpoint_tuple("1", "https://a.example/", text("{\"broken"));
  auto bad = endpoint_from_row(row_view(endpoints_rel, bad_tuple), nullptr);
  REQUIRE(bad.has_value());
  REQUIRE(bad->event_types);
  CHECK_FALSE(bad->subscribed("order.paid"));
}

TEST_CASE("endpoint_from_row: max_concurrency, status and ordering") {
  struct row_case {
    const char* max_concurrency;
    int expected;
  };
  for (auto c : {row_case{"1", 1}, row_case{"64", 64}, row_case{"0", 1}, row_case{"-3", 1}, row_case{"abc", 4}}) {
    CAPTURE(c.max_concurrency);
    auto tuple = endpoint_tuple();
    tuple[5] = text(c.max_concurrency);
    auto e = endpoint_from_row(row_view(endpoints_rel, tuple), nullptr);
    REQUIRE(e.has_value());
    CHECK(e->max_concurrency == c.expected);
  }
  {
    auto tuple = endpoint_tuple();
    tuple[5] = null();
    auto e = endpoint_from_row(row_view(endpoints_rel, tuple), nullptr);
    REQUIRE(e.has_value());
    CHECK(e->max_concurrency == 4);
  }
  for (auto [status, expected] : {std::pair{"active", endpoint_status::active},
                                  std::pair{"disabled", endpoint_status::disabled},
                                  std::pair{"paused", endpoint_status::paused},
                                  std::pair{"something-else", endpoint_status::active}}) {
    CAPTURE(status);
    auto tuple = endpoint_tuple();
    tuple[6] = text(status);
    auto e = endpoint_from_row(row_view(endpoints_rel, tuple), nullptr);
    REQUIRE(e.has_value());
    CHECK(e->status == expected);
  }
  auto tuple = endpoint_tuple();
  tuple[7] = text("aggregate");
  auto ordered = endpoint_from_row(row_view(endpoints_rel, tuple), nullptr);
  REQUIRE(ordered.has_value());
  CHECK(ordered->aggregate_ordering);
  tuple[7] = null();
  auto unordered = endpoint_from_row(row_view(endpoints_rel, tuple), nullptr);
  REQUIRE(unordered.has_value());
  CHECK_FALSE(unordered->aggregate_ordering);
  CHECK(to_string(endpoint_status::active) == "active");
  CHECK(to_string(endpoint_status::paused) == "paused");
  CHECK(to_string(endpoint_status::disabled) == "disabled");
}

TEST_CASE("endpoint_from_row: unchanged-TOAST columns keep the previous value") {
  const auto insert = endpoint_tuple("7", "https://hooks.example.com/in", text("{order.paid}"));
  auto before = endpoint_from_row(row_view(endpoints_rel, insert), nullptr);
  REQUIRE(before.has_value());
  const row_view old_view(endpoints_rel, insert);

  // UPDATE endpoints SET max_concurrency = 2: the big TOASTed columns come as 'u'.
  const pgo::tuple update{text("7"), text("tenant-1"), unchanged(), unchanged(), unchanged(),
                          text("2"),  text("active"),  text("none")};
  auto after = endpoint_from_row(row_view(endpoints_rel, update), &*before);
  REQUIRE(after.has_value());
  CHECK(after->max_concurrency == 2);
  CHECK(after->url == "https://hooks.example.com/in");
  CHECK(after->secret == secret_a);
  REQUIRE(after->keys.size() == 1);
  CHECK(after->keys == before->keys);
  CHECK(after->target == before->target);
  CHECK(joined(after->event_types) == "[order.paid]");
  CHECK(after->config_error.empty());

  // The same update without a cached row: no value is made up — the row is refused, saying why.
  std::string why;
  auto orphan = endpoint_from_row(row_view(endpoints_rel, update), nullptr, nullptr, &why);
  CHECK_FALSE(orphan.has_value());
  CHECK(why.find("unchanged") != std::string::npos);

  // With the old tuple (REPLICA IDENTITY FULL), unchanged columns come from it, cache or not.
  auto from_old = endpoint_from_row(row_view(endpoints_rel, update), nullptr, &old_view);
  REQUIRE(from_old.has_value());
  CHECK(from_old->url == "https://hooks.example.com/in");
  CHECK(from_old->secret == secret_a);
  CHECK(from_old->keys == before->keys);
  CHECK(joined(from_old->event_types) == "[order.paid]");
  CHECK(from_old->max_concurrency == 2);  // the new tuple's value wins where it has one
  CHECK(from_old->config_error.empty());

  // An explicit NULL is not "unchanged": event_types NULL means all types again.
  pgo::tuple to_all = update;
  to_all[4] = null();
  auto all = endpoint_from_row(row_view(endpoints_rel, to_all), &*before);
  REQUIRE(all.has_value());
  CHECK_FALSE(all->event_types);
}

TEST_CASE("endpoint_from_row: columns missing from the relation keep the previous value") {
  const auto insert = endpoint_tuple("7", "https://hooks.example.com/in", text("{a}"));
  auto before = endpoint_from_row(row_view(endpoints_rel, insert), nullptr);
  REQUIRE(before.has_value());
  const auto narrow = make_relation("endpoints", {"id", "status"});
  const pgo::tuple row{text("7"), text("disabled")};
  auto after = endpoint_from_row(row_view(narrow, row), &*before);
  REQUIRE(after.has_value());
  CHECK(after->status == endpoint_status::disabled);
  CHECK(after->url == before->url);
  CHECK(after->max_concurrency == 6);
  CHECK(joined(after->event_types) == "[a]");
}

TEST_CASE("endpoint_from_row: an invalid URL or secret keeps the endpoint with a config_error") {
  {
    const auto tuple = endpoint_tuple("7", "ftp://files.example.com/");
    auto e = endpoint_from_row(row_view(endpoints_rel, tuple), nullptr);
    REQUIRE(e.has_value());
    CHECK(e->id == 7);
    CHECK_FALSE(e->target);
    CHECK(e->config_error.find("URL") != std::string::npos);
    CHECK(e->config_error.find("ftp://files.example.com/") != std::string::npos);
  }
  for (std::string_view bad_secret : {"", "nope", "whsec_", "whsec_c2hvcnQ=", "whsec_!!!!", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}) {
    CAPTURE(bad_secret);
    auto tuple = endpoint_tuple();
    tuple[3] = text(std::string(bad_secret));
    auto e = endpoint_from_row(row_view(endpoints_rel, tuple), nullptr);
    REQUIRE(e.has_value());
    CHECK(e->target);
    CHECK(e->keys.empty());
    CHECK(e->config_error.find("secret") != std::string::npos);
    // The secret itself never appears in the reason (it could end up in logs).
    if (bad_secret.size() > 6) CHECK(e->config_error.find(bad_secret) == std::string::npos);
  }
  {
    auto tuple = endpoint_tuple();
    tuple[2] = null();
    auto e = endpoint_from_row(row_view(endpoints_rel, tuple), nullptr);
    REQUIRE(e.has_value());
    CHECK_FALSE(e->config_error.empty());
  }
}

TEST_CASE("endpoint_from_row: fixing the URL or secret clears the config_error") {
  const auto broken_tuple = endpoint_tuple("7", "not a url");
  auto broken = endpoint_from_row(row_view(endpoints_rel, broken_tuple), nullptr);
  REQUIRE(broken.has_value());
  REQUIRE_FALSE(broken->config_error.empty());
  const pgo::tuple fix{text("7"), text("tenant-1"), text("http://hooks.example.com:8080/x"), unchanged(),
                       unchanged(), text("4"), text("active"), text("none")};
  auto fixed = endpoint_from_row(row_view(endpoints_rel, fix), &*broken);
  REQUIRE(fixed.has_value());
  CHECK(fixed->config_error.empty());
  REQUIRE(fixed->target);
  CHECK_FALSE(fixed->target->http.tls);
  CHECK(fixed->target->http.port == "8080");
  CHECK(fixed->keys.size() == 1);
}

TEST_CASE("endpoint_from_row: secret rotation (two space-separated secrets) gives two keys") {
  auto tuple = endpoint_tuple();
  tuple[3] = text(std::string(secret_a) + " " + std::string(secret_b));
  auto e = endpoint_from_row(row_view(endpoints_rel, tuple), nullptr);
  REQUIRE(e.has_value());
  CHECK(e->config_error.empty());
  REQUIRE(e->keys.size() == 2);
  CHECK(e->keys[0].bytes.size() == 24);
  CHECK(e->keys[1].bytes.size() == 32);
}

TEST_CASE("endpoint_from_row: a row without a usable id is an error") {
  for (auto id : {null(), unchanged(), text(""), text("abc"), text("7x"), text("99999999999999999999")}) {
    CAPTURE(id.data);
    auto tuple = endpoint_tuple();
    tuple[0] = id;
    CHECK_FALSE(endpoint_from_row(row_view(endpoints_rel, tuple), nullptr).has_value());
  }
  const auto no_id = make_relation("endpoints", {"tenant_id", "url"});
  const pgo::tuple row{text("t"), text("https://a.example/")};
  CHECK_FALSE(endpoint_from_row(row_view(no_id, row), nullptr).has_value());
  auto big = endpoint_tuple("9223372036854775807");
  auto e = endpoint_from_row(row_view(endpoints_rel, big), nullptr);
  REQUIRE(e.has_value());
  CHECK(e->id == 9223372036854775807LL);
}

// ---------------------------------------------------------------------------------------------
// event_from_row

TEST_CASE("event_from_row: builds the event and the body {\"id\",\"type\",\"timestamp\",\"data\"} exactly") {
  const auto tuple = outbox_tuple();
  std::string why;
  auto ev = event_from_row(row_view(outbox_rel, tuple), walhook::lsn{0x16B374D848}, why);
  REQUIRE(ev.has_value());
  CHECK(why.empty());
  CHECK(ev->id == event_id);
  CHECK(ev->tenant_id == "tenant-1");
  CHECK(ev->type == "order.paid");
  CHECK(ev->aggregate_id == "order-17");
  CHECK(ev->merge_key == "order-17:status");
  CHECK(ev->payload == R"({"amount": 42, "currency": "EUR"})");
  CHECK(ev->created_at == "2026-11-30T03:23:51.123456Z");
  CHECK(ev->commit_lsn == walhook::lsn{0x16B374D848});
  CHECK(ev->body == R"({"id":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","type":"order.paid",)"
                    R"("timestamp":"2026-11-30T03:23:51.123456Z","data":{"amount": 42, "currency": "EUR"}})");

  // And it is JSON whose fields read back.
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  REQUIRE(parser.parse(ev->body).get(doc) == simdjson::SUCCESS);
  std::string_view id, type, timestamp;
  std::int64_t amount = 0;
  REQUIRE(doc["id"].get(id) == simdjson::SUCCESS);
  REQUIRE(doc["type"].get(type) == simdjson::SUCCESS);
  REQUIRE(doc["timestamp"].get(timestamp) == simdjson::SUCCESS);
  REQUIRE(doc["data"]["amount"].get(amount) == simdjson::SUCCESS);
  CHECK(id == event_id);
  CHECK(type == "order.paid");
  CHECK(timestamp == "2026-11-30T03:23:51.123456Z");
  CHECK(amount == 42);
}

TEST_CASE("event_from_row: created_at is converted to ISO 8601 UTC") {
  struct conversion {
    const char* pg;
    const char* iso;
  };
  for (auto c : {conversion{"2026-11-30 03:23:51+00", "2026-11-30T03:23:51.000000Z"},
                 conversion{"2026-11-30 03:23:51.5+00", "2026-11-30T03:23:51.500000Z"},
                 conversion{"2026-11-30 03:23:51.123456+05:30", "2026-11-29T21:53:51.123456Z"},
                 conversion{"2026-11-30 20:00:00-08", "2026-12-01T04:00:00.000000Z"},
                 conversion{"2024-02-29 23:59:59.999999-00:00:01", "2024-03-01T00:00:00.999999Z"}}) {
    CAPTURE(c.pg);
    auto tuple = outbox_tuple();
    tuple[7] = text(c.pg);
    std::string why;
    auto ev = event_from_row(row_view(outbox_rel, tuple), walhook::lsn{1}, why);
    REQUIRE(ev.has_value());
    CHECK(ev->created_at == c.iso);
    CHECK(ev->body.find(std::string("\"timestamp\":\"") + c.iso + "\"") != std::string::npos);
  }
}

TEST_CASE("event_from_row: a missing created_at is stamped with the current time in ISO 8601") {
  for (auto created : {null(), unchanged()}) {
    auto tuple = outbox_tuple();
    tuple[7] = created;
    std::string why;
    auto ev = event_from_row(row_view(outbox_rel, tuple), walhook::lsn{1}, why);
    REQUIRE(ev.has_value());
    CHECK(ev->created_at.size() == 27);
    CHECK(ev->created_at[10] == 'T');
    CHECK(ev->created_at.back() == 'Z');
  }
}

TEST_CASE("event_from_row: NULL aggregate_id and merge_key are absent, not empty") {
  auto tuple = outbox_tuple();
  tuple[4] = null();
  tuple[5] = null();
  std::string why;
  auto ev = event_from_row(row_view(outbox_rel, tuple), walhook::lsn{1}, why);
  REQUIRE(ev.has_value());
  CHECK_FALSE(ev->aggregate_id);
  CHECK_FALSE(ev->merge_key);
  // An empty string is a value.
  tuple[5] = text("");
  auto ev2 = event_from_row(row_view(outbox_rel, tuple), walhook::lsn{1}, why);
  REQUIRE(ev2.has_value());
  REQUIRE(ev2->merge_key);
  CHECK(ev2->merge_key->empty());
}

TEST_CASE("event_from_row: strings in the body are JSON-escaped; the payload is embedded unchanged") {
  auto tuple = outbox_tuple();
  tuple[3] = text("type \"quoted\" \\ back\nslash");
  tuple[6] = text(R"([1, "two", {"3": null}])");
  std::string why;
  auto ev = event_from_row(row_view(outbox_rel, tuple), walhook::lsn{1}, why);
  REQUIRE(ev.has_value());
  CHECK(ev->body == R"({"id":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","type":"type \"quoted\" \\ back\nslash",)"
                    R"("timestamp":"2026-11-30T03:23:51.123456Z","data":[1, "two", {"3": null}]})");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  REQUIRE(parser.parse(ev->body).get(doc) == simdjson::SUCCESS);
  std::string_view type;
  REQUIRE(doc["type"].get(type) == simdjson::SUCCESS);
  CHECK(type == "type \"quoted\" \\ back\nslash");
}

TEST_CASE("event_from_row: missing required columns are errors with a reason") {
  struct missing {
    std::size_t column;
    pgo::tuple_value value;
    const char* reason;
  };
  for (const auto& m : {missing{1, null(), "id"}, missing{1, text(""), "id"}, missing{2, null(), "tenant_id"},
                        missing{3, null(), "event_type"}, missing{6, null(), "payload"},
                        missing{6, unchanged(), "payload"}}) {
    CAPTURE(m.reason);
    auto tuple = outbox_tuple();
    tuple[m.column] = m.value;
    std::string why;
    auto ev = event_from_row(row_view(outbox_rel, tuple), walhook::lsn{1}, why);
    CHECK_FALSE(ev.has_value());
    CHECK(why.find(m.reason) != std::string::npos);
  }
  // Columns absent from the Relation message altogether.
  const auto bare = make_relation("outbox", {"id", "tenant_id"});
  const pgo::tuple row{text(event_id), text("t")};
  std::string why;
  CHECK_FALSE(event_from_row(row_view(bare, row), walhook::lsn{1}, why).has_value());
  CHECK(why.find("event_type") != std::string::npos);
}

TEST_CASE("event_from_row: a created_at that cannot be rendered comes back as PostgreSQL printed it, with the reason") {
  for (const char* bad : {"yesterday", "infinity", "-infinity", "10000-01-01 00:00:00+00", "0001-01-01 00:00:00+00 BC",
                          "2026-13-30 03:23:51+00", "2026-11-30 03:23:51"}) {
    CAPTURE(bad);
    auto tuple = outbox_tuple();
    tuple[7] = text(bad);
    std::string why;
    auto ev = event_from_row(row_view(outbox_rel, tuple), walhook::lsn{1}, why);
    REQUIRE(ev.has_value());  // its deliveries are recorded dead, not skipped
    CHECK(ev->created_at == bad);
    CHECK(ev->body.empty());
    CHECK(why.find("created_at") != std::string::npos);
    CHECK(why.find(bad) != std::string::npos);
  }
}

TEST_CASE("event_from_row: an empty tenant or type string is still a value") {
  auto tuple = outbox_tuple();
  tuple[2] = text("");
  std::string why;
  auto ev = event_from_row(row_view(outbox_rel, tuple), walhook::lsn{1}, why);
  REQUIRE(ev.has_value());
  CHECK(ev->tenant_id.empty());
}

TEST_CASE("event_from_row: outbox.endpoint_id is the direct route; absent (an older Relation) or NULL is none") {
  auto columns = std::vector<std::string>{"id", "tenant_id", "event_type", "payload", "created_at", "endpoint_id"};
  const auto rel = make_relation("outbox", columns);
  const auto old_rel = make_relation("outbox", {"id", "tenant_id", "event_type", "payload", "created_at"});
  auto tuple = [&](pgo::tuple_value endpoint) {
    return pgo::tuple{text(event_id), text("t"), text("walhook.endpoint.failing"), text("{}"),
                      text("2026-11-30 03:23:51+00"), std::move(endpoint)};
  };
  std::string why;
  auto direct = tuple(text("42"));
  auto ev = event_from_row(row_view(rel, direct), walhook::lsn{}, why);
  REQUIRE(ev.has_value());
  CHECK(ev->endpoint_id == 42);
  auto none = tuple(null());
  ev = event_from_row(row_view(rel, none), walhook::lsn{}, why);
  REQUIRE(ev.has_value());
  CHECK_FALSE(ev->endpoint_id);
  pgo::tuple older{text(event_id), text("t"), text("x"), text("{}"), text("2026-11-30 03:23:51+00")};
  ev = event_from_row(row_view(old_rel, older), walhook::lsn{}, why);
  REQUIRE(ev.has_value());
  CHECK_FALSE(ev->endpoint_id);
  auto bad = tuple(text("4x"));
  CHECK_FALSE(event_from_row(row_view(rel, bad), walhook::lsn{}, why).has_value());
  CHECK(why.find("endpoint_id") != std::string::npos);
}

TEST_CASE("endpoint_from_row: contact_endpoint_id") {
  auto columns = std::vector<std::string>{"id", "tenant_id", "url", "secret", "contact_endpoint_id"};
  const auto rel = make_relation("endpoints", columns);
  pgo::tuple with{text("7"), text("t"), text("https://h.example/"), text(std::string(secret_a)), text("9")};
  auto e = endpoint_from_row(row_view(rel, with), nullptr);
  REQUIRE(e.has_value());
  CHECK(e->contact_endpoint_id == 9);
  pgo::tuple cleared{text("7"), text("t"), text("https://h.example/"), text(std::string(secret_a)), null()};
  e = endpoint_from_row(row_view(rel, cleared), &*e);
  REQUIRE(e.has_value());
  CHECK_FALSE(e->contact_endpoint_id);
}

TEST_CASE("event_from_row: walhook.* types and merge keys count only on rows walhook wrote (by_walhook)") {
  const auto rel = make_relation("outbox", {"id", "tenant_id", "event_type", "payload", "merge_key", "by_walhook", "stored_at"});
  auto row = [&](std::string type, pgo::tuple_value merge_key, pgo::tuple_value by_walhook) {
    return pgo::tuple{text(event_id), text("t"), text(std::move(type)), text("{}"), std::move(merge_key),
                      std::move(by_walhook), text("2026-12-02 10:00:00+00")};
  };
  struct row_case {
    const char* name;
    pgo::tuple tuple;
    bool refused;
  };
  const row_case cases[] = {
      {"walhook's own notification", row("walhook.endpoint.failing", text("walhook.endpoint:1"), text("t")), false},
      {"read back with ::text", row("walhook.endpoint.failing", null(), text("true")), false},
      {"a forged type", row("walhook.endpoint.disabled", null(), text("f")), true},
      {"a forged type, other case", row("WalHook.Endpoint.Disabled", null(), text("f")), true},
      {"a forged merge key", row("order.paid", text("walhook.endpoint:1"), text("f")), true},
      {"a row of before migration 8 (NULL)", row("walhook.x", null(), null()), true},
      {"an ordinary event", row("order.paid", text("order:1"), text("f")), false},
      {"walhook in the middle", row("order.walhook.paid", text("x.walhook.y"), text("f")), false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    std::string why;
    auto ev = event_from_row(row_view(rel, c.tuple), walhook::lsn{}, why);
    REQUIRE(ev.has_value());  // never dropped: a refused row's deliveries end dead with the reason
    CHECK((why.find("reserved") != std::string::npos) == c.refused);
    CHECK(ev->stored_at == "2026-12-02 10:00:00+00");
  }
}

TEST_CASE("endpoint::exists_for: an event committed before the endpoint's creating transaction is not its") {
  auto columns = std::vector<std::string>{"id", "tenant_id", "url", "secret", "created_snapshot"};
  const auto rel = make_relation("endpoints", columns);
  pgo::tuple with{text("7"), text("t"), text("https://h.example/"), text(std::string(secret_a)), text("1000:1005:1002")};
  auto e = endpoint_from_row(row_view(rel, with), nullptr);
  REQUIRE(e.has_value());
  REQUIRE(e->created_snapshot.has_value());
  CHECK_FALSE(e->exists_for(999));   // committed before: visible in the snapshot
  CHECK_FALSE(e->exists_for(1001));  // below xmax, not in progress: committed before
  CHECK(e->exists_for(1002));        // in progress when it was created: may commit after
  CHECK(e->exists_for(1005));        // started after
  CHECK(e->exists_for(0));           // unknown: routed
  pgo::tuple older{text("7"), text("t"), text("https://h.example/"), text(std::string(secret_a)), null()};
  e = endpoint_from_row(row_view(rel, older), nullptr);
  REQUIRE(e.has_value());
  CHECK(e->exists_for(999));  // created before migration 8: every event of its subscription
}

TEST_CASE("event_from_row: aggregate_type (migration 009); absent from an older Relation or NULL is none") {
  const auto rel = make_relation("outbox", {"id", "tenant_id", "event_type", "payload", "aggregate_id", "aggregate_type"});
  pgo::tuple with{text(event_id), text("t"), text("order.created"), text("{}"), text("7"), text("order")};
  std::string why;
  auto ev = event_from_row(row_view(rel, with), walhook::lsn{}, why);
  REQUIRE(ev.has_value());
  CHECK(why.empty());
  CHECK(ev->aggregate_type == "order");
  CHECK(ev->aggregate_id == "7");
  pgo::tuple without{text(event_id), text("t"), text("order.created"), text("{}"), text("7"), null()};
  ev = event_from_row(row_view(rel, without), walhook::lsn{}, why);
  REQUIRE(ev.has_value());
  CHECK_FALSE(ev->aggregate_type);
  const auto old_rel = make_relation("outbox", {"id", "tenant_id", "event_type", "payload"});
  pgo::tuple older{text(event_id), text("t"), text("order.created"), text("{}")};
  ev = event_from_row(row_view(old_rel, older), walhook::lsn{}, why);
  REQUIRE(ev.has_value());
  CHECK_FALSE(ev->aggregate_type);
}

TEST_CASE("event_from_row: a row an outbox bridge could not map (rejected) ends dead with its reason, whatever else") {
  const auto rel = make_relation("outbox", {"id", "tenant_id", "event_type", "payload", "created_at", "rejected"});
  auto row = [&](std::string created_at, pgo::tuple_value rejected) {
    return pgo::tuple{text(event_id), text("t"), text("order.paid"), text(R"({"source":"app.outbox","id":"42"})"),
                      text(std::move(created_at)), std::move(rejected)};
  };
  std::string why;
  auto fits = row("2026-12-02 10:00:00+00", null());
  auto ev = event_from_row(row_view(rel, fits), walhook::lsn{}, why);
  REQUIRE(ev.has_value());
  CHECK(why.empty());
  auto rejected = row("2026-12-02 10:00:00+00", text("app.outbox row 42: the payload is not JSON (invalid input syntax)"));
  ev = event_from_row(row_view(rel, rejected), walhook::lsn{}, why);
  REQUIRE(ev.has_value());  // never dropped: its deliveries are recorded dead
  CHECK(why == "the outbox bridge could not map app.outbox row 42: the payload is not JSON (invalid input syntax)");
  // Its reason wins over a created_at that cannot be rendered.
  auto both = row("infinity", text("app.outbox row 43: the event type is NULL"));
  ev = event_from_row(row_view(rel, both), walhook::lsn{}, why);
  REQUIRE(ev.has_value());
  CHECK(why == "the outbox bridge could not map app.outbox row 43: the event type is NULL");
}

TEST_CASE("resolve_endpoint: the proxy column sets the target's egress; OAuth2 settings make a client, or a config_error") {
  auto resolved = [](std::string url, endpoint::policy_columns p) {
    endpoint e;
    e.id = 1;
    e.tenant_id = "t";
    e.url = std::move(url);
    e.secret = walhook::delivery::generate_secret();
    e.policies = std::move(p);
    resolve_endpoint(e);
    return e;
  };
  auto proxy = [](std::string v) {
    endpoint::policy_columns p;
    p.proxy = std::move(v);
    return p;
  };
  auto e = resolved("https://hooks.example/in", proxy("direct"));
  CHECK(e.config_error.empty());
  CHECK(e.target->http.egress == walhook::delivery::egress_route::direct);
  e = resolved("https://hooks.example/in", proxy("http://proxy.internal:3128"));
  CHECK(e.target->http.egress == walhook::delivery::egress_route::proxy);
  CHECK(e.target->http.proxy == walhook::delivery::http_proxy{"proxy.internal", "3128"});
  CHECK(resolved("https://hooks.example/in", endpoint::policy_columns()).target->http.egress == walhook::delivery::egress_route::client);
  CHECK(resolved("https://hooks.example/in", proxy("socks5://p:1")).config_error.find("invalid endpoint proxy") == 0);
  CHECK(resolved("nats://127.0.0.1:4222/ev", proxy("direct")).config_error ==
        "invalid endpoint proxy: a proxy is for http(s) endpoints only");

  endpoint::policy_columns oauth = proxy("direct");
  oauth.oauth_token_url = "https://auth.example/token";
  oauth.oauth_client_id = "c";
  oauth.oauth_client_secret = "s";
  oauth.oauth_scope = "a b";
  e = resolved("https://hooks.example/in", oauth);
  REQUIRE(e.oauth.has_value());
  CHECK(e.config_error.empty());
  CHECK(e.oauth->token_target.host == "auth.example");
  CHECK(e.oauth->token_target.egress == walhook::delivery::egress_route::direct);  // the token leaves as the attempts do
  CHECK(e.oauth->scope == "a b");
  auto half = oauth;
  half.oauth_client_secret.reset();
  CHECK(resolved("https://hooks.example/in", half).config_error ==
        "invalid endpoint OAuth2 settings: a token URL, a client id and a client secret go together");
  CHECK_FALSE(resolved("https://hooks.example/in", half).oauth.has_value());
  auto with_header = oauth;
  with_header.secret_headers = "{\"AUTHORIZATION: Bearer x\"}";
  CHECK(resolved("https://hooks.example/in", with_header).config_error ==
        "invalid endpoint OAuth2 settings: the endpoint also sets an Authorization header");
  auto bad_url = oauth;
  bad_url.oauth_token_url = "file:///etc/passwd";
  CHECK(resolved("https://hooks.example/in", bad_url).config_error.find("invalid endpoint OAuth2 token URL") == 0);
}
