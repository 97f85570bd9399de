// `walhook run`: its flags, bound straight to the settings they change (relay/engine/options.hpp
// declares each once, with its default), the preflight checks, the open-files fit, then the
// engine (and the admin listener) until SIGTERM/SIGINT. Everything it says is a JSON log line,
// its fatal errors too ("run.failed").

#include "common/log.hpp"
#include "delivery/http_client.hpp"
#include "relay/admin/access.hpp"
#include "relay/admin/server.hpp"
#include "relay/tenant/api.hpp"
#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/cli/run.hpp"
#include "relay/engine/engine.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/schema.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <fmt/format.h>

#include <cstdlib>
#include <functional>
#include <memory>

#include <sys/resource.h>

namespace walhook::relay::cli {
namespace asio = boost::asio;

namespace {

/// What to stream: the database, the slot, the shard; and what to record.
void add_slot_flags(CLI::App* c, run_flags& f) {
  auto& run = f.run;
  add_database_url(c, run.database_url);
  c->add_option("--slot", run.slot, "Replication slot name")->capture_default_str();
  c->add_option("--shard", f.shard,
                "K/N: deliver only shard K's tenants, from slot <slot>_K_of_N and its publications "
                "(walhook migrate --shard K/N creates them)");
  auto& record_successes = run.dispatch.outcomes.record_successes;
  c->add_option_function<std::string>(
       "--record", [&record_successes](const std::string& v) { record_successes = v == "all"; },
       "Write successful first attempts to walhook.deliveries too (all) or not (failed)")
      ->check(CLI::IsMember({"failed", "all"}))
      ->default_str(record_successes ? "all" : "failed");
  auto& cursors = run.outbox_cursors;
  c->add_option_function<std::string>(
       "--behind", [&cursors](const std::string& v) { cursors = v == "cursor"; },
       "An endpoint that cannot take its events as they stream (down, paused, too slow) follows walhook.outbox by "
       "cursor, one row per endpoint (cursor), or gets a walhook.deliveries row per delivery (rows)")
      ->check(CLI::IsMember({"cursor", "rows"}))
      ->default_str(cursors ? "cursor" : "rows");
}

/// Memory and the hold bound: how much waits, how much runs, how much one write or claim takes.
void add_memory_flags(CLI::App* c, run_options& run) {
  using std::chrono::milliseconds;
  auto& limits = run.dispatch.limits;
  c->add_option("--max-in-flight", limits.max_in_flight, "Attempts in flight, whole process, not counting those past --max-hold-ms")
      ->capture_default_str()
      ->check(positive);
  c->add_option("--max-slow-in-flight", limits.max_slow_in_flight,
                "Attempts past --max-hold-ms (slow or hung endpoints) in flight at most, on top of --max-in-flight")
      ->capture_default_str();
  c->add_option("--max-queue-per-endpoint", limits.max_queued_per_endpoint, "Deliveries waiting in memory per endpoint")
      ->capture_default_str();
  c->add_option("--max-queue-total", limits.max_queued_total, "Deliveries waiting in memory in all")->capture_default_str();
  add_duration<milliseconds>(c, "--max-wait-ms", run.dispatch.max_wait_in_memory,
                             "A delivery waiting longer in memory is persisted as pending");
  c->add_option("--max-batch", run.store.max_batch, "Writes of delivery state per PostgreSQL transaction at most")
      ->capture_default_str()
      ->check(positive);
  c->add_option("--max-queue-bytes", run.dispatch.max_queued_bytes,
                "Bytes of event bodies held in memory at most (e.g. 256MiB, 1GiB); past it, reading the slot waits")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  c->add_option("--max-claim", run.dispatch.max_claim, "Pending deliveries one claim takes back for one endpoint at most")
      ->capture_default_str()
      ->check(positive);
  add_duration<milliseconds>(c, "--max-hold-ms", run.dispatch.max_hold,
                             "An attempt still running after this long is recorded as 'sending' so the slot's "
                             "acknowledged position can move past it")
      ->check(positive);
}

/// Connections: to PostgreSQL, and each attempt's.
void add_connection_flags(CLI::App* c, run_options& run) {
  using std::chrono::milliseconds;
  add_duration<milliseconds>(c, "--reconnect-max-ms", run.reconnect_max, "Longest wait between reconnects to PostgreSQL")
      ->check(positive);
  add_duration<milliseconds>(c, "--deadline-ms", run.http.total_deadline,
                             "Total deadline of one attempt (resolve, connect, TLS, write, response headers)");
  c->add_option("--max-payload-bytes", run.dispatch.admission.max_payload_bytes, "Larger request bodies end as dead deliveries")
      ->capture_default_str();
  c->add_option("--ca-file", run.ca_file,
                "PEM bundle of CA certificates to trust for https endpoints, in addition to the system's (private CAs)");
  c->add_flag("--allow-private-networks", run.http.allow_private_networks,
              "Allow endpoints on loopback, private and link-local addresses (SSRF guard off)");
  c->add_option("--proxy", run.proxy_url,
                "Egress proxy for HTTP endpoints, http://host:port: each attempt goes through a CONNECT tunnel to the "
                "address walhook resolved and checked (docs/endpoint-policies.md)");
  c->add_option("--no-proxy", run.http.no_proxy,
                "Endpoint hosts reached without the proxy, comma-separated: a host, a domain (example.com or .example.com "
                "covers its subdomains), or *")
      ->delimiter(',');
}

/// Retries and the circuit breaker (delivery/policy.hpp, delivery/breaker.hpp).
void add_retry_flags(CLI::App* c, run_options& run) {
  using std::chrono::milliseconds, std::chrono::seconds;
  auto& retry = run.dispatch.outcomes.retry;
  auto& breaker = run.dispatch.outcomes.breaker;
  c->add_option("--max-attempts", retry.max_attempts, "Attempts before a delivery is dead")->capture_default_str();
  add_duration<milliseconds>(c, "--backoff-base-ms", retry.backoff_base,
                             "Backoff after the first failure, doubling each time (half of it jitter)");
  add_duration<milliseconds>(c, "--backoff-max-ms", retry.backoff_max, "Longest backoff");
  add_duration<seconds>(c, "--max-age-s", retry.max_age, "A delivery of an older event is dead");
  c->add_option("--breaker-threshold", breaker.failure_threshold, "Consecutive failures that pause an endpoint")
      ->capture_default_str();
  add_duration<seconds>(c, "--breaker-pause-s", breaker.pause_step, "First pause, and the extension per failed probe round");
  add_duration<seconds>(c, "--breaker-max-pause-s", breaker.max_pause, "Longest pause");
  add_duration<seconds>(c, "--disable-after-s", breaker.disable_after, "Failing continuously this long disables an endpoint");
}

/// The process: shutdown, status updates, retention, the admin listener, notifications, its name.
void add_process_flags(CLI::App* c, run_options& run) {
  using std::chrono::milliseconds;
  add_duration<milliseconds>(c, "--shutdown-grace-ms", run.shutdown_grace, "SIGTERM: time in-flight attempts get to finish");
  add_duration<milliseconds>(c, "--status-interval-ms", run.stream.status_interval, "Standby status update at least this often");
  add_duration<std::chrono::hours>(c, "--give-up-after-h", run.give_up_after,
                                   "An endpoint that has followed the outbox by cursor this long without moving gets what "
                                   "it is owed ended dead as one range (walhook.dead_ranges)")
      ->check(CLI::Range(1, 87600));  // 10 years: an int of hours in SQL
  add_duration<std::chrono::days>(c, "--retention-days", run.retention,
                                  "Outbox rows and finished deliveries are deleted after this")
      ->check(positive);
  c->add_option("--admin-listen", run.admin_listen,
                "Serve the console (/console/), its JSON API (/api/), /metrics (Prometheus), /healthz and /readyz on "
                "HOST:PORT, e.g. localhost:9187 (a non-loopback address needs --admin-token-file)");
  c->add_option("--admin-token-file", run.admin_token_file,
                "File holding the bearer token (at least 16 bytes) that /api/ and /metrics require "
                "(Authorization: Bearer <token>)");
  c->add_option("--admin-tls-cert", run.admin_tls_cert,
                "PEM certificate chain: the admin listener speaks HTTPS (with --admin-tls-key)");
  c->add_option("--admin-tls-key", run.admin_tls_key, "PEM private key of --admin-tls-cert");
  c->add_option("--api-listen", run.api_listen,
                "Serve the tenant API (/v1/, docs/tenant-api.md) on HOST:PORT, apart from the admin listener; each "
                "request carries a tenant's token (walhook tenant token create)");
  c->add_option("--api-tls-cert", run.api_tls_cert, "PEM certificate chain: the tenant API speaks HTTPS (with --api-tls-key)");
  c->add_option("--api-tls-key", run.api_tls_key, "PEM private key of --api-tls-cert");
  c->add_option("--api-database-url", run.api_database_url,
                "The tenant API's connection (a role like walhook_admin of sql/roles.sql); default --database-url");
  c->add_option("--api-rate", run.api_rate, "Tenant API requests per second per token; more get 429 with Retry-After")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 100000.0));
  c->add_option("--api-burst", run.api_burst, "Tenant API requests at once per token")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 100000.0));
  c->add_option("--recent-outcomes", run.recent_outcomes,
                "Finished attempts kept in memory for the console's \"did endpoint X get event Y?\" (0: none)")
      ->capture_default_str();
  c->add_option("--operator-tenant", run.dispatch.notifications.operator_tenant,
                "Tenant walhook publishes its notifications to (walhook.endpoint.*, walhook.delivery.dead); \"\" = "
                "none (contact endpoints still get theirs)")
      ->capture_default_str();
  c->add_option("--notification-budget", run.dispatch.notifications.budget_per_minute,
                "Notifications to the operator tenant per minute at most, about all endpoints together; the rest of "
                "the minute's are summed up in one walhook.endpoints.digest")
      ->capture_default_str()
      ->check(positive);
  c->add_option("--instance-name", run.instance_name, "Name shown to standbys and in pg_stat_activity (default host:pid)");
}

