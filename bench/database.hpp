#pragma once
// The PostgreSQL server a benchmark runs against: the one given by --database-url, or a
// throwaway cluster (relay::embedded_postgres, like `walhook demo`) with commit timestamps on,
// durable by default (fsync, synchronous_commit and full_page_writes on, as in production) or,
// with --no-durable, with fsync and full_page_writes off. Every trial gets a fresh database (and,
// for walhook, its own replication slot), dropped afterwards so no slot keeps WAL from one trial
// to the next. The throwaway cluster can be stopped and started mid-trial (the transient
// scenarios restart PostgreSQL under load).
//
// Blocking (libpq, fork/exec): used from the bench's main thread between trials.

#include "relay/demo/embedded_postgres.hpp"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

namespace walhook::bench {

class bench_cluster {
 public:
  /// url "" starts a throwaway cluster, durable (fsync=on, synchronous_commit=on,
  /// full_page_writes=on) unless `durable` is false (fsync=off, full_page_writes=off). Otherwise
  /// the role must be allowed to CREATE DATABASE and to use replication (walhook's needs anyway),
  /// and `durable` is ignored: the server's own settings are reported.
  /// `extra_settings` ("name=value") are added to the throwaway cluster's command line (e.g.
  /// shared_preload_libraries=pg_stat_statements) and named in description(); ignored with a url.
  explicit bench_cluster(const std::string& url, bool durable = true, std::vector<std::string> extra_settings = {});
  ~bench_cluster();

  /// A connection string (libpq key=value) for `database` on this server.
  std::string conninfo(const std::string& database) const;

  /// Drops `name` if it exists (and any replication slot in it), then creates it empty.
  /// Returns its conninfo.
  std::string create_database(const std::string& name);
  /// Drops the database and every replication slot that belongs to it.
  void drop_database(const std::string& name);

  /// The postmaster's pid when the server runs on this host and is visible in /proc, else 0
  /// (then PostgreSQL's CPU and memory are not reported). Changes when the throwaway cluster is
  /// restarted; 0 while it is stopped. Any thread.
  pid_t postmaster_pid() const { return postmaster_.load(); }
  /// CPU seconds of the whole server so far (postmaster, backends, walsenders), every instance
  /// since this object was created (a restarted cluster counts its earlier lives, their stop
  /// included, to within 50 ms); −1 when the server is not on this host.
  double postgres_cpu_seconds() const;
  /// SHOW server_version.
  const std::string& server_version() const { return version_; }
  /// track_commit_timestamp is on: commit times come from the server
  /// (pg_xact_commit_timestamp); otherwise from the client right after COMMIT returns.
  bool commit_timestamps() const { return commit_timestamps_; }
  bool embedded() const { return pg_ != nullptr; }
  /// fsync, synchronous_commit and full_page_writes are all on (as the server reported them).
  bool durable() const { return durable_; }
  /// A short description for the report: where the server is, and whether it is durable
  /// ("durable: fsync=on, synchronous_commit=on, full_page_writes=on" or "NOT durable: fsync=off, …").
  std::string description() const;

  /// Throwaway cluster only (throws std::logic_error otherwise): stops the server like
  /// `pg_ctl stop -m <mode>` ("smart", "fast", "immediate") and waits until it has exited.
  /// Blocking; returns false if it could not be signalled.
  bool stop_server(const std::string& mode);
  /// Throwaway cluster only: starts it again; returns once it accepts connections (false if it
  /// did not start).
  bool start_server();

 private:
  std::unique_ptr<relay::embedded_postgres> pg_;
  std::string base_;  ///< conninfo without dbname
  std::string maintenance_db_ = "postgres";
  std::string host_;
  std::atomic<pid_t> postmaster_{0};
  std::atomic<double> retired_cpu_{0};  ///< CPU of earlier instances of the throwaway cluster
  std::string version_;
  std::string durability_;  ///< "fsync=on, synchronous_commit=on, full_page_writes=on"
  bool durable_ = false;
  bool commit_timestamps_ = false;
  std::vector<std::string> extra_settings_;
};

/// `walhook migrate --database-url <conninfo> [--slot NAME | --no-slot]`; throws with its output
/// on failure.
void walhook_migrate(const std::string& walhook_binary, const std::string& conninfo, const std::string& slot);

/// `walhook reshard --database-url <conninfo> --slot <slot> --from <from> --to <to>` (every
/// walhook of the old layout stopped); throws with its output on failure.
void walhook_reshard(const std::string& walhook_binary, const std::string& conninfo, const std::string& slot, int from, int to);

}  // namespace walhook::bench
