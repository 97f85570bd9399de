// Issue 9 #8: an endpoint URL that does not work must not carry its credentials (or its size)
// into the texts walhook logs and stores: config_error (logged as endpoint.invalid and
// delivery.dead) and the dead record's last_error.

#include "delivery/signing.hpp"
#include "relay/core/decisions.hpp"

#include <doctest/doctest.h>

#include <memory>
#include <string>

using namespace walhook;
using namespace walhook::relay;
using namespace std::chrono_literals;

namespace {

const std::string secret = "s3cretpassw0rd";

endpoint endpoint_with_url(std::string url) {
  endpoint e;
  e.id = 1;
  e.tenant_id = "t";
  e.url = std::move(url);
  e.secret = delivery::generate_secret();
  resolve_endpoint(e);
  return e;
}

}  // namespace

TEST_CASE("an invalid endpoint URL's error texts contain no secret and stay small") {
  const std::string urls[] = {
      "https://admin:" + secret + "@hooks.example.com/in",                   // userinfo is refused
      "gopher://hooks.example.com/in?token=" + secret,                        // scheme is refused
      "https://admin:" + secret + "@hooks.example.com/in?token=" + secret,
      "https://hooks example.com/in?token=" + secret,                         // Boost.URL cannot parse it
      "https://admin:" + secret + "@" + std::string(100 * 1024, 'h') + "/?token=" + secret,  // 100 KB
  };
  for (const auto& url : urls) {
    CAPTURE(url.substr(0, 60));
    const auto e = endpoint_with_url(url);
    REQUIRE_FALSE(e.config_error.empty());
    CHECK(e.config_error.starts_with("invalid endpoint URL: "));
    CHECK(e.config_error.find(secret) == std::string::npos);
    CHECK(e.config_error.find("admin") == std::string::npos);
    CHECK(e.config_error.size() <= 256);

    // What a delivery to it stores as last_error (and logs as delivery.dead's reason).
    auto ev = std::make_shared<delivery::event>();
    ev->id = "00000000-0000-0000-0000-000000000001";
    ev->tenant_id = "t";
    ev->body = "{}";
    delivery::job j;
    j.ev = ev;
    j.endpoint_id = 1;
    j.row_id = 42;
    const auto a = admit(j, &e, delivery::breaker_state{}, lane::memory, sys_time{} + 1'800'000'000s, admission_policy{});
    REQUIRE(a.what == fate::write);
    REQUIRE(a.record.last_error.has_value());
    CHECK(a.record.last_error->find(secret) == std::string::npos);
    CHECK(a.record.last_error->size() <= 256);
  }
}