/// Refuses to start (cli_error) where `walhook run` could not work: wal_level, the REPLICATION
/// attribute, the schema and the privileges on it, the shard layout, the publications. Turns the
/// contact endpoints' notifications off when the role may not insert into walhook.outbox and
/// --operator-tenant is "" (saying so).
void preflight(run_options& o) {
  blocking_db db(o.database_url);
  auto level = db.exec("SELECT current_setting('wal_level')");
  if (level.value(0, 0) != "logical")
    throw cli_error(fmt::format("wal_level is '{}': walhook needs wal_level = logical "
                                "(ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL)",
                                level.value(0, 0)));
  auto role = db.exec("SELECT current_user, rolsuper OR rolreplication FROM pg_roles WHERE rolname = current_user");
  if (role.rows() == 0 || role.value(0, 1) != "t")
    throw cli_error(fmt::format("role \"{}\" may not stream a replication slot: it needs the REPLICATION attribute "
                                "(ALTER ROLE \"{}\" REPLICATION)",
                                role.rows() ? role.value(0, 0) : "?", role.rows() ? role.value(0, 0) : "?"));
  const char* missing_privileges = "missing privileges on the walhook tables (see sql/roles.sql for the walhook_relay role)";
  try {
    operations::require_schema(db);
  } catch (const cli_error& e) {
    if (std::string_view(e.what()).find("permission denied") != std::string_view::npos) throw cli_error(missing_privileges);
    throw;
  }
  // Each privilege on its own (has_table_privilege() with a list is true if *any* is held);
  // walhook's writes to endpoints need only status and updated_at (a disable), and secret and
  // secret_grace_until (dropping a rotation's expired secrets).
  auto missing = db.exec(R"sql(
SELECT string_agg(v.privilege || ' on ' || v.tab || coalesce(' (' || v.col || ')', ''), ', '
                  ORDER BY v.tab, v.privilege, v.col)
  FROM (VALUES ('walhook.deliveries', NULL, 'SELECT'), ('walhook.deliveries', NULL, 'INSERT'),
               ('walhook.deliveries', NULL, 'UPDATE'), ('walhook.deliveries', NULL, 'DELETE'),
               ('walhook.endpoint_health', NULL, 'SELECT'), ('walhook.endpoint_health', NULL, 'INSERT'),
               ('walhook.endpoint_health', NULL, 'UPDATE'),
               ('walhook.endpoints', NULL, 'SELECT'), ('walhook.endpoints', 'status', 'UPDATE'),
               ('walhook.endpoints', 'updated_at', 'UPDATE'), ('walhook.endpoints', 'secret', 'UPDATE'),
               ('walhook.endpoints', 'secret_grace_until', 'UPDATE'),
               ('walhook.outbox', NULL, 'SELECT'), ('walhook.outbox', NULL, 'DELETE'),
               ('walhook.slot_progress', NULL, 'SELECT'), ('walhook.slot_progress', NULL, 'INSERT'),
               ('walhook.slot_progress', NULL, 'UPDATE'), ('walhook.slot_progress', NULL, 'DELETE'),
               ('walhook.endpoints_removed', NULL, 'SELECT'), ('walhook.endpoints_removed', NULL, 'DELETE'),
               ('walhook.recoveries', NULL, 'SELECT'), ('walhook.recoveries', NULL, 'INSERT'),
               ('walhook.recoveries', NULL, 'UPDATE'), ('walhook.shard_layout', NULL, 'SELECT'))
         AS v(tab, col, privilege)
 WHERE NOT CASE WHEN v.col IS NULL THEN has_table_privilege(v.tab, v.privilege)
                ELSE has_column_privilege(v.tab, v.col, v.privilege) END)sql");
  if (!missing.is_null(0, 0))
    throw cli_error(fmt::format("{}: {}", missing_privileges, missing.value(0, 0)));
  // Notifications are outbox rows walhook inserts itself (migration 006 grants the columns).
  auto publish = db.exec(R"sql(
SELECT string_agg('INSERT on walhook.outbox (' || c || ')', ', ' ORDER BY c)
  FROM unnest(ARRAY['tenant_id', 'event_type', 'aggregate_id', 'merge_key', 'payload', 'endpoint_id']) AS c
 WHERE NOT has_column_privilege('walhook.outbox', c, 'INSERT'))sql");
  auto& notifications = o.dispatch.notifications;
  if (!publish.is_null(0, 0)) {
    if (!notifications.operator_tenant.empty())
      throw cli_error(fmt::format("{}: {} (walhook publishes its notifications to --operator-tenant \"{}\"; "
                                  "--operator-tenant \"\" turns them off)",
                                  missing_privileges, publish.value(0, 0), notifications.operator_tenant));
    log::warn("preflight.notifications_off",
              {{"missing", std::string(publish.value(0, 0))},
               {"note", "walhook may not insert into walhook.outbox: no notification goes to contact endpoints"}});
    notifications.contacts = false;
  }
  // A walhook of another layout would deliver a second time what the current shards deliver.
  if (const int layout = operations::shard_count(db); layout != o.shard.count)
    throw cli_error(fmt::format("this database is split into {} shard(s) (walhook.shard_layout){}: run {}", layout,
                                o.shard.sharded() ? fmt::format(", not {}", o.shard.count) : "",
                                layout == 1 ? "without --shard" : fmt::format("with --shard K/{}", layout)));
  for (const auto& pub : shard_publications(o.shard)) {
    pg::params p{pub};
    if (db.exec("SELECT 1 FROM pg_publication WHERE pubname = $1", p).rows() == 0)
      throw cli_error(fmt::format("publication \"{}\" does not exist: run `walhook migrate`", pub));
  }
  log::info("preflight.wal_retention", {{"advice", operations::wal_keep_advice(db)}});
}

