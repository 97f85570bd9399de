#pragma once
// The `ingest` scenario's sender (bench/ingest.hpp): webhooks POSTed to one receiver, open loop,
// signed like a Standard Webhooks sender (delivery::signature_header over
// "{webhook-id}.{webhook-timestamp}.{body}", a fresh timestamp on every send).
//
// Open loop (no coordinated omission): request k is due at a time fixed by the schedule alone.
// Due requests wait in one queue for the first free keep-alive connection (HTTP/1.1 carries one
// request at a time per connection); a stalled receiver holds its connections, the queue grows,
// and the wait shows in the latency = answer time − due time, never as a slower schedule.
//
// A share of the requests (`duplicates`) repeats an earlier event byte for byte (same id, same
// body: a sender's retry), picked among the last 2,000 first sends, so it may even race its
// original.
//
// Ladder mode: each step of the schedule is judged `bound` after its end: sustained when every
// request of the step was answered 2xx within `bound` of its due time and the schedule was kept
// (99 % of the step's requests queued within 250 ms of their due time: otherwise the generator
// itself, or the machine, fell behind). The first step that is not sustained ends the schedule.
//
// A connection idle for more than 5 s is opened afresh before it is used again (the receiver may
// have closed it), so a stale keep-alive connection never costs a request.
//
// Blocking: run() drives its own io_context on the calling thread (one thread: its CPU is the
// generator's).

#include "bench/load_generator.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace walhook::bench {

struct ingest_load_options {
  unsigned short port = 0;          ///< the receiver, on 127.0.0.1
  std::string path = "/in/bench";
  std::string secret;               ///< the source's whsec_… secret
  std::vector<rate_step> schedule;  ///< requests/s per step
  int connections = 64;             ///< keep-alive connections, opened before the schedule starts
  double duplicates = 0.1;          ///< share of requests that repeat an earlier event
  std::size_t body_bytes = 256;     ///< each body's size (JSON, padded)
  bool ladder = false;              ///< judge each step; stop at the first that is not sustained
  std::chrono::milliseconds bound{1000};        ///< ladder: answer within this of the due time
  std::chrono::milliseconds drain{30000};       ///< after the schedule: wait for answers at most this long
  std::chrono::milliseconds request_timeout{30000};  ///< a sender's timeout: no answer by then = failed
  std::uint32_t seed = 1;
};

/// What the receiver answered (its JSON "status"; the naive receiver answers the same words).
enum class answer_kind : std::uint8_t { none, accepted, duplicate, other };

/// One request of the schedule. Times are µs after the load's start (steady clock).
struct ingest_request {
  std::int64_t due_us = 0;
  std::int64_t queued_us = -1;    ///< handed to the connections; −1: never (the ladder stopped first)
  std::int64_t sent_us = -1;      ///< a connection began writing it
  std::int64_t answered_us = -1;  ///< its answer was read; −1: none (connection error, timeout)
  std::uint32_t event = 0;        ///< event number n: id "evt-n", body ingest_load::body_of(n)
  std::uint16_t status = 0;       ///< HTTP status, 0: no answer
  answer_kind answer = answer_kind::none;
  bool duplicate = false;         ///< repeats an earlier event (a sender's retry)
  std::uint16_t step = 0;         ///< index into the schedule
  bool ok() const { return status >= 200 && status < 300; }
};

/// A ladder step as judged.
struct ingest_step_verdict {
  double rate = 0;
  std::int64_t requests = 0, answered_ok = 0, within_bound = 0;
  double p99_ms = 0;          ///< latency p99 of the step (unanswered: counted as the judging time)
  double queue_late_p99_ms = 0;  ///< generator lateness: queued − due
  bool sustained = false;
  std::string why;            ///< what failed, "" if sustained
};

/// Outstanding requests (queued, not yet answered or failed), sampled every 250 ms.
struct ingest_sample {
  double t_s = 0;
  std::int64_t outstanding = 0;
  std::int64_t answered_ok = 0;
};

class ingest_load {
 public:
  explicit ingest_load(ingest_load_options options);

  /// Connects, runs the schedule (the ladder stops it early), waits for the answers (bounded by
  /// `drain`). Once; blocking. Throws std::runtime_error if no connection could be opened.
  void run();

  /// Every request of the schedule, in due order (after run(): with their answers).
  const std::vector<ingest_request>& requests() const { return requests_; }
  /// Ladder mode: the steps judged, in order (the last one not sustained, unless all were).
  const std::vector<ingest_step_verdict>& verdicts() const { return verdicts_; }
  const std::vector<ingest_sample>& samples() const { return samples_; }
  /// µs since the start when the schedule ended (early if the ladder stopped it).
  std::int64_t schedule_end_us() const { return schedule_end_us_; }
  /// µs since the start when run() gave up waiting or everything was answered.
  std::int64_t drain_end_us() const { return drain_end_us_; }
  /// CPU seconds of the thread that ran run().
  double cpu_seconds() const { return cpu_seconds_; }
  /// The first transport error seen ("" if none): what unanswered requests met.
  const std::string& first_error() const { return first_error_; }
  /// Events first sent (ids evt-0 … evt-(n−1) exist in the schedule).
  std::uint32_t events() const { return events_; }

  /// "evt-<n>"
  static std::string event_id(std::uint32_t n);
  /// Event n's body: {"type":"order.paid","id":"evt-n","data":{…}} padded to `bytes` (at least
  /// what the fields need). The same n always gives the same bytes (so a repeat is a duplicate).
  static std::string body_of(std::uint32_t n, std::size_t bytes);

 private:
  struct engine;
  void plan();

  ingest_load_options options_;
  std::vector<ingest_request> requests_;
  std::vector<std::size_t> step_first_;  ///< first request of each step, and the total at the end
  std::vector<ingest_step_verdict> verdicts_;
  std::vector<ingest_sample> samples_;
  std::int64_t schedule_end_us_ = 0, drain_end_us_ = 0;
  double cpu_seconds_ = 0;
  std::string first_error_;
  std::uint32_t events_ = 0;
};

}  // namespace walhook::bench
