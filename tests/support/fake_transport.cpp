#include "tests/support/fake_transport.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <stdexcept>

namespace walhook::test {
namespace asio = boost::asio;

struct fake_transport::pending {
  explicit pending(asio::any_io_executor ex) : timer(ex, std::chrono::steady_clock::time_point::max()) {}
  call c;
  asio::steady_timer timer;
  delivery::post_result result = delivery::transport_errc::cancelled;
};

fake_transport::fake_transport(asio::any_io_executor ex) : executor_(std::move(ex)) {}
fake_transport::~fake_transport() = default;

std::string fake_transport::call::header(const std::string& name) const {
  for (const auto& [k, v] : request.headers)
    if (k == name) return v;
  return {};
}

asio::awaitable<delivery::post_result> fake_transport::async_post(
    const std::string& pool_key, const delivery::http_target& target, const delivery::http_request& request) {
  auto p = std::make_shared<pending>(executor_);
  p->c = {pool_key, target, request, false};
  if (shut_down) co_return delivery::transport_errc::cancelled;
  calls_.push_back(p);
  co_await p->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return p->result;
}

std::size_t fake_transport::calls() const { return calls_.size(); }

const fake_transport::call& fake_transport::at(std::size_t i) const { return calls_.at(i)->c; }

std::size_t fake_transport::waiting() const {
  std::size_t n = 0;
  for (const auto& p : calls_) n += !p->c.answered;
  return n;
}

void fake_transport::answer(std::size_t i, unsigned status, std::string retry_after) {
  auto& p = *calls_.at(i);
  if (p.c.answered) throw std::logic_error("call answered twice");
  delivery::http_response r;
  r.status = status;
  r.retry_after = std::move(retry_after);
  p.result = r;
  p.c.answered = true;
  p.timer.cancel();
}

void fake_transport::answer_with_body(std::size_t i, unsigned status, std::string body) {
  auto& p = *calls_.at(i);
  if (p.c.answered) throw std::logic_error("call answered twice");
  delivery::http_response r;
  r.status = status;
  if (p.c.request.keep_body) r.body = std::move(body);
  p.result = r;
  p.c.answered = true;
  p.timer.cancel();
}

void fake_transport::fail(std::size_t i, delivery::transport_errc e) {
  auto& p = *calls_.at(i);
  if (p.c.answered) throw std::logic_error("call answered twice");
  p.result = e;
  p.c.answered = true;
  p.timer.cancel();
}

void fake_transport::answer_all(unsigned status) {
  for (std::size_t i = 0; i < calls_.size(); ++i)
    if (!calls_[i]->c.answered) answer(i, status);
}

void fake_transport::shutdown() {
  shut_down = true;
  for (std::size_t i = 0; i < calls_.size(); ++i)
    if (!calls_[i]->c.answered) fail(i, delivery::transport_errc::cancelled);
}

}  // namespace walhook::test
