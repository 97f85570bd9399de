#include "bench/sink.hpp"

#include "bench/proc_stats.hpp"
#include "delivery/signing.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

namespace walhook::bench {

sink::sink()
    : ioc_(std::make_unique<boost::asio::io_context>(1)),
      receiver_(std::make_unique<relay::receiver>(ioc_->get_executor())) {
  receiver_->keep_bodies(false);
  receiver_->on_request([this](const relay::received_request& r) {
    seen_.fetch_add(1, std::memory_order_relaxed);
    if (r.status < 200 || r.status >= 300) return;
    if (answered_.insert(r.webhook_id + " " + r.path).second) ok_.fetch_add(1, std::memory_order_relaxed);
    else duplicates_.fetch_add(1, std::memory_order_relaxed);
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
  b.delay = spec.behaviour.delay;
  b.error_rate = spec.behaviour.error_rate;
  b.never_answer = spec.behaviour.never;
  if (auto keys = delivery::parse_secrets(spec.secret)) b.keys = *keys;
  receiver_->set_behaviour(spec.path, std::move(b));
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
