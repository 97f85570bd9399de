#include "tests/support/fake_store.hpp"

namespace walhook::test {

void fake_store::enqueue(sql::write w, durable_callback on_durable) { queued.emplace_back(std::move(w), std::move(on_durable)); }

void fake_store::commit(std::size_t n) {
  n = std::min(n, queued.size());
  std::vector<std::pair<sql::write, durable_callback>> batch(std::make_move_iterator(queued.begin()),
                                                             std::make_move_iterator(queued.begin() + static_cast<long>(n)));
  queued.erase(queued.begin(), queued.begin() + static_cast<long>(n));
  for (auto& [w, cb] : batch) {
    durable.push_back(std::move(w));
    if (cb) cb();
  }
}

boost::asio::awaitable<boost::system::result<std::vector<sql::claimed_delivery>>> fake_store::claim_due(
    std::vector<sql::claim_quota> quotas) {
  claim_calls.push_back(quotas);
  std::vector<sql::claimed_delivery> out;
  for (const auto& q : quotas) {
    int taken = 0;
    for (auto it = claimable.begin(); it != claimable.end() && taken < q.limit;) {
      if (it->endpoint_id == q.endpoint_id) {
        out.push_back(std::move(*it));
        it = claimable.erase(it);
        ++taken;
      } else {
        ++it;
      }
    }
  }
  co_return out;
}

boost::asio::awaitable<boost::system::result<std::vector<sql::due_time>>> fake_store::next_due(
    std::vector<std::int64_t> endpoint_ids) {
  due_calls.push_back(endpoint_ids);
  if (during_next_due) during_next_due();
  std::vector<sql::due_time> out;
  for (auto id : endpoint_ids)
    if (auto it = due.find(id); it != due.end()) out.push_back({id, it->second});
  co_return out;
}

}  // namespace walhook::test