/// Each attempt in flight is a socket: raise the soft limit on open files to the hard one (the
/// usual soft default, 1,024, is less than the default caps allow) and, if even that is short,
/// shrink the slow pool to fit, saying so.
void fit_open_files(run_options& o) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = std::min<rlim_t>(lim.rlim_max, 1 << 20);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  auto& limits = o.dispatch.limits;
  const std::size_t reserve = 256;  // PostgreSQL, the admin listener, logs, pooled idle connections
  const std::size_t want = limits.max_in_flight + limits.max_slow_in_flight + reserve;
  if (lim.rlim_cur >= want) return;
  const std::size_t room = lim.rlim_cur > limits.max_in_flight + reserve ? lim.rlim_cur - limits.max_in_flight - reserve : 0;
  log::warn("run.open_files_limit", {{"limit", static_cast<std::uint64_t>(lim.rlim_cur)},
                                     {"max_slow_in_flight", static_cast<std::uint64_t>(room)},
                                     {"note", "the open files limit is too low for --max-slow-in-flight: raise it (ulimit -n)"}});
  limits.max_slow_in_flight = room;
}

/// The shard and its slot, the proxy, the extra CA certificates: what the flags name, made concrete.
void resolve(run_options& o, const std::string& shard) {
  o.shard = shard_flag(shard);
  if (o.shard.sharded()) o.slot = shard_slot(o.slot, o.shard);
  if (!o.proxy_url.empty()) {
    std::string why;
    auto proxy = delivery::parse_proxy_url(o.proxy_url, &why);
    if (!proxy) throw cli_error(fmt::format("--proxy {}: {}", delivery::redact_url(o.proxy_url), why));
    o.http.proxy = std::move(*proxy);
  }
  if (o.ca_file.empty()) return;
  auto pem = delivery::read_ca_bundle(o.ca_file);
  if (!pem) {
    throw cli_error(pem.error() == boost::system::errc::invalid_argument
                        ? fmt::format("--ca-file {}: no PEM certificate in it", o.ca_file)
                        : fmt::format("--ca-file {}: cannot read it: {}", o.ca_file, pem.error().message()));
  }
  o.http.extra_ca_pem = std::move(*pem);
}

