#pragma once
// A throwaway PostgreSQL cluster in a temporary directory (walhook demo, tests, bench):
// initdb, then the postmaster as a child process, wal_level = logical, listening on 127.0.0.1 on
// a free port. When the caller is root, the server runs as the `postgres` user (initdb refuses
// root). The postmaster gets SIGQUIT if this process dies (PR_SET_PDEATHSIG), so a crashed demo
// or test never leaves a server behind; the destructor stops it and removes the directory.
//
// With `standby_of`, the cluster is instead a streaming physical standby of another one
// (pg_basebackup -R), which promote() turns into a primary: failover tests (it_failover).
//
// Blocking (fork/exec and waits): call it before the event loop runs, or from test code.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

namespace walhook::relay {

class embedded_postgres;

struct embedded_postgres_options {
  /// Extra `-c name=value` settings, after walhook's defaults (wal_level=logical, fsync=off, …).
  std::vector<std::string> settings;
  /// Keep the directory after stop (for debugging).
  bool keep = false;
  /// A running cluster to copy instead of running initdb: `pg_basebackup -R -X stream` from it
  /// over loopback (initdb's trust pg_hba allows replication connections there), so this one
  /// starts as its hot standby with the same system identifier, streaming its WAL without a
  /// replication slot (on its own port and directory, with walhook's default settings plus
  /// `settings`). The primary only needs to run while the copy is made.
  const embedded_postgres* standby_of = nullptr;
};

class embedded_postgres {
 public:
  /// initdb (or pg_basebackup) + start. Throws std::runtime_error with the tool's output on
  /// failure (fatal setup).
  explicit embedded_postgres(embedded_postgres_options options = {});
  ~embedded_postgres();
  embedded_postgres(const embedded_postgres&) = delete;
  embedded_postgres& operator=(const embedded_postgres&) = delete;

  /// "postgresql://postgres@127.0.0.1:<port>/postgres"
  std::string url(const std::string& database = "postgres") const;
  int port() const { return port_; }
  const std::string& directory() const { return dir_; }
  /// Server log file (for test failure messages).
  std::string log_path() const { return dir_ + "/server.log"; }

  /// Stops the server like `pg_ctl stop -m <mode>`: "smart" (SIGTERM), "fast" (SIGINT) or
  /// "immediate" (SIGQUIT: no checkpoint, crash recovery at the next start). Waits for it.
  bool stop(const std::string& mode = "fast");
  /// Starts the server again on the same port and directory; waits until it accepts connections.
  bool start();
  /// stop(mode) then start(), like `pg_ctl restart -m <mode>`.
  bool restart(const std::string& mode = "fast");
  /// A standby becomes a primary (`SELECT pg_promote()`, waiting up to 60 s): true once it
  /// accepts writes.
  bool promote();
  /// The postmaster's pid (0 when stopped).
  pid_t pid() const { return pid_; }
  bool running() const { return running_; }

  /// Runs SQL through psql (blocking, for setup and assertions). Returns stdout; throws on error.
  std::string psql(const std::string& sql, const std::string& database = "postgres") const;

 private:
  std::string bin(const std::string& tool) const;
  std::vector<std::string> server_arguments() const;

  embedded_postgres_options options_;
  std::string bindir_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = 0;
  bool running_ = false;
};

/// Runs argv (argv[0] searched in PATH), optionally as `user` (when root), with stdout+stderr
/// captured. Returns the exit status (-1 if it could not run) and fills `output`.
int run_process(const std::vector<std::string>& argv, const std::string& user, std::string& output,
                const std::string& cwd = {});

/// Starts argv (argv[0] a path) in the background with stdout+stderr appended to `log_path`; the
/// child gets SIGKILL if this process dies (PR_SET_PDEATHSIG), so tests and benchmarks never
/// leave it behind. Returns its pid; throws std::runtime_error if fork fails.
pid_t spawn_process(const std::vector<std::string>& argv, const std::string& log_path);

/// A TCP port on 127.0.0.1 that was free a moment ago.
int free_tcp_port();

}  // namespace walhook::relay
