#pragma once
// Settings of `walhook run` (docs/architecture.md, Defaults, lists them with the flags).
//
// One home per default. A component's own settings are declared once, in its options struct,
// with their default and unit: dispatcher_options (and the delivery:: policies it embeds),
// sql::state_store_options, wal::stream_options, delivery::http_client_options. run_options
// embeds those structs, and the flags of `walhook run` (relay/cli/run.cpp) bind straight to
// their members, so `--help` shows the very default the component declares. Declared here are
// only what several components share (the database, the slot, the shard, the instance name,
// the reconnect cap, the clock) and what only the engine or the admin listener reads.
// relay/engine/config.hpp turns a run_options into every component's settings.

#include "common/time.hpp"
#include "delivery/http_client.hpp"
#include "relay/core/shard.hpp"
#include "relay/engine/dispatcher.hpp"
#include "sql/state_store.hpp"
#include "wal/replication_stream.hpp"

#include <chrono>
#include <cstddef>
#include <string>

namespace walhook::relay {

struct run_options {
  // ---- Shared: relay/engine/config.hpp hands these to every component that needs them.
  std::string database_url;  ///< --database-url: every connection (libpq URL)
  /// --slot: the replication slot's name; with --shard, `walhook run` makes it the shard's
  /// (`<slot>_K_of_N`, relay/core/shard.hpp) before the engine starts.
  std::string slot = wal::stream_options{}.slot;
  /// --shard K/N: the slot's and publications' names, and the tenants the state store reads.
  shard_spec shard;
  std::string instance_name;  ///< --instance-name: shown to standbys and in pg_stat_activity; "" = host:pid
  /// --reconnect-max-ms: the longest wait between reconnects to PostgreSQL, of the engine's
  /// sessions and of the state store's connections (declared by sql::state_store_options).
  std::chrono::milliseconds reconnect_max = sql::state_store_options{}.reconnect_max;
  /// Where the engine, the stream, the state store and the HTTP pools read the time (tests
  /// inject a manual one); timers still wait in real time.
  const clock_source* clock = &real_clock::instance();

  // ---- Each component's own settings, with the defaults its options struct declares.
  /// --max-in-flight … --max-claim, --max-payload-bytes, --max-attempts … --disable-after-s,
  /// --record, --operator-tenant. recent_outcomes is set by config.
  dispatcher_options dispatch;
  /// --behind: an endpoint that cannot take its events as they stream follows walhook.outbox by
  /// cursor (true), or gets a walhook.deliveries row per delivery (false; a cursor left by an
  /// earlier run still drains and rejoins).
  bool outbox_cursors = true;
  /// --give-up-after-h: an outbox cursor whose position has not moved for this long ends what it
  /// owes dead as one range (walhook.dead_ranges).
  std::chrono::hours give_up_after{72};
  /// --max-batch. conninfo, reconnect_max, application_name, the shard and the clock are set by
  /// config from the shared settings above.
  sql::state_store_options store;
  /// --status-interval-ms. conninfo, slot, publications (the shard's), application_name and the
  /// clock are set by config; create_slot is off (a missing slot is relay/engine/recovery.hpp's).
  wal::stream_options stream;
  /// --deadline-ms, --allow-private-networks; extra_ca_pem is read from ca_file by `walhook run`, the
  /// clock is set by config.
  delivery::http_client_options http;
  /// --ca-file: a PEM bundle of CA certificates trusted in addition to OpenSSL's default verify
  /// paths (private CAs); read into http.extra_ca_pem by `walhook run` (relay/cli/run.cpp), "" = none.
  std::string ca_file;
  /// --proxy: the egress proxy's URL (http://host:port), parsed into http.proxy by `walhook run`; "" = none.
  std::string proxy_url;

  // ---- The engine's own (relay/engine/engine.hpp).
  std::size_t max_store_backlog = 20000;             ///< queued state-store writes before reading the slot pauses
  std::chrono::milliseconds shutdown_grace{10000};   ///< --shutdown-grace-ms: SIGTERM, in-flight attempts get this long
  std::chrono::seconds stale_sending_after{60};      ///< 'sending' rows older than this → pending
  std::chrono::hours retention{30 * 24};             ///< --retention-days: outbox rows and finished deliveries are kept this long
  int retention_batch = 5000;                        ///< rows deleted per statement
  /// --recent-outcomes: finished attempts kept in memory for the admin API (relay/core/outcome_log.hpp).
  std::size_t recent_outcomes = 100000;

  // ---- The admin listener's (relay/admin/).
  std::string admin_listen;  ///< --admin-listen: "localhost:9187" serves /metrics, /healthz, /readyz, /api and /console; "" = off
  /// --admin-token-file: the bearer token of /api (the file's first line, trimmed); required for
  /// a non-loopback admin_listen. "" = none.
  std::string admin_token_file;
  /// --admin-tls-cert, --admin-tls-key: PEM files (the certificate chain, its private key); with
  /// both the admin listener speaks HTTPS. "" = plain HTTP.
  std::string admin_tls_cert;
  std::string admin_tls_key;

  // ---- The tenant API's (relay/tenant/, docs/tenant-api.md).
  std::string api_listen;        ///< --api-listen: "0.0.0.0:8443" serves /v1/…; "" = off
  std::string api_tls_cert;      ///< --api-tls-cert, --api-tls-key: PEM files; with both it speaks HTTPS
  std::string api_tls_key;
  std::string api_database_url;  ///< --api-database-url: its connection (walhook_admin's role); "" = database_url
  double api_rate = 20;          ///< --api-rate: requests per second per token
  double api_burst = 40;         ///< --api-burst: requests at once per token
};

}  // namespace walhook::relay