/// The engine (and the admin listener) on one io_context thread until it stops. The first
/// SIGTERM/SIGINT stops gracefully; a second one during the grace period exits at once.
int serve(run_options options, const admin_access& access, const admin_access& api_access) {
  asio::io_context ioc(1);
  std::string admin_listen = options.admin_listen;
  const std::string api_listen = options.api_listen;
  tenant::api_settings api_settings{
      .database_url = options.api_database_url.empty() ? options.database_url : options.api_database_url,
      .rate = options.api_rate,
      .burst = options.api_burst,
      .slot_base = shard_slot_base(options.slot, options.shard),
      .operator_tenant = options.dispatch.notifications.operator_tenant,
      .tls = api_access.tls != nullptr};
  engine e(ioc.get_executor(), std::move(options));
  std::unique_ptr<admin_server> admin;
  if (!admin_listen.empty()) {
    try {
      admin = std::make_unique<admin_server>(ioc.get_executor(), e, access);
    } catch (const std::exception& err) {
      throw cli_error(err.what());
    }
    log::info("admin.listening", {{"address", admin_listen}, {"bound", access.bind_address},
                                  {"port", static_cast<unsigned>(admin->port())}, {"api_token", !access.token.empty()},
                                  {"tls", access.tls != nullptr}});
  }
  std::unique_ptr<admin_server> api;
  if (!api_listen.empty()) {
    try {
      api = std::make_unique<admin_server>(ioc.get_executor(), e, api_access,
                                           tenant::make_api(ioc.get_executor(), e, std::move(api_settings)));
    } catch (const std::exception& err) {
      throw cli_error(err.what());
    }
    log::info("api.listening", {{"address", api_listen}, {"bound", api_access.bind_address},
                                {"port", static_cast<unsigned>(api->port())}, {"tls", api_access.tls != nullptr}});
  }
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  std::function<void(const boost::system::error_code&, int)> on_signal = [&](const boost::system::error_code& ec,
                                                                              int sig) {
    if (ec) return;
    static int received = 0;
    if (++received > 1) {
      log::warn("signal.forced_exit", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
      std::_Exit(130);
    }
    log::info("signal.received", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
    e.request_stop();
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);
  int code = 1;
  asio::co_spawn(ioc, e.run(), [&](std::exception_ptr ex, int rc) {
    code = rc;
    signals.cancel();
    if (admin) admin->stop();
    if (api) api->stop();
    ioc.stop();
    if (ex) {
      try {
        std::rethrow_exception(ex);
      } catch (const std::exception& err) {
        log::error("run.failed", {{"error", err.what()}});
        code = 1;
      }
    }
  });
  ioc.run();
  return code;
}

/// `walhook run`: preflight checks, then the engine until SIGTERM/SIGINT.
int run(run_flags& f) {
  auto& o = f.run;
  resolve(o, f.shard);
  const admin_access access = check_admin_access(o);  // before anything starts
  const admin_access api_access = check_api_access(o);
  preflight(o);
  fit_open_files(o);
  return serve(std::move(o), access, api_access);
}

}  // namespace

void add_run_flags(CLI::App* cmd, run_flags& f) {
  add_slot_flags(cmd, f);
  add_memory_flags(cmd, f.run);
  add_connection_flags(cmd, f.run);
  add_retry_flags(cmd, f.run);
  add_process_flags(cmd, f.run);
}

command add_run(CLI::App& app) {
  auto f = std::make_shared<run_flags>();
  auto* c = app.add_subcommand("run", "Stream the outbox from the slot and deliver webhooks until SIGTERM");
  add_run_flags(c, *f);
  return {c, [f] {
            try {
              return run(*f);
            } catch (const user_error& e) {
              log::error("run.failed", {{"error", std::string(e.what())}});
              return exit_code_of(e.kind());
            } catch (const std::exception& e) {
              log::error("run.failed", {{"error", std::string(e.what())}});
              return 1;
            }
          }};
}

}  // namespace walhook::relay::cli
