#include "bench/relay_driver.hpp"

#include "bench/database.hpp"
#include "bench/polling_relay.hpp"
#include "bench/proc_stats.hpp"
#include "relay/core/shard.hpp"
#include "relay/operations/blocking_db.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace walhook::bench {
namespace {

/// `walhook run` as a child process, or one per shard (`--shard K/N`). Their output (JSON log
/// lines) goes to a file per process.
class walhook_driver final : public relay_driver {
 public:
  explicit walhook_driver(driver_options o) : options_(std::move(o)) {}
  ~walhook_driver() override {
    for (auto& p : procs_)
      if (p.info.pid) {
        ::kill(p.info.pid, SIGKILL);
        ::waitpid(p.info.pid, nullptr, 0);
      }
  }

  relay_kind kind() const override { return relay_kind::walhook; }

  void prepare(const std::string& conninfo, const std::string& slot) override {
    conninfo_ = conninfo;
    base_slot_ = slot;
    walhook_migrate(options_.walhook_binary, conninfo, slot);
    const int n = std::max(1, options_.shards);
    // `walhook migrate` made the unsharded slot; reshard replaces it by one slot per shard.
    if (n > 1) walhook_reshard(options_.walhook_binary, conninfo, slot, 1, n);
    procs_.clear();
    for (int k = 0; k < n; ++k) {
      proc p;
      p.info.shard = k;
      p.info.slot = n > 1 ? relay::shard_slot(slot, {k, n}) : slot;
      p.info.log_path = n > 1 ? shard_log_path(options_.log_path, k, n) : options_.log_path;
      if (n > 1) ::unlink(p.info.log_path.c_str());
      procs_.push_back(std::move(p));
    }
  }

  std::string insert_sql() const override {
    return R"sql(
INSERT INTO walhook.outbox (tenant_id, event_type, payload)
SELECT u.t, u.e, u.p FROM unnest($1::text[], $2::jsonb[], $3::text[]) AS u(t, p, e)
RETURNING id, tenant_id, event_type)sql";
  }

  void start() override {
    const int n = static_cast<int>(procs_.size());
    for (auto& p : procs_) {
      if (p.info.pid) continue;
      std::vector<std::string> argv{options_.walhook_binary, "run", "--database-url", conninfo_, "--slot", base_slot_,
                                    "--allow-private-networks", "--deadline-ms", std::to_string(options_.deadline.count())};
      if (n > 1) argv.insert(argv.end(), {"--shard", fmt::format("{}/{}", p.info.shard, n)});
      argv.insert(argv.end(), options_.walhook_args.begin(), options_.walhook_args.end());
      p.info.pid = relay::spawn_process(argv, p.info.log_path);  // dies with the bench
    }
  }

