#pragma once
// One relay under test, driven the same way whatever its kind:
//   walhook — the real `walhook run` binary as a child process (so kill -9 is real), or one
//             per shard (`walhook run --shard K/N`, driver_options::shards);
//   polling — the classic polling relay (bench/polling_relay.hpp), in the bench process;
//   notify  — the same, woken by LISTEN/NOTIFY.
// The trial runner prepares the database, starts the relay, waits until it is ready, loads it,
// and reads its CPU and memory from /proc.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

namespace walhook::bench {

enum class relay_kind { walhook, polling, notify };
std::string to_string(relay_kind k);
/// "walhook" | "polling" | "notify"; false on anything else.
bool parse_relay_kind(const std::string& text, relay_kind& out);

struct driver_options {
  std::string walhook_binary;
  std::vector<std::string> walhook_args;  ///< extra `walhook run` flags
  std::chrono::milliseconds deadline{5000};  ///< HTTP deadline of every relay
  int poll_workers = 16;
  int poll_batch = 10;
  std::chrono::milliseconds poll_interval{500};
  std::string log_path;  ///< walhook's output goes here (with shards: "<stem>-shard<K>of<N>.log", one per process)
  /// walhook only: one `walhook run --shard K/N` process per shard, K = 0 … N−1. prepare() splits
  /// the freshly migrated database with `walhook reshard --from 1 --to N` (which is how an
  /// unsharded database becomes N shards). 1: one unsharded walhook (plain slot and publications,
  /// no row filter), as always.
  int shards = 1;
};

/// One process of the relay (walhook: one per shard), as the driver last saw it.
struct relay_process {
  int shard = 0;          ///< K of --shard K/N; 0 when unsharded
  std::string slot;       ///< the replication slot it streams
  std::string log_path;   ///< its stdout + stderr (JSON log lines)
  pid_t pid = 0;          ///< 0 while it is not running
  double cpu_s = 0;       ///< CPU seconds so far, every instance included (killed and restarted ones too)
  long peak_rss_kib = 0;  ///< VmHWM, the largest of its instances
};

class relay_driver {
 public:
  virtual ~relay_driver() = default;
  virtual relay_kind kind() const = 0;
  /// Schema for this relay in a fresh database: `walhook migrate` (with or without a slot)
  /// plus the relay's own tables. Blocking.
  virtual void prepare(const std::string& conninfo, const std::string& slot) = 0;
  /// The generator's transaction (see generator_options::insert_sql).
  virtual std::string insert_sql() const = 0;
  /// Starts the relay (endpoints must exist); with shards, every shard's process not running.
  virtual void start() = 0;
  /// Waits until it streams (with shards: every slot is active) / polls.
  virtual bool wait_ready(std::chrono::milliseconds timeout) = 0;
  /// Stops it gracefully (SIGTERM / stop(); every shard's process at once), bounded.
  virtual void stop() = 0;
  /// CPU seconds used so far, every instance included (a walhook killed and restarted counts
  /// both; with shards, every shard's process). For in-process relays: their thread.
  virtual double cpu_seconds() = 0;
  /// Peak RSS of the relay process (KiB; with shards the largest of them); 0 for in-process
  /// relays (they share the bench process).
  virtual long peak_rss_kib() = 0;
  /// SELECT returning the pending deliveries of endpoint $1 in the relay's delivery table.
  virtual std::string pending_sql() const = 0;
  /// SELECT returning (rows, delivered rows) of the relay's delivery table: what it wrote back.
  virtual std::string rows_written_sql() const = 0;
  /// The replication slot, "" if the relay has none (with shards: the first shard's).
  virtual std::string slot() const { return {}; }
  /// Every replication slot the relay streams (one per shard); empty if it has none.
  virtual std::vector<std::string> slots() const {
    auto s = slot();
    return s.empty() ? std::vector<std::string>{} : std::vector<std::string>{s};
  }
  /// The relay's processes with their CPU and memory so far (walhook only; empty for the
  /// in-process relays). Reads /proc.
  virtual std::vector<relay_process> processes() { return {}; }
  /// kill -9 (walhook only; every shard's process); returns false if not supported.
  virtual bool kill9() { return false; }
  /// The relay's own counters for the report ("polls=…", "sessions=…"), free text.
  virtual std::string notes() const { return {}; }
  /// Messages of failures the relay reported (bench-side errors, walhook error log lines).
  virtual std::string errors() const { return {}; }
};

std::unique_ptr<relay_driver> make_driver(relay_kind kind, const driver_options& options);

}  // namespace walhook::bench
