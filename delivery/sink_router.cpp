#include "delivery/sink_router.hpp"

namespace walhook::delivery {

void sink_router::add(sink_kind kind, std::unique_ptr<transport> sink) {
  sinks_[static_cast<std::size_t>(kind)] = std::move(sink);
}

bool sink_router::has(sink_kind kind) const {
  return kind == sink_kind::http || sinks_[static_cast<std::size_t>(kind)] != nullptr;
}

boost::asio::awaitable<post_result> sink_router::async_post(const std::string& pool_key, const http_target& target,
                                                            const http_request& request) {
  co_return co_await http_.async_post(pool_key, target, request);
}

boost::asio::awaitable<post_result> sink_router::async_publish(const std::string& pool_key, const broker_target& target,
                                                               const broker_message& message,
                                                               std::chrono::milliseconds deadline) {
  transport* sink = sinks_[static_cast<std::size_t>(target.kind)].get();
  if (!sink || target.kind == sink_kind::http) co_return transport_error(transport_errc::sink_unavailable);
  co_return co_await sink->async_publish(pool_key, target, message, deadline);
}

void sink_router::forget(const std::string& pool_key) {
  http_.forget(pool_key);
  for (auto& s : sinks_)
    if (s) s->forget(pool_key);
}

void sink_router::shutdown() {
  http_.shutdown();
  for (auto& s : sinks_)
    if (s) s->shutdown();
}

void sink_router::cancel_all() {
  http_.cancel_all();
  for (auto& s : sinks_)
    if (s) s->cancel_all();
}

}  // namespace walhook::delivery
