#include "bench/sink.hpp"

#include "bench/proc_stats.hpp"
#include "delivery/signing.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <stdexcept>

namespace walhook::bench {

sink::sink()
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

sink::~sink() {
  stop();
  receiver_.reset();
}

void sink::configure(const endpoint_spec& spec) {
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

void sink::set_status(const std::string& path, unsigned status) {
  relay::receiver_behaviour b;
  {
    std::lock_guard lock(behaviours_mutex_);
    auto it = behaviours_.find(path);
    if (it == behaviours_.end()) throw std::logic_error("sink::set_status: path not configured: " + path);
    it->second.status = status;
    b = it->second;
  }
  receiver_->set_behaviour(path, std::move(b));
}

std::int64_t sink::answered_ok(const std::string& path) const {
  auto it = ok_by_path_.find(path);
  return it == ok_by_path_.end() ? 0 : it->second->load(std::memory_order_relaxed);
}

std::string sink::url(const std::string& path) const { return receiver_->url(path); }

std::vector<relay::received_request> sink::requests() const { return receiver_->requests(); }

std::size_t sink::max_concurrent(const std::string& path) const { return receiver_->max_concurrent(path); }

double sink::cpu_seconds() const {
  return stopped_ ? 0 : thread_cpu_seconds(thread_handle_);
}

void sink::stop() {
  if (stopped_) return;
  stopped_ = true;
  receiver_->stop();
  ioc_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace walhook::bench
