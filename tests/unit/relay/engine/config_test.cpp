// relay/engine/config.hpp: one home per default. A default run_options gives every component the
// defaults its own options struct declares, and those are the values `walhook run` has always
// used (docs/architecture.md, Defaults: one row per setting); the shared settings reach every
// component that needs them.

#include "relay/engine/config.hpp"
#include "tests/support/manual_clock.hpp"

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

using namespace walhook;
using namespace walhook::relay;
using namespace std::chrono_literals;

namespace {

/// Every component's settings for `o`.
struct components {
  wal::stream_options stream;
  sql::state_store_options store;
  delivery::http_client_options http;
  dispatcher_options dispatch;
};

components of(const run_options& o) {
  return {stream_options_of(o), store_options_of(o), http_options_of(o), dispatcher_options_of(o, nullptr)};
}

long long ms(std::chrono::nanoseconds d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

}  // namespace

TEST_CASE("config: walhook run's defaults, as each component gets them (docs/architecture.md, Defaults)") {
  const components c = of(run_options{});
  const run_options run;
  struct row {
    const char* setting;
    long long got;
    long long expected;
  };
  for (const auto& r : std::vector<row>{
           {"--deadline-ms", ms(c.http.total_deadline), 5'000},
           {"response body read", static_cast<long long>(c.http.body_cap), 16 * 1024},
           {"--max-in-flight", static_cast<long long>(c.dispatch.limits.max_in_flight), 256},
           {"--max-slow-in-flight", static_cast<long long>(c.dispatch.limits.max_slow_in_flight), 1'024},
           {"--max-queue-per-endpoint", static_cast<long long>(c.dispatch.limits.max_queued_per_endpoint), 1'000},
           {"--max-queue-total", static_cast<long long>(c.dispatch.limits.max_queued_total), 10'000},
           {"--max-queue-bytes", static_cast<long long>(c.dispatch.max_queued_bytes), 256LL << 20},
           {"--max-wait-ms", ms(c.dispatch.max_wait_in_memory), 1'000},
           {"--max-hold-ms", ms(c.dispatch.max_hold), 250},
           {"--max-payload-bytes", static_cast<long long>(c.dispatch.admission.max_payload_bytes), 1'048'576},
           {"--max-batch", static_cast<long long>(c.store.max_batch), 1'000},
           {"queued writes before reading waits", static_cast<long long>(run.max_store_backlog), 20'000},
           {"--max-claim", static_cast<long long>(c.dispatch.max_claim), 200},
           {"claim horizon", ms(c.dispatch.claim_horizon), 500},
           {"--max-attempts", c.dispatch.outcomes.retry.max_attempts, 20},
           {"--max-age-s", ms(c.dispatch.outcomes.retry.max_age), 259'200'000},
           {"--backoff-base-ms", ms(c.dispatch.outcomes.retry.backoff_base), 30'000},
           {"--backoff-max-ms", ms(c.dispatch.outcomes.retry.backoff_max), 21'600'000},
           {"Retry-After cap", ms(c.dispatch.outcomes.retry.retry_after_max), 6 * 3'600'000},
           {"--breaker-threshold", c.dispatch.outcomes.breaker.failure_threshold, 20},
           {"--breaker-pause-s", ms(c.dispatch.outcomes.breaker.pause_step), 60'000},
           {"--breaker-max-pause-s", ms(c.dispatch.outcomes.breaker.max_pause), 3'600'000},
           {"--disable-after-s", ms(c.dispatch.outcomes.breaker.disable_after), 432'000'000},
           {"--record failed", c.dispatch.outcomes.record_successes, false},
           {"SSRF guard on", c.http.allow_private_networks, false},
           {"--shutdown-grace-ms", ms(run.shutdown_grace), 10'000},
           {"--status-interval-ms", ms(c.stream.status_interval), 10'000},
           {"status update at most every", ms(c.stream.min_status_interval), 50},
           {"reconnect backoff, first", ms(c.store.reconnect_min), 50},
           {"--reconnect-max-ms (state store)", ms(c.store.reconnect_max), 500},
           {"--reconnect-max-ms (engine)", ms(run.reconnect_max), 500},
           {"stale sending after", ms(run.stale_sending_after), 60'000},
           {"--retention-days", ms(run.retention), 30LL * 86'400'000},
           {"rows deleted per statement", run.retention_batch, 5'000},
           {"--recent-outcomes", static_cast<long long>(run.recent_outcomes), 100'000},
           {"notifications: failing at most every", ms(c.dispatch.notifications.failing_interval), 600'000},
           {"notifications: paused at most every", ms(c.dispatch.notifications.paused_interval), 600'000},
           {"notifications: dead summed per", ms(c.dispatch.notifications.dead_interval), 60'000},
       }) {
    const std::string setting = r.setting;
    CAPTURE(setting);
    CHECK(r.got == r.expected);
  }
  CHECK(c.stream.slot == "walhook");
  CHECK(c.stream.publications == std::vector<std::string>{"walhook", "walhook_endpoints"});
  CHECK(c.dispatch.notifications.operator_tenant == "walhook-operator");
  CHECK(c.dispatch.notifications.contacts);
  CHECK(run.admin_listen.empty());
}

TEST_CASE("config: a default run gives each component its own struct's defaults, but for the shared settings") {
  const components c = of(run_options{});
  const wal::stream_options stream;
  CHECK(c.stream.slot == stream.slot);
  CHECK(c.stream.publications == stream.publications);
  CHECK(c.stream.messages == stream.messages);
  CHECK(c.stream.status_interval == stream.status_interval);
  CHECK(c.stream.min_status_interval == stream.min_status_interval);
  CHECK(c.stream.server_silence_timeout == stream.server_silence_timeout);
  CHECK(c.stream.connect_timeout == stream.connect_timeout);
  const sql::state_store_options store;
  CHECK(c.store.max_batch == store.max_batch);
  CHECK(c.store.statement_timeout == store.statement_timeout);
  CHECK(c.store.reconnect_min == store.reconnect_min);
  CHECK(c.store.reconnect_max == store.reconnect_max);
  const delivery::http_client_options http;
  CHECK(c.http.total_deadline == http.total_deadline);
  CHECK(c.http.body_cap == http.body_cap);
  CHECK(c.http.max_idle_per_pool == http.max_idle_per_pool);
  CHECK(c.http.idle_timeout == http.idle_timeout);
  CHECK(c.http.allow_private_networks == http.allow_private_networks);
  const dispatcher_options dispatch;
  CHECK(c.dispatch.limits.max_in_flight == delivery::scheduler_limits{}.max_in_flight);
  CHECK(c.dispatch.limits.max_slow_in_flight == delivery::scheduler_limits{}.max_slow_in_flight);
  CHECK(c.dispatch.limits.max_queued_per_endpoint == delivery::scheduler_limits{}.max_queued_per_endpoint);
  CHECK(c.dispatch.limits.max_queued_total == delivery::scheduler_limits{}.max_queued_total);
  CHECK(c.dispatch.max_wait_in_memory == dispatch.max_wait_in_memory);
  CHECK(c.dispatch.max_hold == dispatch.max_hold);
  CHECK(c.dispatch.sweep_interval == dispatch.sweep_interval);
  CHECK(c.dispatch.min_claim_interval == dispatch.min_claim_interval);
  CHECK(c.dispatch.claim_horizon == dispatch.claim_horizon);
  CHECK(c.dispatch.max_claim == dispatch.max_claim);
  CHECK(c.dispatch.max_queued_bytes == dispatch.max_queued_bytes);
  CHECK(c.dispatch.admission.max_payload_bytes == dispatch.admission.max_payload_bytes);
  CHECK(c.dispatch.outcomes.retry.max_attempts == delivery::retry_policy{}.max_attempts);
  CHECK(c.dispatch.outcomes.breaker.failure_threshold == delivery::breaker_policy{}.failure_threshold);
  CHECK(c.dispatch.seed == dispatch.seed);
}

TEST_CASE("config: the shared settings reach every component that needs them") {
  test::manual_clock clock;
  run_options o;
  o.database_url = "postgresql://walhook@db/app";
  o.shard = {1, 4};
  o.slot = "walhook_1_of_4";
  o.instance_name = "host:42";
  o.reconnect_max = 123ms;
  o.clock = &clock;
  o.store.max_batch = 7;
  o.stream.status_interval = 3s;
  o.http.total_deadline = 4s;
  o.dispatch.max_claim = 9;
  const components c = of(o);
  CHECK(c.stream.conninfo == o.database_url);
  CHECK(c.stream.slot == "walhook_1_of_4");
  CHECK(c.stream.publications == shard_publications({1, 4}));
  CHECK(c.stream.application_name == "walhook host:42");
  CHECK_FALSE(c.stream.create_slot);  // a missing slot is relay/engine/recovery.hpp's
  CHECK(c.stream.clock == &clock);
  CHECK(c.stream.status_interval == 3s);
  CHECK(c.store.conninfo == o.database_url);
  CHECK(c.store.reconnect_max == 123ms);
  CHECK(c.store.application_name == "walhook-state host:42");
  CHECK(c.store.shard_count == 4);
  CHECK(c.store.shard_index == 1);
  CHECK(c.store.clock == &clock);
  CHECK(c.store.max_batch == 7);
  CHECK(c.http.clock == &clock);
  CHECK(c.http.total_deadline == 4s);
  CHECK(c.dispatch.max_claim == 9);
  CHECK(c.dispatch.recent_outcomes == nullptr);
}
