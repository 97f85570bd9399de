// An endpoint's headers (relay/core/endpoint_policies.hpp): what is accepted, what is refused
// (names walhook or HTTP framing owns, bytes that could split a request), and that a reason
// never carries the value.

#include "relay/core/endpoint_policies.hpp"

#include <doctest/doctest.h>

using namespace walhook::relay;

TEST_CASE("parse_header: Name: value, blanks around the value dropped") {
  auto h = parse_header("X-Api-Key:   k-123 \t");
  REQUIRE(h.has_value());
  CHECK(h->first == "X-Api-Key");
  CHECK(h->second == "k-123");
  CHECK(parse_header("Authorization: Bearer a:b")->second == "Bearer a:b");
  CHECK(parse_header("X-Empty:")->second.empty());
}

TEST_CASE("parse_header: reserved names and unsafe bytes are refused, without the value") {
  for (const char* name : {"Host", "content-length", "Content-Type", "Transfer-Encoding", "Connection", "TE",
                           "Upgrade", "Expect", "User-Agent", "webhook-id", "Webhook-Signature", "walhook-tenant-id",
                           "Proxy-Authorization", "traceparent", "Content-Encoding", "Nats-Rollup",
                           "nats-expected-stream"}) {
    std::string why;
    INFO(name);
    CHECK_FALSE(parse_header(std::string(name) + ": secret-value", &why).has_value());
    CHECK(why.find(name) != std::string::npos);
    CHECK(why.find("secret-value") == std::string::npos);
  }
  std::string why;
  CHECK_FALSE(parse_header("X-A: secret\r\nX-B: c", &why).has_value());
  CHECK(why.find("control character") != std::string::npos);
  CHECK(why.find("secret") == std::string::npos);
  CHECK_FALSE(parse_header(std::string("X-A: a\0b", 8), &why).has_value());
  CHECK_FALSE(parse_header("X A: b", &why).has_value());
  CHECK_FALSE(parse_header("X-A : b", &why).has_value());
  CHECK_FALSE(parse_header(": b", &why).has_value());
  CHECK_FALSE(parse_header("no colon", &why).has_value());
  CHECK_FALSE(parse_header("X-Long: " + std::string(9000, 'a'), &why).has_value());
}

TEST_CASE("repeated_name: a name once across the headers and the secret headers") {
  const std::vector<header_field> plain{{"X-A", "1"}, {"Authorization", "Bearer a"}};
  const std::vector<header_field> secret{{"authorization", "Bearer b"}};
  CHECK(repeated_name({&plain, &secret}).value_or("") == "authorization");
  const std::vector<header_field> other{{"X-B", "2"}};
  CHECK_FALSE(repeated_name({&plain, &other}).has_value());
  std::string why;
  CHECK_FALSE(headers_from_items({"X-A: 1", "x-a: 2"}, &why).has_value());
  CHECK(why.find("twice") != std::string::npos);
}

TEST_CASE("headers_from_items: one bad item and none is used") {
  CHECK(headers_from_items({"X-A: 1", "X-B: 2"})->size() == 2);
  std::string why;
  CHECK_FALSE(headers_from_items({"X-A: 1", "Host: evil"}, &why).has_value());
  CHECK(why.find("Host") != std::string::npos);
}
