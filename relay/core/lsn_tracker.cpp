#include "relay/core/lsn_tracker.hpp"

#include <algorithm>

namespace walhook::relay {

lsn_tracker::ticket lsn_tracker::begin() {
  if (txns_.empty()) first_ = next_;
  txns_.push_back({});
  return next_++;
}

lsn_tracker::txn* lsn_tracker::find(ticket t) {
  if (t < first_ || t >= first_ + txns_.size()) return nullptr;
  return &txns_[t - first_];
}

const lsn_tracker::txn* lsn_tracker::find(ticket t) const {
  if (t < first_ || t >= first_ + txns_.size()) return nullptr;
  return &txns_[t - first_];
}

bool lsn_tracker::settled(ticket t) const {
  if (t & detached_bit) return true;
  const txn* x = find(t);
  return !x || (x->committed && x->outstanding == 0);
}

void lsn_tracker::hold(ticket t) {
  if (t & detached_bit) {
    if (auto it = detached_.find(t); it != detached_.end()) ++it->second;
    return;
  }
  if (txn* x = find(t)) {
    ++x->outstanding;
    ++held_;
  }
}

void lsn_tracker::release(ticket t) {
  if (t & detached_bit) {
    if (auto it = detached_.find(t); it != detached_.end() && it->second > 0) --it->second;
    return;
  }
  txn* x = find(t);
  if (!x || x->outstanding == 0) return;
  --x->outstanding;
  --held_;
  advance();
}

void lsn_tracker::commit(ticket t, walhook::lsn end_lsn) {
  txn* x = find(t);
  if (!x) return;
  x->committed = true;
  x->end_lsn = end_lsn;
  advance();
}

void lsn_tracker::keepalive(walhook::lsn wal_end) {
  if (txns_.empty() && wal_end > confirmed_) confirmed_ = wal_end;
}

void lsn_tracker::reset() {
  txns_.clear();
  held_ = 0;
  first_ = next_;
}

void lsn_tracker::restart_at(walhook::lsn start) {
  reset();
  confirmed_ = start;
  confirmed_by_transactions_ = start;
}

lsn_tracker::ticket lsn_tracker::begin_detached() {
  detached_[next_detached_] = 0;
  return next_detached_++;
}

std::uint64_t lsn_tracker::detached_outstanding(ticket t) const {
  auto it = detached_.find(t);
  return it == detached_.end() ? 0 : it->second;
}

void lsn_tracker::end_detached(ticket t) { detached_.erase(t); }

void lsn_tracker::advance() {
  while (!txns_.empty() && txns_.front().committed && txns_.front().outstanding == 0) {
    confirmed_ = std::max(confirmed_, txns_.front().end_lsn);
    confirmed_by_transactions_ = std::max(confirmed_by_transactions_, txns_.front().end_lsn);
    txns_.pop_front();
    ++first_;
  }
}

}  // namespace walhook::relay
