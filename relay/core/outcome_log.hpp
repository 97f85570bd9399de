#pragma once
// A compact, bounded record of recent delivery outcomes in memory, so "did customer X get event
// Y?" has an answer without a row per success (--record failed writes only what did not
// succeed at once). The dispatcher appends one entry per finished attempt; the admin API reads
// an event's entries. Oldest entries go first when the ring is full. Lost at restart (the
// console says so); persisted deliveries are in walhook.deliveries. About 100 bytes per entry
// (the entry and its index, measured: 10 MB at the default 100,000). Event ids are UUIDs (outbox.id): an
// id that is not one is not recorded, and looking one up finds nothing.
//
// Thread affinity: the engine's executor.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

namespace walhook::relay {

struct outcome_entry {
  std::string event_id;                          ///< webhook-id
  std::int64_t endpoint_id = 0;
  std::chrono::system_clock::time_point at{};    ///< when the attempt ended
  int attempt = 0;                               ///< 1 for the first attempt
  int http_status = 0;                           ///< 0: no response
  std::string outcome;                           ///< delivery::to_string(outcome_class): 2xx, 5xx, timeout, connect, tls, ssrf, …
  std::string result;                            ///< delivered | retry | dead
  double duration_s = 0;
};

class outcome_log {
 public:
  explicit outcome_log(std::size_t capacity = 100000);
  void add(outcome_entry e);
  /// Every entry kept for one event, oldest first.
  std::vector<outcome_entry> of_event(const std::string& event_id) const;
  /// The newest `limit` entries of one endpoint, newest first.
  std::vector<outcome_entry> of_endpoint(std::int64_t endpoint_id, std::size_t limit) const;
  std::size_t size() const;
  std::size_t capacity() const { return capacity_; }
  /// When the oldest entry kept was made (the window the record covers); epoch if empty.
  std::chrono::system_clock::time_point oldest() const;

 private:
  /// One entry as kept: 48 bytes (the event id as its 16 bytes, the labels as indexes).
  struct packed {
    std::array<std::uint8_t, 16> event_id{};
    std::int64_t endpoint_id = 0;
    std::int64_t at_us = 0;        ///< since the epoch
    float duration_s = 0;
    std::uint16_t attempt = 0;     ///< capped at 65,535
    std::uint16_t http_status = 0;
    std::uint8_t outcome = 0;      ///< index into delivery::all_outcome_classes
    std::uint8_t result = 0;       ///< 0 delivered, 1 retry, 2 dead
  };
  struct id_hash {
    std::size_t operator()(const std::array<std::uint8_t, 16>& id) const;
  };
  static outcome_entry unpack(const packed& p);

  std::size_t capacity_;
  std::uint64_t first_seq_ = 0;  ///< sequence number of entries_.front()
  std::deque<packed> entries_;
  std::unordered_multimap<std::array<std::uint8_t, 16>, std::uint64_t, id_hash> by_event_;  ///< event id → sequence number
};

}  // namespace walhook::relay
