#include "relay/core/outcome_log.hpp"

#include "delivery/outcome_class.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>

namespace walhook::relay {

namespace {

constexpr std::array<std::string_view, 3> results{"delivered", "retry", "dead"};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// The 16 bytes of a UUID in its 8-4-4-4-12 text form (either case), or nullopt.
std::optional<std::array<std::uint8_t, 16>> uuid_bytes(std::string_view text) {
  if (text.size() != 36) return std::nullopt;
  std::array<std::uint8_t, 16> out{};
  std::size_t n = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') return std::nullopt;
      ++i;
      continue;
    }
    const int hi = hex_digit(text[i]), lo = hex_digit(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[n++] = static_cast<std::uint8_t>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string uuid_text(const std::array<std::uint8_t, 16>& id) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (std::size_t i = 0; i < id.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += digits[id[i] >> 4];
    out += digits[id[i] & 15];
  }
  return out;
}

}  // namespace

std::size_t outcome_log::id_hash::operator()(const std::array<std::uint8_t, 16>& id) const {
  // UUIDs are random enough in their last 8 bytes (v4: random; v7: random after the time).
  std::uint64_t tail = 0;
  std::memcpy(&tail, id.data() + 8, sizeof tail);
  std::uint64_t head = 0;
  std::memcpy(&head, id.data(), sizeof head);
  return static_cast<std::size_t>(tail ^ (head * 0x9e3779b97f4a7c15ULL));
}

outcome_entry outcome_log::unpack(const packed& p) {
  outcome_entry e;
  e.event_id = uuid_text(p.event_id);
  e.endpoint_id = p.endpoint_id;
  e.at = std::chrono::system_clock::time_point{std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::microseconds{p.at_us})};
  e.attempt = p.attempt;
  e.http_status = p.http_status;
  e.outcome = std::string(delivery::to_string(delivery::all_outcome_classes[p.outcome]));
  e.result = std::string(results[p.result]);
  e.duration_s = p.duration_s;
  return e;
}

outcome_log::outcome_log(std::size_t capacity) : capacity_(capacity) {}

void outcome_log::add(outcome_entry e) {
  if (capacity_ == 0) return;  // --recent-outcomes 0: nothing kept
  const auto id = uuid_bytes(e.event_id);
  if (!id) return;
  packed p;
  p.event_id = *id;
  p.endpoint_id = e.endpoint_id;
  p.at_us = std::chrono::duration_cast<std::chrono::microseconds>(e.at.time_since_epoch()).count();
  p.duration_s = static_cast<float>(e.duration_s);
  p.attempt = static_cast<std::uint16_t>(std::clamp(e.attempt, 0, 65535));
  p.http_status = static_cast<std::uint16_t>(std::clamp(e.http_status, 0, 65535));
  p.outcome = static_cast<std::uint8_t>(std::find_if(delivery::all_outcome_classes.begin(), delivery::all_outcome_classes.end(),
                                                     [&](auto c) { return delivery::to_string(c) == e.outcome; }) -
                                        delivery::all_outcome_classes.begin());
  if (p.outcome >= delivery::all_outcome_classes.size())
    p.outcome = static_cast<std::uint8_t>(delivery::outcome_class::other);
  p.result = static_cast<std::uint8_t>(std::find(results.begin(), results.end(), e.result) - results.begin());
  if (p.result >= results.size()) p.result = 1;  // not a verdict we know: take it as not delivered
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
  by_event_.emplace(p.event_id, seq);
  entries_.push_back(p);
}

std::vector<outcome_entry> outcome_log::of_event(const std::string& event_id) const {
  std::vector<outcome_entry> out;
  const auto id = uuid_bytes(event_id);
  if (!id) return out;
  std::vector<std::uint64_t> seqs;
  auto [from, to] = by_event_.equal_range(*id);
  for (auto it = from; it != to; ++it) seqs.push_back(it->second);
  std::sort(seqs.begin(), seqs.end());  // the multimap keeps no order among equal keys
  out.reserve(seqs.size());
  for (auto s : seqs) out.push_back(unpack(entries_[static_cast<std::size_t>(s - first_seq_)]));
  return out;
}

std::vector<outcome_entry> outcome_log::of_endpoint(std::int64_t endpoint_id, std::size_t limit) const {
  std::vector<outcome_entry> out;
  for (auto it = entries_.rbegin(); it != entries_.rend() && out.size() < limit; ++it)
    if (it->endpoint_id == endpoint_id) out.push_back(unpack(*it));
  return out;
}

std::size_t outcome_log::size() const { return entries_.size(); }

std::chrono::system_clock::time_point outcome_log::oldest() const {
  return entries_.empty() ? std::chrono::system_clock::time_point{} : unpack(entries_.front()).at;
}

}  // namespace walhook::relay
