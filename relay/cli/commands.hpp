#pragma once
// The walhook subcommands (the CLI in main.cpp only parses flags and calls these).
// Each returns the process exit code; user-facing failures throw cli_error.

#include "relay/operations/operations.hpp"
#include "relay/operations/schema.hpp"
#include "relay/engine/options.hpp"

#include <chrono>

#include <optional>
#include <string>
#include <vector>

namespace walhook::relay {

using migrate_args = operations::migrate_request;
/// Applies the schema migrations and creates the logical replication slot (operations::migrate).
int cmd_migrate(const migrate_args& a);

struct endpoint_add_args {
  std::string database_url;
  std::string tenant;
  std::string url;
  std::string secret;  ///< empty: generate one
  int max_concurrency = 4;
  std::vector<std::string> event_types;  ///< empty: all types
  std::string ordering = "none";
  std::string description;
  std::optional<long long> contact_endpoint_id;  ///< where notifications about it go
};
/// Prints "id: N" and "secret: whsec_…".
int cmd_endpoint_add(const endpoint_add_args& a);
int cmd_endpoint_list(const std::string& database_url, const std::string& tenant);
/// action: enable | disable | pause | resume (operations::set_status); prints what changed.
int cmd_endpoint_set(const std::string& database_url, const std::string& action, long long id);
/// Removes an endpoint. With open deliveries and without `force`: asks on a terminal (stdin), and
/// refuses (cli_error naming --force) when stdin is not one.
int cmd_endpoint_remove(const std::string& database_url, long long id, bool force);
/// Changes the given columns (operations::update); walhook run follows through the stream.
int cmd_endpoint_update(const std::string& database_url, long long id, const operations::endpoint_update& u);
/// New secret first, the old ones valid for `grace`; prints the new secret and when the old
/// ones stop being valid.
int cmd_endpoint_rotate_secret(const std::string& database_url, long long id, std::chrono::seconds grace,
                               const std::string& secret);
/// Parses a duration like "24h", "90m", "2s", "7d" or "1h30m" (a bare number: seconds).
/// Throws cli_error naming `flag` on anything else.
std::chrono::seconds parse_duration(const std::string& text, const std::string& flag);

/// Resends one event to one endpoint (operations::resend): same webhook-id, due now.
int cmd_resend(const std::string& database_url, long long endpoint_id, const std::string& event_id);

struct send_args {
  std::string database_url;
  std::string tenant;
  std::string type;
  std::string data;  ///< JSON
  std::string merge_key;
  std::string aggregate_id;
};
/// Publishes one event with walhook.publish(); prints its id.
int cmd_send(const send_args& a);

struct status_args {
  std::string database_url;
  bool json = false;
  std::string admin_url;         ///< a running walhook's admin listener, for its live queued/in_flight ("": not shown)
  std::string admin_token_file;  ///< its bearer token, if it needs one
};
/// One row per endpoint ordered by oldest pending age. `pending`/`sending`/`dead` are rows of
/// walhook.deliveries ('sending': claimed, or attempts past --max-hold-ms recorded); `queued`/
/// `in_flight` are the running walhook's live numbers, from GET /api/endpoints with
/// --admin-url (null / "-" without it).
int cmd_status(const status_args& a);

struct replay_args {
  std::string database_url;
  std::optional<long long> delivery_id;
  std::optional<long long> endpoint_id;
  std::string since;  ///< timestamptz text, optional
  std::string until;
};
int cmd_replay(const replay_args& a);

struct recover_args {
  std::string database_url;
  std::string slot = "walhook";  ///< the walhook (its slot) that runs the backfill
  std::string since;             ///< timestamptz text, required
  std::string until;             ///< optional
  std::string tenant;            ///< optional
  int shards = 0;                ///< N: one request to each shard's walhook (slots <slot>_K_of_N); 0: the layout's
  bool wait = false;             ///< wait until walhook has delivered or stored every delivery
  int wait_timeout_s = 600;
};
/// Operator backfill: asks the walhook streaming `slot` to deliver again, through its normal
/// path, every outbox event created in [since, until) (of one tenant). Prints the request id and
/// how many events it covers; with --wait, waits until it is done.
int cmd_recover(const recover_args& a);

struct reshard_args {
  std::string database_url;
  std::string slot = "walhook";  ///< base name of the slots (<slot>_K_of_N)
  int from = 1;                  ///< shards now (1: one walhook, slot <slot>)
  int to = 2;                    ///< shards after
};
/// Changes the number of shards, losing nothing: with the old layout stopped, creates the new
/// shards' publications and slots, each with a backfill from the old layout's oldest delivered
/// snapshot, records the layout, and drops the old slots.
int cmd_reshard(const reshard_args& a);

struct events_args {
  std::string database_url;
  std::string tenant;
  std::string since;
  std::string until;
  int limit = 1000;
};
/// Reconciliation: a tenant's events in a time range (JSON lines).
int cmd_events(const events_args& a);

/// `walhook run`: preflight checks, then the engine until SIGTERM/SIGINT.
int cmd_run(run_options options);



}  // namespace walhook::relay
