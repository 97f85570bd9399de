#pragma once
// Integration-test harness: a real PostgreSQL 15 per test executable, the walhook binary run as
// a child process (so faults are real: SIGKILL, SIGTERM), a receiver on its own thread, and SQL
// helpers. Everything binds to loopback and port 0 and stops by itself.

#include "relay/demo/embedded_postgres.hpp"
#include "relay/demo/receiver.hpp"
#include "relay/operations/blocking_db.hpp"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace walhook::test {

/// The cluster of this test executable, started (and migrated with `walhook migrate`) on first use.
relay::embedded_postgres& cluster();

/// A fresh database in the shared cluster, migrated with `walhook migrate --slot <name>` (slot
/// names are cluster-wide, so each database gets its own); returns its URL.
std::string fresh_database(const std::string& name);

/// Path of the walhook binary under test.
std::string walhook_binary();

/// Runs `walhook <args>` to completion; returns the exit code and fills stdout+stderr.
int run_walhook(const std::vector<std::string>& args, std::string& output);

/// `walhook run` (or any long-running walhook command) as a child process. It owns the process
/// and its log file: movable, not copyable.
class walhook_process {
 public:
  /// `name` says which walhook a failure message is about ("standby", "shard2", …).
  explicit walhook_process(std::vector<std::string> args, std::string name = "walhook");
  walhook_process(walhook_process&& other) noexcept;
  walhook_process& operator=(walhook_process&& other) noexcept;  ///< SIGKILLs the process it held
  ~walhook_process();  ///< SIGKILL if still running

  void start();
  pid_t pid() const { return pid_; }
  /// The port its admin listener bound (`admin.listening` in its log); 0 if none yet.
  unsigned short admin_port() const;
  /// The port its tenant API bound (`api.listening` in its log); 0 if none yet.
  unsigned short api_port() const;
  bool running();
  /// Exit code once reaped by running()/wait() (128 + signal if killed), -1 before.
  int exit_code() const { return exit_code_; }
  /// Sends a signal (SIGTERM, SIGKILL, …).
  void signal(int sig);
  /// Waits for exit; returns the exit code (128 + signal if killed), or -1 on timeout.
  int wait(std::chrono::milliseconds timeout);
  /// The clean stop at the end of a test: SIGTERM (unless signal() sent one already: a second
  /// SIGTERM is walhook's forced exit), then wait(timeout). Any result but 0 MESSAGEs the name,
  /// the result and the last 16 KB of the log. Returns wait()'s result for the test to check:
  /// `CHECK(walhook.stop() == 0)`.
  int stop(std::chrono::milliseconds timeout = std::chrono::seconds{30});
  /// SIGKILL and reap.
  void kill9();
  /// The process's output so far (stderr JSON log lines + stdout).
  std::string log() const;
  /// The last `bytes` of log() (all of it if shorter), for failure messages.
  std::string log_tail(std::size_t bytes = 8000) const;
  /// Lines of the log containing `needle`.
  std::size_t count_in_log(const std::string& needle) const;
  /// Peak resident set size so far (VmHWM from /proc), in KiB; 0 if not running.
  long peak_rss_kib() const;

 private:
  std::vector<std::string> args_;
  std::string name_;
  std::string log_path_;  ///< empty once moved from
  pid_t pid_ = 0;
  int exit_code_ = -1;
  bool sigterm_sent_ = false;
  void reaped(int status);
  void release();  ///< SIGKILL if running, remove the log file
};

/// A receiver on its own io_context thread.
class receiver_thread {
 public:
  receiver_thread();
  ~receiver_thread();
  relay::receiver& operator*() { return *receiver_; }
  relay::receiver* operator->() { return receiver_.get(); }

 private:
  boost::asio::io_context ioc_;
  std::unique_ptr<relay::receiver> receiver_;
  std::thread thread_;
};