  bool wait_ready(std::chrono::milliseconds timeout) override {
    relay::blocking_db db(conninfo_, "walhook-bench");
    pg::params p{text_array(slots())};
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      auto r = db.exec("SELECT count(*) FROM pg_replication_slots WHERE slot_name = ANY ($1::text[]) AND active", p);
      if (std::stoul(std::string(r.value(0, 0))) == procs_.size()) return true;
      for (auto& q : procs_)
        if (!alive(q)) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  void stop() override {
    // Every shard at once: SIGTERM, then up to 15 s for all of them, then SIGKILL.
    for (auto& p : procs_)
      if (p.info.pid) {
        retire(p);
        ::kill(p.info.pid, SIGTERM);
      }
    for (int i = 0; i < 300; ++i) {
      bool any = false;
      for (auto& p : procs_)
        if (p.info.pid && ::waitpid(p.info.pid, nullptr, WNOHANG) == p.info.pid) p.info.pid = 0;
        else any = any || p.info.pid != 0;
      if (!any) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (auto& p : procs_)
      if (p.info.pid) {
        ::kill(p.info.pid, SIGKILL);
        ::waitpid(p.info.pid, nullptr, 0);
        p.info.pid = 0;
      }
  }

  bool kill9() override {
    bool any = false;
    for (auto& p : procs_)
      if (p.info.pid) {
        retire(p);
        ::kill(p.info.pid, SIGKILL);
        ::waitpid(p.info.pid, nullptr, 0);
        p.info.pid = 0;
        any = true;
      }
    return any;
  }

  double cpu_seconds() override {
    double s = 0;
    for (auto& p : procs_) s += p.cpu_before + (p.info.pid ? process_cpu_seconds(p.info.pid) : 0);
    return s;
  }
  long peak_rss_kib() override {
    long m = 0;
    for (auto& p : procs_) m = std::max({m, p.info.peak_rss_kib, p.info.pid ? bench::peak_rss_kib(p.info.pid) : 0L});
    return m;
  }
  std::vector<relay_process> processes() override {
    std::vector<relay_process> out;
    for (auto& p : procs_) {
      relay_process r = p.info;
      r.cpu_s = p.cpu_before + (p.info.pid ? process_cpu_seconds(p.info.pid) : 0);
      r.peak_rss_kib = std::max(p.info.peak_rss_kib, p.info.pid ? bench::peak_rss_kib(p.info.pid) : 0L);
      out.push_back(std::move(r));
    }
    return out;
  }
  std::string pending_sql() const override {
    return "SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'pending'";
  }
  std::string rows_written_sql() const override {
    return "SELECT count(*), count(*) FILTER (WHERE status = 'delivered') FROM walhook.deliveries";
  }
  std::string slot() const override { return procs_.empty() ? base_slot_ : procs_.front().info.slot; }
  std::vector<std::string> slots() const override {
    std::vector<std::string> out;
    for (const auto& p : procs_) out.push_back(p.info.slot);
    return out;
  }

  std::string errors() const override {
    std::string out;
    for (const auto& p : procs_) {
      std::ifstream in(p.info.log_path);
      std::string line;
      int n = 0;
      const std::string who = procs_.size() > 1 ? fmt::format("shard {}: ", p.info.shard) : "";
      while (std::getline(in, line)) {
        if (line.find("\"level\":\"error\"") == std::string::npos) continue;
        if (n++ < 5) out += who + line + "\n";
      }
      if (n > 5) out += fmt::format("{}… {} error lines in all ({})\n", who, n, p.info.log_path);
    }
    return out;
  }

 private:
  struct proc {
    relay_process info;     ///< pid 0 while not running; peak_rss_kib of earlier instances
    double cpu_before = 0;  ///< CPU of earlier instances
  };

  /// "<stem>-shard<K>of<N>.log" for log path "<stem>.log".
  static std::string shard_log_path(const std::string& path, int k, int n) {
    const std::string suffix = ".log";
    const bool has = path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
    return fmt::format("{}-shard{}of{}.log", has ? path.substr(0, path.size() - suffix.size()) : path, k, n);
  }
  /// A text[] literal of slot names (which are plain identifiers).
  static std::string text_array(const std::vector<std::string>& v) {
    std::string out = "{";
    for (const auto& x : v) out += (out.size() > 1 ? "," : "") + x;
    return out + "}";
  }
  /// Keeps the CPU and peak RSS of an instance about to end.
  static void retire(proc& p) {
    p.cpu_before += process_cpu_seconds(p.info.pid);
    p.info.peak_rss_kib = std::max(p.info.peak_rss_kib, bench::peak_rss_kib(p.info.pid));
  }
  static bool alive(proc& p) {
    if (!p.info.pid) return false;
    if (::waitpid(p.info.pid, nullptr, WNOHANG) == p.info.pid) {
      p.info.pid = 0;
      return false;
    }
    return true;
  }

  driver_options options_;
  std::string conninfo_;
  std::string base_slot_;  ///< `--slot`: the slot, or the stem of the shards' slots
  std::vector<proc> procs_;
};

/// The classic relay, in the bench process.
class polling_driver final : public relay_driver {
 public:
  polling_driver(driver_options o, bool notify) : options_(std::move(o)), notify_(notify) {}

  relay_kind kind() const override { return notify_ ? relay_kind::notify : relay_kind::polling; }

  void prepare(const std::string& conninfo, const std::string&) override {
    conninfo_ = conninfo;
    walhook_migrate(options_.walhook_binary, conninfo, "");  // same outbox and endpoints, no slot
    relay::blocking_db db(conninfo, "walhook-bench");
    auto script = [&](const std::string& sql) {  // several statements: the simple query protocol
      PGresult* r = PQexec(db.native(), sql.c_str());
      bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
      std::string err = ok ? "" : relay::one_line(PQresultErrorMessage(r));
      PQclear(r);
      if (!ok) throw std::runtime_error("bench schema: " + err);
    };
    script(polling_relay::schema_sql());
    if (notify_) script(polling_relay::notify_schema_sql());
  }

  std::string insert_sql() const override { return polling_relay::insert_sql(); }

  void start() override {
    polling_options o;
    o.conninfo = conninfo_;
    o.notify = notify_;
    o.workers = options_.poll_workers;
    o.batch = options_.poll_batch;
    o.idle_interval = options_.poll_interval;
    o.http.total_deadline = options_.deadline;
    o.http.allow_private_networks = true;
    o.broker.allow_private_networks = true;
    relay_ = std::make_unique<polling_relay>(o);
    relay_->start();
  }

  bool wait_ready(std::chrono::milliseconds timeout) override {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      if (relay_->ready()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  void stop() override {
    if (relay_) relay_->stop();
  }
  double cpu_seconds() override { return relay_ ? relay_->cpu_seconds() : 0; }
  long peak_rss_kib() override { return 0; }
  std::string pending_sql() const override {
    return "SELECT count(*) FROM bench.deliveries WHERE endpoint_id = $1 AND status = 'pending'";
  }
  std::string rows_written_sql() const override {
    return "SELECT count(*), count(*) FILTER (WHERE status = 'delivered') FROM bench.deliveries";
  }
  std::string notes() const override {
    if (!relay_) return {};
    auto s = relay_->stats();
    return fmt::format("polls={} empty_polls={} batches={} no_slot_or_rows={} attempts={} failed={} notifications={} db_errors={}",
                       s.polls, s.empty_polls, s.batches, s.busy_slots, s.attempts, s.failed, s.notifications, s.errors);
  }
  std::string errors() const override { return relay_ ? relay_->first_error() : std::string(); }

 private:
  driver_options options_;
  bool notify_;
  std::string conninfo_;
  std::unique_ptr<polling_relay> relay_;
};

}  // namespace

std::string to_string(relay_kind k) {
  switch (k) {
    case relay_kind::walhook: return "walhook";
    case relay_kind::polling: return "polling";
    case relay_kind::notify: return "notify";
  }
  return "?";
}

bool parse_relay_kind(const std::string& text, relay_kind& out) {
  if (text == "walhook") out = relay_kind::walhook;
  else if (text == "polling") out = relay_kind::polling;
  else if (text == "notify") out = relay_kind::notify;
  else return false;
  return true;
}

std::unique_ptr<relay_driver> make_driver(relay_kind kind, const driver_options& options) {
  if (kind == relay_kind::walhook) return std::make_unique<walhook_driver>(options);
  return std::make_unique<polling_driver>(options, kind == relay_kind::notify);
}

}  // namespace walhook::bench
