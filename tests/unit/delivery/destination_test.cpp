// Endpoint URLs pick the sink (delivery/destination.hpp): broker URLs, their templates, and the
// errors a person reads at `endpoint add`.

#include "delivery/destination.hpp"

#include <doctest/doctest.h>

using namespace walhook::delivery;

TEST_CASE("http URLs parse exactly as before") {
  auto d = parse_destination("https://hooks.example.com/a?b=1");
  REQUIRE(d.has_value());
  CHECK(d->kind == sink_kind::http);
  CHECK(d->http == *parse_url("https://hooks.example.com/a?b=1"));
  CHECK_FALSE(parse_destination("https://user:pw@hooks.example.com/").has_value());
  CHECK_FALSE(parse_destination("ftp://x/").has_value());
}

TEST_CASE("nats:// URLs: host, port, credentials, a subject template") {
  auto d = parse_destination("nats://127.0.0.1:4222/events.{event_type}");
  REQUIRE(d.has_value());
  CHECK(d->kind == sink_kind::nats);
  CHECK(d->broker.host == "127.0.0.1");
  CHECK(d->broker.port == "4222");
  CHECK(d->broker.subject == "events.{event_type}");
  CHECK_FALSE(d->broker.tls);

  auto t = parse_destination("NATS+TLS://Alice:s%40cret@Broker.Example/orders");
  REQUIRE(t.has_value());
  CHECK(t->broker.tls);
  CHECK(t->broker.host == "broker.example");
  CHECK(t->broker.port == "4222");
  CHECK(t->broker.user == "Alice");
  CHECK(t->broker.password == "s@cret");

  for (const char* bad : {"nats://127.0.0.1:4222/", "nats://127.0.0.1:4222", "nats://h/events.*", "nats://h/a..b",
                          "nats://h/events.>", "nats://h/x?y=1", "nats://h/{nope}", "nats://h/a{event_type",
                          "nats://h:0/x", "nats:///x"}) {
    INFO(bad);
    auto r = parse_destination(bad);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error() == transport_errc::invalid_url);
    CHECK_FALSE(r.error().detail().empty());
  }
  auto unknown = parse_destination("nats://h/ev.{tenant}");
  REQUIRE_FALSE(unknown.has_value());
  CHECK(unknown.error().detail().find("unknown placeholder {tenant}") != std::string::npos);
}

TEST_CASE("amqp:// URLs: vhost, exchange, routing key template, default guest") {
  auto d = parse_destination("amqp://guest:guest@127.0.0.1:5672/%2F?exchange=walhook&routing_key={event_type}");
  REQUIRE(d.has_value());
  CHECK(d->kind == sink_kind::amqp);
  CHECK(d->broker.vhost == "/");
  CHECK(d->broker.exchange == "walhook");
  CHECK(d->broker.subject == "{event_type}");
  CHECK(d->broker.user == "guest");

  auto s = parse_destination("amqps://rabbit.example/prod?routing_key=orders");
  REQUIRE(s.has_value());
  CHECK(s->broker.tls);
  CHECK(s->broker.port == "5671");
  CHECK(s->broker.vhost == "prod");
  CHECK(s->broker.exchange.empty());
  CHECK(s->broker.user == "guest");

  for (const char* bad : {"amqp://h/%2F?exchange=x", "amqp://h/a/b?routing_key=k", "amqp://h/?routing_key=k&color=red",
                          "amqp://h/?routing_key=k&routing_key=j", "amqp://h/?routing_key={x}"}) {
    INFO(bad);
    CHECK_FALSE(parse_destination(bad).has_value());
  }
}

TEST_CASE("templates render from the event, and refuse what they cannot build") {
  template_values v{"order.paid", "acme", std::string_view("o-7"), std::nullopt};
  CHECK(*render_template("events.{event_type}", v, true) == "events.order.paid");
  CHECK(*render_template("{tenant_id}.{aggregate_id}", v, true) == "acme.o-7");
  auto missing = render_template("agg.{aggregate_type}", v, true);
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().message.find("{aggregate_type}") != std::string::npos);
  template_values spaced{"order paid", "acme", std::nullopt, std::nullopt};
  CHECK_FALSE(render_template("events.{event_type}", spaced, true).has_value());
  // A routing key is not a subject: spaces are fine there, 255 bytes are not.
  CHECK(*render_template("{event_type}", spaced, false) == "order paid");
  std::string long_type(300, 'a');
  CHECK_FALSE(render_template("{event_type}", {long_type, "t", std::nullopt, std::nullopt}, false).has_value());
  CHECK(is_valid_subject("a.b.c"));
  CHECK_FALSE(is_valid_subject("a. b"));
  CHECK_FALSE(is_valid_subject(""));
}

TEST_CASE("credentials in a broker URL are never shown") {
  const auto shown = redact_url("amqp://guest:topsecret@rabbit.example:5672/%2F?exchange=x&routing_key=k");
  CHECK(shown.find("topsecret") == std::string::npos);
  CHECK(redact_url("nats://tok3n@nats.example/events").find("tok3n") == std::string::npos);
}

TEST_CASE("subjects and routing keys over 255 bytes are refused when the endpoint is made, not at every event") {
  const std::string long_name(300, 'a');
  auto nats = parse_destination("nats://h/" + long_name);
  REQUIRE_FALSE(nats.has_value());
  CHECK(nats.error().detail().find("255") != std::string::npos);
  CHECK_FALSE(parse_destination("amqp://h/?routing_key=" + long_name).has_value());
  // Placeholders count as what they will hold, not as their names.
  CHECK(parse_destination("nats://h/" + std::string(200, 'a') + ".{event_type}.{aggregate_type}").has_value());
}

TEST_CASE("a broker URL is shown with its subject, exchange and routing key, never its credentials") {
  CHECK(redact_url("nats://tok3n@nats.example:4222/events.{event_type}") == "nats://***@nats.example:4222/events.{event_type}");
  CHECK(redact_url("amqp://app:hunter2@rabbit.example/%2F?exchange=walhook&routing_key={event_type}") ==
        "amqp://***@rabbit.example:5672/%2F?exchange=walhook&routing_key={event_type}");
  // Unparsable broker URLs fall back to the conservative cut: nothing after the credentials' '@'.
  CHECK(redact_url("nats://user:pw@h/a b").find("pw") == std::string::npos);
}
