#pragma once
// Settings of `walhook run` (docs/architecture.md, Defaults, lists them with the flags).

#include "common/time.hpp"
#include "delivery/breaker.hpp"
#include "delivery/http_client.hpp"
#include "delivery/policy.hpp"
#include "delivery/scheduler.hpp"
#include "relay/core/shard.hpp"

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace walhook::relay {

enum class record_mode {
  failed,  ///< only deliveries that did not succeed at once are written to walhook.deliveries
  all,     ///< successful first attempts are recorded too (batched)
};

struct run_options {
  std::string database_url;
  std::string slot = "walhook";
  std::vector<std::string> publications{"walhook", "walhook_endpoints"};
  /// --shard K/N (relay/core/shard.hpp): cmd_run derives the slot and publications from it.
  shard_spec shard;
  record_mode record = record_mode::failed;

  delivery::scheduler_limits limits;                   ///< 256 in flight (+1,024 past the hold bound), 1000/endpoint, 10000 total in memory
  std::chrono::milliseconds max_wait_in_memory{1000};  ///< older queued deliveries are spilled
  /// An attempt still running after this long is recorded as 'sending' and stops holding its
  /// transaction's LSN (docs/architecture.md, Invariants, 9): no customer holds the acknowledged position.
  std::chrono::milliseconds max_hold{250};
  std::size_t max_payload_bytes = 1024 * 1024;         ///< bigger request bodies → dead delivery
  std::size_t max_store_backlog = 20000;               ///< queued writes before reading the slot pauses
  std::size_t max_batch = 1000;                        ///< writes per state-store transaction
  std::size_t max_queued_bytes = std::size_t{256} << 20;  ///< event bytes in memory before reading the slot waits
  std::size_t max_claim = 200;                         ///< rows one claim takes for one endpoint at most (small transactions keep the walsender from stalling)

  delivery::http_client_options http;                  ///< 5 s deadline, SSRF guard on
  /// --ca-file: a PEM bundle of CA certificates trusted in addition to OpenSSL's default verify
  /// paths (private CAs); read into http.extra_ca_pem by cmd_run, "" = none.
  std::string ca_file;
  delivery::retry_policy retry;
  delivery::breaker_policy breaker;

  std::chrono::milliseconds shutdown_grace{10000};     ///< SIGTERM: in-flight attempts get this long
  std::chrono::seconds stale_sending_after{60};        ///< 'sending' rows older than this → pending
  std::chrono::hours retention{30 * 24};               ///< outbox rows and finished deliveries are kept this long
  int retention_batch = 5000;                          ///< rows deleted per statement
  std::chrono::milliseconds status_interval{10000};    ///< standby status update at least this often
  std::chrono::milliseconds reconnect_max{500};        ///< cap of the reconnect backoff (PostgreSQL down)

  /// --operator-tenant: walhook's notifications (walhook.endpoint.*, walhook.delivery.dead; README
  /// "Notifications") are published to this tenant; "" = not to any tenant.
  std::string operator_tenant = "walhook-operator";
  /// Notifications to endpoints' contact endpoints too; preflight turns them off when the role
  /// may not insert into walhook.outbox and --operator-tenant is "".
  bool contact_notifications = true;

  std::string admin_listen;  ///< "localhost:9187" serves /metrics, /healthz, /readyz, /api and /console; "" = off
  /// --admin-token-file: the bearer token of /api (the file's first line, trimmed); required for
  /// a non-loopback admin_listen. "" = none.
  std::string admin_token_file;
  /// --recent-outcomes: finished attempts kept in memory for the admin API (relay/core/outcome_log.hpp).
  std::size_t recent_outcomes = 100000;
  std::string instance_name; ///< shown to standbys and in pg_stat_activity; default host:pid
  /// Where the engine, the stream, the state store and the HTTP pools read the time (tests
  /// inject a manual one); timers still wait in real time.
  const clock_source* clock = &real_clock::instance();
};

}  // namespace walhook::relay
