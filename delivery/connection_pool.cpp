#include "delivery/connection_pool.hpp"

#include <boost/asio/ip/tcp.hpp>

namespace walhook::delivery {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using boost::system::error_code;

beast::tcp_stream& connection::tcp() { return secure ? beast::get_lowest_layer(*secure) : *plain; }

void connection::close() { tcp().close(); }

bool connection::looks_alive() {
  auto& sock = tcp().socket();
  if (!sock.is_open()) return false;
  error_code ec;
  sock.non_blocking(true, ec);
  if (ec) return false;
  char byte = 0;
  const std::size_t n = sock.receive(asio::buffer(&byte, 1), tcp::socket::message_peek, ec);
  error_code ignored;
  sock.non_blocking(false, ignored);
  if (ec == asio::error::would_block || ec == asio::error::try_again) return true;
  if (ec) return false;  // eof, reset
  // TLS may legitimately carry post-handshake records (session tickets) while idle.
  return n > 0 && secure.has_value();
}

connection_pool::connection_pool(const clock_source& clock, std::size_t max_idle_per_key,
                                 std::chrono::seconds idle_timeout)
    : clock_(clock), max_idle_per_key_(max_idle_per_key), idle_timeout_(idle_timeout) {}

std::unique_ptr<connection> connection_pool::take_idle(const std::string& pool_key, const origin_key& origin) {
  const auto it = idle_.find(pool_key);
  if (it == idle_.end()) return nullptr;
  auto& queue = it->second;
  const auto now = clock_.steady_now();
  // Oldest at the front: prune the expired ones, then take the freshest (least likely stale).
  while (!queue.empty() && now - queue.front()->idle_since >= idle_timeout_) {
    queue.front()->close();
    queue.pop_front();
  }
  std::unique_ptr<connection> found;
  while (!queue.empty() && !found) {
    auto c = std::move(queue.back());
    queue.pop_back();
    if (c->origin == origin && c->looks_alive()) {
      found = std::move(c);
    } else {
      c->close();
    }
  }
  if (queue.empty()) idle_.erase(it);
  return found;
}

void connection_pool::release(const std::string& pool_key, std::unique_ptr<connection> c) {
  if (max_idle_per_key_ == 0 || idle_timeout_.count() <= 0) {
    c->close();
    return;
  }
  c->tcp().expires_never();
  c->idle_since = clock_.steady_now();
  auto& queue = idle_[pool_key];
  queue.push_back(std::move(c));
  while (queue.size() > max_idle_per_key_) {
    queue.front()->close();
    queue.pop_front();
  }
}

void connection_pool::forget(const std::string& pool_key) {
  const auto it = idle_.find(pool_key);
  if (it == idle_.end()) return;
  for (auto& c : it->second) c->close();
  idle_.erase(it);
}

void connection_pool::close_all() {
  for (auto& [key, queue] : idle_) {
    for (auto& c : queue) c->close();
  }
  idle_.clear();
}

std::size_t connection_pool::idle_count(const std::string& pool_key) const {
  const auto it = idle_.find(pool_key);
  return it == idle_.end() ? 0 : it->second.size();
}

}  // namespace walhook::delivery