/// Makes a path of the receiver accept requests and never answer them (a hung customer).
void never_answer(receiver_thread& rcv, const std::string& path);

/// Polls `pred` until true or the timeout; returns its last value. For conditions owned by
/// another process (PostgreSQL, walhook) that cannot notify the test.
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds every = std::chrono::milliseconds{50});

/// Runs one statement and returns the first column of the first row ("" if none).
std::string query_value(relay::blocking_db& db, const std::string& sql, const pg::params& params = {});

/// Adds an endpoint with SQL; returns its id.
long long add_endpoint(relay::blocking_db& db, const std::string& tenant, const std::string& url,
                       const std::string& secret, const std::vector<std::string>& event_types = {},
                       int max_concurrency = 4, const std::string& ordering = "none");

/// `walhook run` arguments for tests: slot, loopback allowed, short backoff.
std::vector<std::string> run_args(const std::string& url, const std::string& slot, std::vector<std::string> extra = {});

}  // namespace walhook::test

namespace walhook::test {

/// One event a publisher committed.
struct published_event {
  std::string id;
  std::string tenant;
  std::string type;
  std::string lsn_after_commit;  ///< pg_current_wal_lsn() right after COMMIT (≥ the commit's end)
  std::chrono::system_clock::time_point committed_at;
};

/// Publishes events at a steady rate from its own thread and connection, as an application
/// would (walhook.publish in a transaction). Survives PostgreSQL restarts: a failed transaction
/// is retried on a new connection.
class publisher {
 public:
  struct options {
    std::string url;
    std::vector<std::string> tenants{"t1"};
    std::vector<std::string> types{"order.created"};
    double rate_per_second = 1000;
    int events_per_transaction = 1;
    long total = 1000;
  };
  explicit publisher(options o);
  ~publisher();
  void start();
  /// Waits until all events are committed (or timeout); returns whether they were.
  bool join(std::chrono::milliseconds timeout);
  void stop();
  std::vector<published_event> events() const;
  long committed() const;
  long failures() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Statistics of a latency sample in milliseconds.
struct latency_summary {
  double p50 = 0, p90 = 0, p99 = 0, max = 0;
  std::size_t n = 0;
};
latency_summary summarize(std::vector<double> ms);

}  // namespace walhook::test

namespace walhook::test {
/// GET http://127.0.0.1:<port><path> (blocking, 5 s); returns {status, body}, status 0 on failure.
std::pair<unsigned, std::string> http_get(unsigned short port, const std::string& path);
}  // namespace walhook::test

namespace walhook::test {

/// What integration tests start with: a fresh migrated database with its own slot, a connection
/// to it, a receiver, and `walhook run` on them (start_walhook()).
struct scenario {
  explicit scenario(const std::string& slot_name);
  std::string slot;
  std::string url;
  relay::blocking_db db;
  receiver_thread rcv;

  /// The first column of the first row of `sql` ("" if none).
  std::string value(const std::string& sql, const pg::params& p = {});
  /// Publishes one event with walhook.publish(); returns its id.
  std::string publish(const std::string& tenant, const std::string& type, const std::string& data = "{}",
                      const std::optional<std::string>& merge_key = {}, const std::optional<std::string>& aggregate = {});
  /// True while a walhook streams the slot.
  bool streaming();
  /// The slot's confirmed position has reached `lsn` (text).
  bool acknowledged(const std::string& lsn);
  /// Requests the receiver got on `path` answered with `status` (0: any).
  std::vector<relay::received_request> received(const std::string& path, unsigned status = 200);
  /// Starts `walhook run` on this database and slot (run_args(url, slot, extra)) and returns it
  /// running, called `name` in failure messages. It does not wait for anything: each test waits
  /// for what it needs (streaming(), a log line, a standby's wait). Stop it with stop().
  walhook_process start_walhook(std::vector<std::string> extra = {}, std::string name = "walhook");
};

}  // namespace walhook::test
