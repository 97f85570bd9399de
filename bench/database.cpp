#include "bench/database.hpp"

#include "bench/proc_stats.hpp"
#include "relay/operations/blocking_db.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace walhook::bench {
namespace {

std::string quote_value(const std::string& v) {
  std::string out = "'";
  for (char c : v) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace

bench_cluster::bench_cluster(const std::string& url, bool durable, std::vector<std::string> extra_settings) {
  std::string source = url;
  if (url.empty()) {
    relay::embedded_postgres_options o;
    // Commit-to-receipt latency uses the server's own commit timestamps.
    o.settings = {"track_commit_timestamp=on"};
    // Overrides of embedded_postgres's fsync=off / full_page_writes=off defaults (later -c wins):
    // production settings, so commits, crash recovery and restarts cost what they cost there.
    if (durable) o.settings.insert(o.settings.end(), {"fsync=on", "synchronous_commit=on", "full_page_writes=on"});
    o.settings.insert(o.settings.end(), extra_settings.begin(), extra_settings.end());
    extra_settings_ = std::move(extra_settings);
    pg_ = std::make_unique<relay::embedded_postgres>(o);
    source = pg_->url();
  }
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(source.c_str(), &err);
  if (!opts) {
    std::string msg = err ? err : "invalid connection string";
    PQfreemem(err);
    throw std::runtime_error("--database-url: " + relay::one_line(msg));
  }
  for (auto* o = opts; o->keyword; ++o) {
    if (!o->val || !*o->val) continue;
    std::string k = o->keyword;
    if (k == "dbname") {
      maintenance_db_ = o->val;
      continue;
    }
    if (k == "host" || k == "hostaddr") host_ = o->val;
    base_ += k + "=" + quote_value(o->val) + " ";
  }
  PQconninfoFree(opts);

  relay::blocking_db db(conninfo(maintenance_db_), "walhook-bench");
  version_ = std::string(db.exec("SHOW server_version").value(0, 0));
  commit_timestamps_ = db.exec("SHOW track_commit_timestamp").value(0, 0) == "on";
  {
    auto show = [&](const char* name) { return std::string(db.exec(std::string("SHOW ") + name).value(0, 0)); };
    const std::string fsync = show("fsync"), sync_commit = show("synchronous_commit"), fpw = show("full_page_writes");
    durability_ = fmt::format("fsync={}, synchronous_commit={}, full_page_writes={}", fsync, sync_commit, fpw);
    // Every synchronous_commit level but off waits for the local WAL flush (local, remote_write,
    // remote_apply wait for that and possibly more).
    durable_ = fsync == "on" && fpw == "on" && sync_commit != "off";
  }
  if (pg_) {
    postmaster_ = pg_->pid();
  } else {
    // A server on this host: the backend's parent is the postmaster.
    pid_t backend = static_cast<pid_t>(std::stol(std::string(db.exec("SELECT pg_backend_pid()").value(0, 0))));
    if (process_name(backend) == "postgres") {
      pid_t parent = parent_of(backend);
      if (parent > 0 && process_name(parent) == "postgres") postmaster_ = parent;
    }
  }
}

bench_cluster::~bench_cluster() = default;

std::string bench_cluster::conninfo(const std::string& database) const {
  return base_ + "dbname=" + quote_value(database);
}

std::string bench_cluster::create_database(const std::string& name) {
  drop_database(name);
  relay::blocking_db db(conninfo(maintenance_db_), "walhook-bench");
  db.exec("CREATE DATABASE " + pg::quote_identifier(name));
  return conninfo(name);
}

void bench_cluster::drop_database(const std::string& name) {
  relay::blocking_db db(conninfo(maintenance_db_), "walhook-bench");
  pg::params p{name};
  // A slot still in use (its walsender exiting) cannot be dropped yet: terminate and retry.
  for (int i = 0; i < 50; ++i) {
    db.exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active", p);
    try {
      db.exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1", p);
      break;
    } catch (const relay::cli_error&) {
      ::usleep(100 * 1000);
    }
  }
  db.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", p);
  db.exec("DROP DATABASE IF EXISTS " + pg::quote_identifier(name) + " WITH (FORCE)");
}

std::string bench_cluster::description() const {
  const std::string durability = (durable_ ? "durable: " : "NOT durable: ") + durability_;
  if (pg_) {
    std::string extra;
    for (const auto& x : extra_settings_) extra += "; " + x;
    return fmt::format("throwaway PostgreSQL {} on this host ({}; track_commit_timestamp=on{})", version_, durability, extra);
  }
  return fmt::format("PostgreSQL {} at {}{} ({}; track_commit_timestamp={})", version_, host_.empty() ? "local socket" : host_,
                     postmaster_.load() ? " (on this host)" : "", durability, commit_timestamps_ ? "on" : "off");
}

double bench_cluster::postgres_cpu_seconds() const {
  if (!pg_ && postmaster_.load() == 0) return -1;
  const pid_t pm = postmaster_.load();
  return retired_cpu_.load() + (pm ? tree_cpu_seconds(pm) : 0);
}

bool bench_cluster::stop_server(const std::string& mode) {
  if (!pg_) throw std::logic_error("stop_server: only the throwaway cluster can be stopped (no --database-url)");
  // The instance's CPU is sampled while it stops: a shutdown can take long and cost a lot (a
  // walsender waiting for a confirmation spins for up to wal_sender_timeout). What it uses in the
  // last 50 ms before it exits is not counted.
  const pid_t pm = postmaster_.load();
  std::atomic<bool> done{false};
  std::atomic<double> last{pm ? tree_cpu_seconds(pm) : 0.0};
  std::thread watch([&] {
    while (!done.load()) {
      if (pm) {
        if (double cpu = tree_cpu_seconds(pm); cpu > last.load()) last = cpu;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const bool ok = pg_->stop(mode);
  done = true;
  watch.join();
  postmaster_ = 0;
  retired_cpu_ = retired_cpu_.load() + last.load();
  return ok;
}

bool bench_cluster::start_server() {
  if (!pg_) throw std::logic_error("start_server: only the throwaway cluster can be started (no --database-url)");
  bool ok = pg_->start();
  postmaster_ = pg_->pid();
  return ok;
}

void walhook_migrate(const std::string& walhook_binary, const std::string& conninfo, const std::string& slot) {
  std::vector<std::string> argv{walhook_binary, "migrate", "--database-url", conninfo};
  if (slot.empty()) argv.push_back("--no-slot");
  else {
    argv.push_back("--slot");
    argv.push_back(slot);
  }
  std::string out;
  if (relay::run_process(argv, "", out) != 0) throw std::runtime_error("walhook migrate failed: " + out);
}

void walhook_reshard(const std::string& walhook_binary, const std::string& conninfo, const std::string& slot, int from, int to) {
  std::string out;
  if (relay::run_process({walhook_binary, "reshard", "--database-url", conninfo, "--slot", slot, "--from", std::to_string(from),
                          "--to", std::to_string(to)},
                         "", out) != 0)
    throw std::runtime_error("walhook reshard failed: " + out);
}

}  // namespace walhook::bench
