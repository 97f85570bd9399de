#include "relay/outcome_log.hpp"

#include <algorithm>

namespace walhook::relay {

outcome_log::outcome_log(std::size_t capacity) : capacity_(capacity) {}

void outcome_log::add(outcome_entry e) {
  if (capacity_ == 0) return;  // --recent-outcomes 0: nothing kept
  if (entries_.size() == capacity_) {
    // The oldest entry goes, and with it its index entry (found among its event's, few).
    auto [from, to] = by_event_.equal_range(entries_.front().event_id);
    for (auto it = from; it != to; ++it)
      if (it->second == first_seq_) {
        by_event_.erase(it);
        break;
      }
    entries_.pop_front();
    ++first_seq_;
  }
  const std::uint64_t seq = first_seq_ + entries_.size();
  by_event_.emplace(e.event_id, seq);
  entries_.push_back(std::move(e));
}

std::vector<outcome_entry> outcome_log::of_event(const std::string& event_id) const {
  std::vector<std::uint64_t> seqs;
  auto [from, to] = by_event_.equal_range(event_id);
  for (auto it = from; it != to; ++it) seqs.push_back(it->second);
  std::sort(seqs.begin(), seqs.end());  // the multimap keeps no order among equal keys
  std::vector<outcome_entry> out;
  out.reserve(seqs.size());
  for (auto s : seqs) out.push_back(entries_[static_cast<std::size_t>(s - first_seq_)]);
  return out;
}

std::vector<outcome_entry> outcome_log::of_endpoint(std::int64_t endpoint_id, std::size_t limit) const {
  std::vector<outcome_entry> out;
  for (auto it = entries_.rbegin(); it != entries_.rend() && out.size() < limit; ++it)
    if (it->endpoint_id == endpoint_id) out.push_back(*it);
  return out;
}

std::size_t outcome_log::size() const { return entries_.size(); }

std::chrono::system_clock::time_point outcome_log::oldest() const {
  return entries_.empty() ? std::chrono::system_clock::time_point{} : entries_.front().at;
}

}  // namespace walhook::relay
