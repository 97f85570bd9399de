#include "bench/ingest_load.hpp"

#include "bench/proc_stats.hpp"
#include "delivery/signing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <random>
#include <stdexcept>

namespace walhook::bench {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
/// How recent the event a duplicate repeats is: one of the last this many first sends.
constexpr std::uint32_t duplicate_window = 2000;
/// Ladder: the schedule is kept when 99 % of a step's requests were queued this close to due
/// (a generator that cannot keep up falls behind by seconds; a busy machine delays a timer by tens
/// of milliseconds, which the latency already shows).
constexpr std::int64_t schedule_slack_us = 250'000;
/// A keep-alive connection idle this long is opened afresh before its next request: the
/// receiver may have closed it (walhook ingest after 10 s), and a request written into a closed
/// connection would fail though the receiver never saw it.
constexpr std::int64_t stale_after_us = 5'000'000;

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  const auto at = v.begin() + static_cast<std::ptrdiff_t>(std::min(rank, v.size() - 1));
  std::nth_element(v.begin(), at, v.end());
  return *at;
}

}  // namespace

std::string ingest_load::event_id(std::uint32_t n) { return fmt::format("evt-{}", n); }

std::string ingest_load::body_of(std::uint32_t n, std::size_t bytes) {
  std::string body = fmt::format(R"({{"type":"order.paid","id":"evt-{}","data":{{"order":{},"amount":{},"note":")", n, n,
                                 1000 + n % 9000);
  constexpr std::string_view tail = "\"}}";
  if (bytes > body.size() + tail.size()) body.append(bytes - body.size() - tail.size(), static_cast<char>('a' + n % 26));
  body += tail;
  return body;
}

ingest_load::ingest_load(ingest_load_options options) : options_(std::move(options)) { plan(); }

/// Due times and events of the whole schedule; duplicates drawn from a seeded generator, so
/// every variant and run gets the same sequence.
void ingest_load::plan() {
  std::mt19937 rng(options_.seed);
  std::uniform_real_distribution<double> coin(0, 1);
  std::int64_t offset_us = 0;
  for (std::size_t s = 0; s < options_.schedule.size(); ++s) {
    step_first_.push_back(requests_.size());
    const auto& step = options_.schedule[s];
    const auto n = static_cast<std::int64_t>(step.events_per_second * static_cast<double>(step.duration.count()) / 1000.0);
    for (std::int64_t j = 0; j < n; ++j) {
      ingest_request r;
      r.due_us = offset_us + static_cast<std::int64_t>(static_cast<double>(j) * 1e6 / step.events_per_second);
      r.step = static_cast<std::uint16_t>(s);
      if (events_ > 0 && coin(rng) < options_.duplicates) {
        r.duplicate = true;
        r.event = events_ - 1 - static_cast<std::uint32_t>(rng() % std::min(duplicate_window, events_));
      } else {
        r.event = events_++;
      }
      requests_.push_back(r);
    }
    offset_us += step.duration.count() * 1000;
  }
  step_first_.push_back(requests_.size());
}

/// The event loop of one run(): the scheduler, the connections, the judge and the sampler, all
/// on the calling thread.
struct ingest_load::engine {
  explicit engine(ingest_load& l) : load(l), o(l.options_), scheduler_timer(io) {}
  ingest_load& load;
  const ingest_load_options& o;
  asio::io_context io{1};
  asio::steady_timer scheduler_timer;
  steady::time_point start;
  delivery::signing_key key;
  tcp::endpoint at;
  std::vector<beast::tcp_stream*> streams;
  std::deque<std::size_t> queue;          ///< due requests waiting for a connection
  std::vector<asio::steady_timer*> idle;  ///< the timers idle connections park on
  std::size_t next = 0, end = 0;          ///< next request to queue; end of the schedule
  std::int64_t queued = 0, completed = 0, answered_ok = 0;
  bool scheduling_done = false, abandoned = false;

