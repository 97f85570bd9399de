// walhook: delivers PostgreSQL outbox events to customers' webhooks through a logical
// replication slot. This file only parses the command line (CLI11); the commands live in
// relay/cli/commands.hpp.

#include "common/log.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/cli/commands.hpp"
#include "relay/cli/did_you_mean.hpp"
#include "relay/demo/demo.hpp"
#include "relay/core/version.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <optional>

namespace {

using namespace walhook::relay;
using walhook::relay::cli::unknown_word;

void add_database_url(CLI::App* cmd, std::string& url) {
  cmd->add_option("--database-url", url, "PostgreSQL URL, e.g. postgresql://walhook@db:5432/app")
      ->envname("WALHOOK_DATABASE_URL")
      ->required();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"walhook: PostgreSQL outbox → logical replication → signed webhooks (Standard Webhooks)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "walhook " + std::string(walhook_version) + " (" + std::string(walhook_commit) + ")");
  std::string log_level;
  app.add_option("--log-level", log_level, "debug, info, warn or error (default info; env WALHOOK_LOG_LEVEL)")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));

  // migrate
  migrate_args migrate;
  auto* c_migrate = app.add_subcommand("migrate", "Apply the schema migrations and create the replication slot");
  add_database_url(c_migrate, migrate.database_url);
  c_migrate->add_option("--slot", migrate.slot, "Replication slot name")->capture_default_str();
  bool no_slot = false;
  c_migrate->add_flag("--no-slot", no_slot, "Do not create the replication slot (walhook run creates it)");
  std::string migrate_shard;
  c_migrate->add_option("--shard", migrate_shard,
                        "K/N: also create shard K's row-filtered publications and its slot <slot>_K_of_N");

  // run
  run_options run;
  auto* c_run = app.add_subcommand("run", "Stream the outbox from the slot and deliver webhooks until SIGTERM");
  add_database_url(c_run, run.database_url);
  c_run->add_option("--slot", run.slot, "Replication slot name")->capture_default_str();
  std::string run_shard;
  c_run->add_option("--shard", run_shard,
                    "K/N: deliver only shard K's tenants, from slot <slot>_K_of_N and its publications "
                    "(walhook migrate --shard K/N creates them)");
  std::string record = "failed";
  c_run->add_option("--record", record, "Write successful first attempts to walhook.deliveries too (all) or not (failed)")
      ->check(CLI::IsMember({"failed", "all"}))
      ->capture_default_str();
  c_run->add_option("--max-in-flight", run.dispatch.limits.max_in_flight,
                    "Attempts in flight, whole process, not counting those past --max-hold-ms")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_run->add_option("--max-slow-in-flight", run.dispatch.limits.max_slow_in_flight,
                    "Attempts past --max-hold-ms (slow or hung endpoints) in flight at most, on top of --max-in-flight")
      ->capture_default_str();
  c_run->add_option("--max-queue-per-endpoint", run.dispatch.limits.max_queued_per_endpoint, "Deliveries waiting in memory per endpoint")
      ->capture_default_str();
  c_run->add_option("--max-queue-total", run.dispatch.limits.max_queued_total, "Deliveries waiting in memory in all")->capture_default_str();
  long long max_wait_ms = run.dispatch.max_wait_in_memory.count();
  c_run->add_option("--max-wait-ms", max_wait_ms, "A delivery waiting longer in memory is persisted as pending")
      ->capture_default_str();
  c_run->add_option("--max-batch", run.store.max_batch, "Writes of delivery state per PostgreSQL transaction at most")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_run->add_option("--max-queue-bytes", run.dispatch.max_queued_bytes,
                    "Bytes of event bodies held in memory at most (e.g. 256MiB, 1GiB); past it, reading the slot waits")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  c_run->add_option("--max-claim", run.dispatch.max_claim, "Pending deliveries one claim takes back for one endpoint at most")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  long long max_hold_ms = run.dispatch.max_hold.count();
  c_run->add_option("--max-hold-ms", max_hold_ms,
                    "An attempt still running after this long is recorded as 'sending' so the slot's acknowledged "
                    "position can move past it")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  long long reconnect_max_ms = run.reconnect_max.count();
  c_run->add_option("--reconnect-max-ms", reconnect_max_ms, "Longest wait between reconnects to PostgreSQL")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  long long deadline_ms = run.http.total_deadline.count();
  c_run->add_option("--deadline-ms", deadline_ms, "Total deadline of one attempt (resolve, connect, TLS, write, response headers)")
      ->capture_default_str();
  c_run->add_option("--max-payload-bytes", run.dispatch.admission.max_payload_bytes, "Larger request bodies end as dead deliveries")
      ->capture_default_str();
  c_run->add_option("--ca-file", run.ca_file,
                    "PEM bundle of CA certificates to trust for https endpoints, in addition to the system's "
                    "(private CAs)");
  c_run->add_flag("--allow-private-networks", run.http.allow_private_networks,
                  "Allow endpoints on loopback, private and link-local addresses (SSRF guard off)");
  c_run->add_option("--max-attempts", run.dispatch.outcomes.retry.max_attempts, "Attempts before a delivery is dead")->capture_default_str();
  long long backoff_base_ms = run.dispatch.outcomes.retry.backoff_base.count();
  c_run->add_option("--backoff-base-ms", backoff_base_ms, "Backoff after the first failure, doubling each time (half of it jitter)")
      ->capture_default_str();
  long long backoff_max_ms = run.dispatch.outcomes.retry.backoff_max.count();
  c_run->add_option("--backoff-max-ms", backoff_max_ms, "Longest backoff")->capture_default_str();
  long long max_age_s = run.dispatch.outcomes.retry.max_age.count();
  c_run->add_option("--max-age-s", max_age_s, "A delivery of an older event is dead")->capture_default_str();
  c_run->add_option("--breaker-threshold", run.dispatch.outcomes.breaker.failure_threshold, "Consecutive failures that pause an endpoint")
      ->capture_default_str();
  long long pause_s = run.dispatch.outcomes.breaker.pause_step.count();
  c_run->add_option("--breaker-pause-s", pause_s, "First pause, and the extension per failed probe round")->capture_default_str();
  long long max_pause_s = run.dispatch.outcomes.breaker.max_pause.count();
  c_run->add_option("--breaker-max-pause-s", max_pause_s, "Longest pause")->capture_default_str();
  long long disable_after_s = run.dispatch.outcomes.breaker.disable_after.count();
  c_run->add_option("--disable-after-s", disable_after_s, "Failing continuously this long disables an endpoint")
      ->capture_default_str();
  long long grace_ms = run.shutdown_grace.count();
  c_run->add_option("--shutdown-grace-ms", grace_ms, "SIGTERM: time in-flight attempts get to finish")->capture_default_str();
  long long status_ms = run.stream.status_interval.count();
  c_run->add_option("--status-interval-ms", status_ms, "Standby status update at least this often")->capture_default_str();
  long long retention_days = run.retention.count() / 24;
  c_run->add_option("--retention-days", retention_days, "Outbox rows and finished deliveries are deleted after this")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_run->add_option("--admin-listen", run.admin_listen,
                    "Serve the console (/console/), its JSON API (/api/), /metrics (Prometheus), /healthz and "
                    "/readyz on HOST:PORT, e.g. localhost:9187 (a non-loopback address needs --admin-token-file)");
  c_run->add_option("--admin-token-file", run.admin_token_file,
                    "File holding the bearer token the admin API (/api/) requires (Authorization: Bearer <token>)");
  c_run->add_option("--recent-outcomes", run.recent_outcomes,
                    "Finished attempts kept in memory for the console's \"did endpoint X get event Y?\" (0: none)")
      ->capture_default_str();
  c_run->add_option("--operator-tenant", run.dispatch.notifications.operator_tenant,
                    "Tenant walhook publishes its notifications to (walhook.endpoint.*, walhook.delivery.dead); "
                    "\"\" = none (contact endpoints still get theirs)")
      ->capture_default_str();
  c_run->add_option("--instance-name", run.instance_name, "Name shown to standbys and in pg_stat_activity (default host:pid)");

  // endpoint
  auto* c_endpoint = app.add_subcommand("endpoint", "Manage customer endpoints");
  c_endpoint->require_subcommand(1);
  endpoint_add_args add;
  auto* c_add = c_endpoint->add_subcommand("add", "Add an endpoint; prints its id and signing secret");
  add_database_url(c_add, add.database_url);
  c_add->add_option("--tenant", add.tenant, "Tenant whose events go to this endpoint")->required();
  c_add->add_option("--url", add.url, "http:// or https:// URL that receives the POSTs")->required();
  c_add->add_option("--secret", add.secret, "whsec_… signing secret (default: generated)");
  c_add->add_option("--max-concurrency", add.max_concurrency, "Attempts in flight to this endpoint at most")
      ->capture_default_str();
  const char* event_types_help = "Only these event types: comma-separated, exact match of event_type (no wildcards); default all";
  c_add->add_option("--event-types", add.event_types, event_types_help)->delimiter(',');
  c_add->add_option("--ordering", add.ordering, "none, or aggregate: one delivery in flight per aggregate_id")
      ->check(CLI::IsMember({"none", "aggregate"}))
      ->capture_default_str();
  c_add->add_option("--description", add.description, "Free text for operators");
  long long add_contact = 0;
  auto* o_add_contact = c_add->add_option("--contact-endpoint", add_contact,
                                          "Endpoint that receives the walhook.endpoint.* notifications about this one");
  std::string list_url, list_tenant;
  auto* c_list = c_endpoint->add_subcommand("list", "List endpoints");
  add_database_url(c_list, list_url);
  c_list->add_option("--tenant", list_tenant, "Only this tenant");
  std::string set_url;
  long long set_id = 0;
  std::string set_action;
  for (auto [action, help] : {std::pair{"enable", "Enable an endpoint (closes its circuit breaker; pending deliveries due now)"},
                              std::pair{"disable", "Disable an endpoint (its deliveries wait, pending)"},
                              std::pair{"pause", "Pause an endpoint (its deliveries wait, pending)"},
                              std::pair{"resume", "Resume an endpoint: closes its circuit breaker and retries its pending "
                                                  "deliveries now (\"retry pending now\")"}}) {
    auto* c = c_endpoint->add_subcommand(action, help);
    add_database_url(c, set_url);
    c->add_option("id", set_id, "Endpoint id")->required();
    c->callback([&set_action, action] { set_action = action; });
  }
  bool remove_force = false;
  auto* c_remove = c_endpoint->add_subcommand("remove", "Remove an endpoint; its pending deliveries end dead (asks first if there are any; --force does not ask)");
  add_database_url(c_remove, set_url);
  c_remove->add_option("id", set_id, "Endpoint id")->required();
  c_remove->add_flag("--force", remove_force, "Remove without asking, even with pending deliveries");

  walhook::relay::operations::endpoint_update update;
  std::string update_url, update_description, update_contact;
  std::vector<std::string> update_types;
  int update_concurrency = 0;
  auto* c_update = c_endpoint->add_subcommand("update", "Change an endpoint's URL, event types, concurrency, description "
                                                        "or contact endpoint (walhook run follows at once)");
  add_database_url(c_update, set_url);
  c_update->add_option("id", set_id, "Endpoint id")->required();
  auto* o_update_url = c_update->add_option("--url", update_url, "http:// or https:// URL that receives the POSTs");
  auto* o_update_types =
      c_update->add_option("--event-types", update_types,
                           "Only these event types: comma-separated, exact match of event_type (no wildcards); \"\" "
                           "for all")
          ->delimiter(',');
  auto* o_update_concurrency =
      c_update->add_option("--max-concurrency", update_concurrency, "Attempts in flight to this endpoint at most");
  auto* o_update_description = c_update->add_option("--description", update_description, "Free text for operators");
  auto* o_update_contact = c_update->add_option("--contact-endpoint", update_contact,
                                                "Endpoint that receives the notifications about this one, or none");

  std::string rotate_grace = "24h", rotate_secret;
  auto* c_rotate = c_endpoint->add_subcommand(
      "rotate-secret", "New signing secret; the old one stays valid (deliveries carry both signatures) for --grace, then "
                       "walhook run drops it");
  add_database_url(c_rotate, set_url);
  c_rotate->add_option("id", set_id, "Endpoint id")->required();
  c_rotate->add_option("--grace", rotate_grace, "How long the old secret stays valid (e.g. 24h, 90m, 7d)")->capture_default_str();
  c_rotate->add_option("--secret", rotate_secret, "The new whsec_… secret (default: generated)");

  // send
  send_args send;
  auto* c_send = app.add_subcommand("send", "Publish one event into walhook.outbox (walhook.publish)");
  add_database_url(c_send, send.database_url);
  c_send->add_option("--tenant", send.tenant, "Tenant")->required();
  c_send->add_option("--type", send.type, "Event type, e.g. order.created")->required();
  c_send->add_option("--data", send.data, "JSON payload")->required();
  c_send->add_option("--merge-key", send.merge_key, "Coalesce with a pending delivery of the same key (state updates)");
  c_send->add_option("--aggregate-id", send.aggregate_id, "Entity id, for per-aggregate ordering");

  // status
  status_args status;
  auto* c_status = app.add_subcommand("status", "Per-endpoint pending, in flight, oldest pending age, failures");
  add_database_url(c_status, status.database_url);
  c_status->add_flag("--json", status.json, "One JSON object per endpoint (absent values are null)");
  c_status->add_option("--admin-url", status.admin_url,
                       "http://HOST:PORT of the running walhook's --admin-listen: show its live queued and in_flight")
      ->envname("WALHOOK_ADMIN_URL");
  c_status->add_option("--admin-token-file", status.admin_token_file, "File with the admin API's bearer token");

  // resend
  std::string resend_url, resend_event;
  long long resend_endpoint = 0;
  auto* c_resend = app.add_subcommand(
      "resend", "Send one event to one endpoint again, whatever happened before (same webhook-id, due now)");
  add_database_url(c_resend, resend_url);
  c_resend->add_option("--endpoint", resend_endpoint, "Endpoint id")->required();
  c_resend->add_option("--event", resend_event, "Event id (walhook.outbox.id, the webhook-id)")->required();

  // replay
  replay_args replay;
  auto* c_replay = app.add_subcommand("replay", "Send dead letters (or a disabled endpoint's pending deliveries) again; "
                                                "pending ones are retried now by endpoint resume");
  add_database_url(c_replay, replay.database_url);
  long long replay_delivery = 0, replay_endpoint = 0;
  auto* o_delivery = c_replay->add_option("--delivery", replay_delivery, "One delivery id");
  auto* o_endpoint = c_replay->add_option("--endpoint", replay_endpoint, "All of one endpoint");
  o_delivery->excludes(o_endpoint);
  c_replay->add_option("--since", replay.since, "Events created at or after (timestamptz)");
  c_replay->add_option("--until", replay.until, "Events created before (timestamptz)");

  // recover
  recover_args recover;
  auto* c_recover = app.add_subcommand(
      "recover", "Deliver again every event created in a time range (a slot lost without a recorded snapshot, or any "
                 "case walhook cannot see), through the running walhook");
  add_database_url(c_recover, recover.database_url);
  c_recover->add_option("--since", recover.since, "Events created at or after (timestamptz)")->required();
  c_recover->add_option("--until", recover.until, "Events created before (timestamptz; default: no end)");
  c_recover->add_option("--tenant", recover.tenant, "Only this tenant's events");
  c_recover->add_option("--slot", recover.slot, "The slot of the walhook that delivers them")->capture_default_str();
  c_recover->add_option("--shards", recover.shards,
                        "N: ask each of N shards' walhooks (slots <slot>_K_of_N); default: the database's layout")
      ->check(CLI::Range(1, walhook::relay::max_shards));
  c_recover->add_flag("--wait", recover.wait, "Wait until every delivery is delivered or stored");
  c_recover->add_option("--wait-timeout", recover.wait_timeout_s, "Seconds --wait waits at most")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  // reshard
  reshard_args reshard;
  auto* c_reshard = app.add_subcommand(
      "reshard", "Change the number of shards (stop the old layout first): new slots, each with a backfill, then the old "
                 "slots dropped");
  add_database_url(c_reshard, reshard.database_url);
  c_reshard->add_option("--from", reshard.from, "Shards now (1: one walhook without --shard)")
      ->required()
      ->check(CLI::Range(1, walhook::relay::max_shards));
  c_reshard->add_option("--to", reshard.to, "Shards after")->required()->check(CLI::Range(1, walhook::relay::max_shards));
  c_reshard->add_option("--slot", reshard.slot, "Base name of the slots")->capture_default_str();

  // events
  events_args events;
  auto* c_events = app.add_subcommand("events", "List a tenant's events (reconciliation, last 30 days by default)");
  add_database_url(c_events, events.database_url);
  c_events->add_option("--tenant", events.tenant, "Tenant")->required();
  c_events->add_option("--since", events.since, "From (timestamptz)");
  c_events->add_option("--until", events.until, "Until (timestamptz)");
  c_events->add_option("--limit", events.limit, "At most this many")->capture_default_str()->check(CLI::PositiveNumber);

  // demo
  demo_args demo;
  auto* c_demo = app.add_subcommand("demo", "Throwaway PostgreSQL + demo receiver + sample events, end to end");
  c_demo->add_option("--events", demo.events, "Sample events to commit")->capture_default_str()->check(CLI::Range(1, 100000));
  c_demo->add_flag("--hold", demo.hold, "Keep running after the samples until Ctrl-C");
  c_demo->add_option("--admin-listen", demo.admin_listen,
                     "Serve the console and /metrics on HOST:PORT, loopback (default: localhost:9187 with --hold, none without; \"off\": none)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0)  // not --help or --version
      if (auto unknown = unknown_word(app, argc, argv)) {
        std::cerr << "walhook: " << *unknown << "\n";
        return e.get_exit_code();
      }
    return app.exit(e);
  }
  if (!log_level.empty()) {
    walhook::log::level l;
    walhook::log::parse_level(log_level, l);
    walhook::log::set_level(l);
  }

  try {
    auto shard_of = [](const std::string& text) {
      if (text.empty()) return walhook::relay::shard_spec{};
      std::string why;
      auto s = walhook::relay::parse_shard(text, why);
      if (!s) throw cli_error(why);
      return *s;
    };
    if (c_migrate->parsed()) {
      migrate.create_slot = !no_slot;
      migrate.shard = shard_of(migrate_shard);
      return cmd_migrate(migrate);
    }
    if (c_run->parsed()) {
      using namespace std::chrono;
      run.shard = shard_of(run_shard);
      run.dispatch.outcomes.record_successes = record == "all";
      run.dispatch.max_wait_in_memory = milliseconds{max_wait_ms};
      run.dispatch.max_hold = milliseconds{max_hold_ms};
      run.reconnect_max = milliseconds{reconnect_max_ms};
      run.http.total_deadline = milliseconds{deadline_ms};
      run.dispatch.outcomes.retry.backoff_base = milliseconds{backoff_base_ms};
      run.dispatch.outcomes.retry.backoff_max = milliseconds{backoff_max_ms};
      run.dispatch.outcomes.retry.max_age = seconds{max_age_s};
      run.dispatch.outcomes.breaker.pause_step = seconds{pause_s};
      run.dispatch.outcomes.breaker.max_pause = seconds{max_pause_s};
      run.dispatch.outcomes.breaker.disable_after = seconds{disable_after_s};
      run.shutdown_grace = milliseconds{grace_ms};
      run.stream.status_interval = milliseconds{status_ms};
      run.retention = hours{retention_days * 24};
      return cmd_run(std::move(run));
    }
    if (c_add->parsed()) {
      if (o_add_contact->count()) add.contact_endpoint_id = add_contact;
      return cmd_endpoint_add(add);
    }
    if (c_list->parsed()) return cmd_endpoint_list(list_url, list_tenant);
    if (!set_action.empty()) return cmd_endpoint_set(set_url, set_action, set_id);
    if (c_remove->parsed()) return cmd_endpoint_remove(set_url, set_id, remove_force);
    if (c_update->parsed()) {
      if (o_update_url->count()) update.url = update_url;
      if (o_update_types->count()) {
        const bool all = std::all_of(update_types.begin(), update_types.end(), [](const auto& t) { return t.empty(); });
        update.event_types = all ? std::vector<std::string>{} : update_types;  // --event-types "": all types
      }
      if (o_update_concurrency->count()) update.max_concurrency = update_concurrency;
      if (o_update_description->count()) update.description = update_description;
      if (o_update_contact->count()) {
        if (update_contact == "none") {
          update.contact_endpoint_id = std::optional<std::int64_t>{};
        } else {
          try {
            std::size_t used = 0;
            update.contact_endpoint_id = std::optional<std::int64_t>{std::stoll(update_contact, &used)};
            if (used != update_contact.size()) throw std::invalid_argument("trailing");
          } catch (const std::logic_error&) {
            throw cli_error("--contact-endpoint must be an endpoint id or none");
          }
        }
      }
      return cmd_endpoint_update(set_url, set_id, update);
    }
    if (c_rotate->parsed())
      return cmd_endpoint_rotate_secret(set_url, set_id, parse_duration(rotate_grace, "--grace"), rotate_secret);
    if (c_send->parsed()) return cmd_send(send);
    if (c_status->parsed()) return cmd_status(status);
    if (c_resend->parsed()) return cmd_resend(resend_url, resend_endpoint, resend_event);
    if (c_replay->parsed()) {
      if (o_delivery->count()) replay.delivery_id = replay_delivery;
      if (o_endpoint->count()) replay.endpoint_id = replay_endpoint;
      return cmd_replay(replay);
    }
    if (c_recover->parsed()) return cmd_recover(recover);
    if (c_reshard->parsed()) return cmd_reshard(reshard);
    if (c_events->parsed()) return cmd_events(events);
    if (c_demo->parsed()) return cmd_demo(demo);
  } catch (const std::exception& e) {
    // walhook run writes JSON log lines only, its fatal errors too; the other commands talk to
    // a person.
    if (c_run->parsed()) {
      walhook::log::error("run.failed", {{"error", std::string(e.what())}});
    } else {
      std::cerr << "walhook: " << e.what() << "\n";
    }
    return 1;
  }
  return 0;
}
