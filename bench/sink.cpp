#include "bench/sink.hpp"

#include "bench/amqp_receiver.hpp"
#include "bench/nats_receiver.hpp"
#include "bench/proc_stats.hpp"
#include "delivery/signing.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <stdexcept>

namespace walhook::bench {

http_sink::http_sink()
    : ioc_(std::make_unique<boost::asio::io_context>(1)),
      receiver_(std::make_unique<relay::receiver>(ioc_->get_executor())) {
  receiver_->keep_bodies(false);
  receiver_->on_request([this](const relay::received_request& r) {
    seen_.fetch_add(1, std::memory_order_relaxed);
    if (r.status < 200 || r.status >= 300) return;
    if (answered_.insert(r.webhook_id + " " + r.path).second) {
      ok_.fetch_add(1, std::memory_order_relaxed);
      if (auto it = ok_by_path_.find(r.path); it != ok_by_path_.end()) it->second->fetch_add(1, std::memory_order_relaxed);
    } else {
      duplicates_.fetch_add(1, std::memory_order_relaxed);
    }
  });
  thread_ = std::thread([this] {
    auto guard = boost::asio::make_work_guard(*ioc_);
    ioc_->run();
  });
  thread_handle_ = thread_.native_handle();
}

http_sink::~http_sink() {
  stop();
  receiver_.reset();
}

void http_sink::configure(const endpoint_spec& spec) {
  relay::receiver_behaviour b;
  b.status = spec.behaviour.status;
  b.delay = spec.behaviour.delay;
  b.error_rate = spec.behaviour.error_rate;
  b.never_answer = spec.behaviour.never;
  if (auto keys = delivery::parse_secrets(spec.secret)) b.keys = *keys;
  ok_by_path_.try_emplace(spec.path, std::make_unique<std::atomic<std::int64_t>>(0));
  {
    std::lock_guard lock(behaviours_mutex_);
    behaviours_[spec.path] = b;
  }
  receiver_->set_behaviour(spec.path, std::move(b));
}

void http_sink::set_status(const std::string& path, unsigned status) {
  relay::receiver_behaviour b;
  {
    std::lock_guard lock(behaviours_mutex_);
    auto it = behaviours_.find(path);
    if (it == behaviours_.end()) throw std::logic_error("http_sink::set_status: path not configured: " + path);
    it->second.status = status;
    b = it->second;
  }
  receiver_->set_behaviour(path, std::move(b));
}

std::int64_t http_sink::answered_ok(const std::string& path) const {
  auto it = ok_by_path_.find(path);
  return it == ok_by_path_.end() ? 0 : it->second->load(std::memory_order_relaxed);
}

std::string http_sink::url(const std::string& path) const { return receiver_->url(path); }

std::vector<relay::received_request> http_sink::requests() const { return receiver_->requests(); }

std::size_t http_sink::max_concurrent(const std::string& path) const { return receiver_->max_concurrent(path); }

double http_sink::cpu_seconds() const {
  return stopped_ ? 0 : thread_cpu_seconds(thread_handle_);
}

void http_sink::stop() {
  if (stopped_) return;
  stopped_ = true;
  receiver_->stop();
  ioc_->stop();
  if (thread_.joinable()) thread_.join();
}

std::unique_ptr<sink> make_sink(delivery::sink_kind kind) {
  switch (kind) {
    case delivery::sink_kind::http: return std::make_unique<http_sink>();
    case delivery::sink_kind::nats: return std::make_unique<nats_receiver>();
    case delivery::sink_kind::amqp: return std::make_unique<amqp_receiver>();
  }
  throw std::logic_error("make_sink: unknown sink kind");
}

}  // namespace walhook::bench