  std::int64_t now_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - start).count();
  }
  void wake_one() {
    if (idle.empty()) return;
    idle.back()->cancel();
    idle.pop_back();
  }
  void wake_all() {
    for (auto* t : idle) t->cancel();
    idle.clear();
  }
  bool all_done() const { return scheduling_done && completed == queued; }
  void fail(ingest_request& r, const std::string& why) {
    r.status = 0;
    ++completed;
    if (load.first_error_.empty()) load.first_error_ = why;
  }

  asio::awaitable<void> schedule() {
    while (next < end) {
      const auto now = now_us();
      while (next < end && load.requests_[next].due_us <= now) {
        load.requests_[next].queued_us = now;
        queue.push_back(next++);
        ++queued;
        wake_one();
      }
      if (next >= end) break;
      scheduler_timer.expires_at(start + std::chrono::microseconds(load.requests_[next].due_us));
      co_await scheduler_timer.async_wait(tuple_awaitable);
    }
    scheduling_done = true;
    load.schedule_end_us_ = now_us();
    wake_all();
  }

  /// One request on one keep-alive connection (reconnecting if it was closed).
  asio::awaitable<void> send(beast::tcp_stream& stream, beast::flat_buffer& buffer, ingest_request& r,
                             std::int64_t& last_used_us) {
    if (stream.socket().is_open() && now_us() - last_used_us > stale_after_us) stream.close();
    last_used_us = now_us();
    if (!stream.socket().is_open()) {
      buffer.clear();
      stream.expires_after(o.request_timeout);
      auto [cec] = co_await stream.async_connect(at, tuple_awaitable);
      if (cec) {
        fail(r, "connect: " + cec.message());
        co_return;
      }
      stream.socket().set_option(tcp::no_delay(true));
    }
    const std::string id = event_id(r.event);
    http::request<http::string_body> req{http::verb::post, o.path, 11};
    req.body() = body_of(r.event, o.body_bytes);
    const auto timestamp =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.set("webhook-id", id);
    req.set("webhook-timestamp", std::to_string(timestamp));
    req.set("webhook-signature", delivery::signature_header(std::span(&key, 1), id, timestamp, req.body()));
    req.prepare_payload();
    r.sent_us = now_us();
    stream.expires_after(o.request_timeout);
    auto [wec, wn] = co_await http::async_write(stream, req, tuple_awaitable);
    if (wec) {
      stream.close();
      fail(r, "write: " + wec.message());
      co_return;
    }
    http::response<http::string_body> res;
    auto [rec, rn] = co_await http::async_read(stream, buffer, res, tuple_awaitable);
    if (rec) {
      stream.close();
      fail(r, "read: " + rec.message());
      co_return;
    }
    r.answered_us = now_us();
    r.status = static_cast<std::uint16_t>(res.result_int());
    const auto& b = res.body();
    r.answer = b.find("\"accepted\"") != std::string::npos    ? answer_kind::accepted
               : b.find("\"duplicate\"") != std::string::npos ? answer_kind::duplicate
                                                               : answer_kind::other;
    if (r.ok()) ++answered_ok;
    ++completed;
    if (!res.keep_alive()) stream.close();
  }

  asio::awaitable<void> connection(beast::tcp_stream& stream) {
    beast::flat_buffer buffer;
    asio::steady_timer park(io);
    std::int64_t last_used_us = 0;
    for (;;) {
      while (queue.empty() && !scheduling_done && !abandoned) {
        park.expires_at(steady::time_point::max());
        idle.push_back(&park);
        co_await park.async_wait(tuple_awaitable);
        std::erase(idle, &park);
      }
      if (queue.empty() || abandoned) co_return;
      const std::size_t k = queue.front();
      queue.pop_front();
      co_await send(stream, buffer, load.requests_[k], last_used_us);
    }
  }

  /// Ladder: each step judged `bound` after its end; the first not sustained ends the schedule.
  asio::awaitable<void> judge() {
    asio::steady_timer t(io);
    std::int64_t step_end_us = 0;
    for (std::size_t s = 0; s + 1 < load.step_first_.size(); ++s) {
      step_end_us += o.schedule[s].duration.count() * 1000;
      t.expires_at(start + std::chrono::microseconds(step_end_us) + o.bound);
      co_await t.async_wait(tuple_awaitable);
      load.verdicts_.push_back(verdict(s));
      if (!load.verdicts_.back().sustained) {
        end = next;
        scheduler_timer.cancel();
        co_return;
      }
    }
  }

  ingest_step_verdict verdict(std::size_t s) const {
    ingest_step_verdict v;
    v.rate = o.schedule[s].events_per_second;
    const auto now = now_us();
    const auto bound_us = std::chrono::duration_cast<std::chrono::microseconds>(o.bound).count();
    std::vector<double> latency, late;
    for (std::size_t k = load.step_first_[s]; k < load.step_first_[s + 1]; ++k) {
      const auto& r = load.requests_[k];
      ++v.requests;
      const auto l = (r.answered_us >= 0 ? r.answered_us : now) - r.due_us;
      if (r.ok()) ++v.answered_ok;
      if (r.ok() && l <= bound_us) ++v.within_bound;
      latency.push_back(static_cast<double>(l) / 1000.0);
      late.push_back(static_cast<double>((r.queued_us >= 0 ? r.queued_us : now) - r.due_us) / 1000.0);
    }
    v.p99_ms = percentile(latency, 0.99);
    v.queue_late_p99_ms = percentile(late, 0.99);
    const bool answered = v.within_bound == v.requests;
    const bool kept = v.queue_late_p99_ms * 1000.0 <= static_cast<double>(schedule_slack_us);
    v.sustained = answered && kept;
    if (!answered)
      v.why = fmt::format("{} of {} not answered 2xx within {} ms", v.requests - v.within_bound, v.requests, o.bound.count());
    else if (!kept)
      v.why = fmt::format("schedule not kept: 1 % of the requests queued ≥ {:.0f} ms late (generator or machine saturated)",
                          v.queue_late_p99_ms);
    return v;
  }

  /// Samples the outstanding requests; after the schedule, ends the drain when all are answered
  /// or `drain` has passed (then the connections are closed and what is left counts as failed).
  asio::awaitable<void> sample() {
    asio::steady_timer t(io);
    while (!all_done()) {
      load.samples_.push_back({static_cast<double>(now_us()) / 1e6, queued - completed, answered_ok});
      if (scheduling_done && !abandoned &&
          now_us() > load.schedule_end_us_ + std::chrono::duration_cast<std::chrono::microseconds>(o.drain).count())
        abandon();
      t.expires_after(250ms);
      co_await t.async_wait(tuple_awaitable);
    }
    load.samples_.push_back({static_cast<double>(now_us()) / 1e6, 0, answered_ok});
  }

  void abandon() {
    abandoned = true;
    for (auto k : queue) fail(load.requests_[k], "not sent before the drain ended");
    queue.clear();
    for (auto* s : streams) s->close();
    wake_all();
  }
};

