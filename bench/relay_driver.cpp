#include "bench/relay_driver.hpp"

#include "bench/database.hpp"
#include "bench/polling_relay.hpp"
#include "bench/proc_stats.hpp"
#include "relay/blocking_db.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

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

/// `walhook run` as a child process. Its output (JSON log lines) goes to a file.
class walhook_driver final : public relay_driver {
 public:
  explicit walhook_driver(driver_options o) : options_(std::move(o)) {}
  ~walhook_driver() override {
    if (pid_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  relay_kind kind() const override { return relay_kind::walhook; }

  void prepare(const std::string& conninfo, const std::string& slot) override {
    conninfo_ = conninfo;
    slot_ = slot;
    walhook_migrate(options_.walhook_binary, conninfo, slot);
  }

  std::string insert_sql() const override {
    return R"sql(
INSERT INTO walhook.outbox (tenant_id, event_type, payload)
SELECT u.t, u.e, u.p FROM unnest($1::text[], $2::jsonb[], $3::text[]) AS u(t, p, e)
RETURNING id, tenant_id, event_type)sql";
  }

  void start() override {
    std::vector<std::string> argv{options_.walhook_binary, "run", "--database-url", conninfo_, "--slot", slot_,
                                  "--allow-private-networks", "--deadline-ms", std::to_string(options_.deadline.count())};
    argv.insert(argv.end(), options_.walhook_args.begin(), options_.walhook_args.end());
    pid_ = relay::spawn_process(argv, options_.log_path);  // dies with the bench
  }

  bool wait_ready(std::chrono::milliseconds timeout) override {
    relay::blocking_db db(conninfo_, "walhook-bench");
    pg::params p{slot_};
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      auto r = db.exec("SELECT active FROM pg_replication_slots WHERE slot_name = $1", p);
      if (r.rows() == 1 && r.value(0, 0) == "t") return true;
      if (!alive()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  void stop() override {
    if (!pid_) return;
    cpu_before_ += process_cpu_seconds(pid_);
    peak_ = std::max(peak_, bench::peak_rss_kib(pid_));
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 300; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = 0;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

  bool kill9() override {
    if (!pid_) return false;
    cpu_before_ += process_cpu_seconds(pid_);
    peak_ = std::max(peak_, bench::peak_rss_kib(pid_));
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
    return true;
  }

  double cpu_seconds() override { return cpu_before_ + (pid_ ? process_cpu_seconds(pid_) : 0); }
  long peak_rss_kib() override { return std::max(peak_, pid_ ? bench::peak_rss_kib(pid_) : 0L); }
  std::string pending_sql() const override {
    return "SELECT count(*) FROM walhook.deliveries WHERE endpoint_id = $1 AND status = 'pending'";
  }
  std::string rows_written_sql() const override {
    return "SELECT count(*), count(*) FILTER (WHERE status = 'delivered') FROM walhook.deliveries";
  }
  std::string slot() const override { return slot_; }

  std::string errors() const override {
    std::ifstream in(options_.log_path);
    std::string line, out;
    int n = 0;
    while (std::getline(in, line)) {
      if (line.find("\"level\":\"error\"") == std::string::npos) continue;
      if (n++ < 5) out += line + "\n";
    }
    if (n > 5) out += fmt::format("… {} error lines in all ({})\n", n, options_.log_path);
    return out;
  }

 private:
  bool alive() {
    if (!pid_) return false;
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = 0;
      return false;
    }
    return true;
  }

  driver_options options_;
  std::string conninfo_;
  std::string slot_;
  pid_t pid_ = 0;
  double cpu_before_ = 0;
  long peak_ = 0;
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
