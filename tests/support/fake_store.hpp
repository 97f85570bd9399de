#pragma once
// A state store that keeps writes in memory until the test commits them, and answers claims
// and due-time questions from rows the test sets up. Enough for the dispatcher's unit tests:
// what is written, in which order, and when each write becomes durable. (The SQL itself is
// tested against a real PostgreSQL in tests/integration/state_store.cpp.)
//
// Thread affinity: the io_context the test runs.

#include "sql/store.hpp"

#include <functional>
#include <map>
#include <utility>
#include <vector>

namespace walhook::test {

class fake_store final : public sql::store {
 public:
  void enqueue(sql::write w, durable_callback on_durable = {}) override;
  std::size_t backlog() const override { return queued.size(); }

  boost::asio::awaitable<boost::system::result<std::vector<sql::claimed_delivery>>> claim_due(
      std::vector<sql::claim_quota> quotas) override;
  boost::asio::awaitable<boost::system::result<std::vector<sql::due_time>>> next_due(
      std::vector<std::int64_t> endpoint_ids) override;

  /// Commits the first `n` queued writes (all by default): they move to `durable`, their
  /// callbacks run in order.
  void commit(std::size_t n = static_cast<std::size_t>(-1));

  /// Queued writes of one kind (not yet durable), in order.
  template <class W>
  std::vector<W> queued_of() const {
    std::vector<W> out;
    for (const auto& [w, cb] : queued)
      if (const auto* x = std::get_if<W>(&w)) out.push_back(*x);
    return out;
  }

  std::vector<std::pair<sql::write, durable_callback>> queued;  ///< not yet durable
  std::vector<sql::write> durable;                              ///< committed, in order

  std::vector<sql::claimed_delivery> claimable;          ///< rows claim_due() hands out (removed when claimed)
  std::vector<std::vector<sql::claim_quota>> claim_calls;  ///< every claim_due() call
  std::map<std::int64_t, std::chrono::milliseconds> due;  ///< next_due() answers for these endpoints
  std::vector<std::vector<std::int64_t>> due_calls;       ///< every next_due() call
  /// Runs inside next_due(), before it answers: a write that commits while the query runs.
  std::function<void()> during_next_due;
};

}  // namespace walhook::test