void ingest_load::run() {
  engine e(*this);
  auto key = delivery::parse_secret(options_.secret);
  if (!key) throw std::runtime_error("ingest load: the source's secret is not a whsec_ secret");
  e.key = *key;
  e.at = tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), options_.port);
  std::vector<std::unique_ptr<beast::tcp_stream>> streams;
  for (int i = 0; i < std::max(1, options_.connections); ++i) {
    auto s = std::make_unique<beast::tcp_stream>(e.io);
    boost::system::error_code ec;
    s->socket().connect(e.at, ec);
    if (ec) throw std::runtime_error(fmt::format("ingest load: cannot connect to 127.0.0.1:{}: {}", options_.port, ec.message()));
    s->socket().set_option(tcp::no_delay(true));
    e.streams.push_back(s.get());
    streams.push_back(std::move(s));
  }
  auto record = [this](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const std::exception& ex) {
      if (first_error_.empty()) first_error_ = std::string("generator: ") + ex.what();
    }
  };
  const double cpu0 = this_thread_cpu_seconds();
  e.start = steady::now();
  e.end = requests_.size();
  for (auto* s : e.streams) asio::co_spawn(e.io, e.connection(*s), record);
  asio::co_spawn(e.io, e.schedule(), record);
  if (options_.ladder) asio::co_spawn(e.io, e.judge(), record);
  asio::co_spawn(e.io, e.sample(), record);
  e.io.run();
  drain_end_us_ = e.now_us();
  cpu_seconds_ = this_thread_cpu_seconds() - cpu0;
}

}  // namespace walhook::bench
