#pragma once
// Secret rotation (`walhook endpoint rotate-secret`; docs/architecture.md, Rules): an endpoint
// holds its new secret first and the old ones after it, space-separated in
// walhook.endpoints.secret, until secret_grace_until; then walhook run drops the old ones
// (sql/statements/drop_expired_secrets.sql). Pure: which keys sign an attempt at a given time,
// and when the drop is tried again after it failed.
//
// Signing never waits for the drop: once the grace period is over only the new secret signs,
// even while the row still holds the old ones (the drop failed — a role without UPDATE on those
// columns — or its change has not come back through the stream yet).

#include "delivery/signing.hpp"
#include "relay/core/rows.hpp"

#include <chrono>
#include <optional>
#include <span>

namespace walhook::relay {

/// The keys that sign an attempt to `ep` at `now` (system clock, compared with PostgreSQL's
/// secret_grace_until): every key during a rotation's grace period, then the first (the new
/// secret) alone.
std::span<const delivery::signing_key> signing_keys(const endpoint& ep, std::chrono::system_clock::time_point now);

/// When housekeeping drops the secrets of rotations past their grace: every `interval` while
/// that works; after n failures in a row, again after interval · 2^(n-1), at most `max_wait`,
/// so a drop that keeps failing keeps being tried (and reported) without hammering the database.
class secret_drop_schedule {
 public:
  using steady_time = std::chrono::steady_clock::time_point;
  static constexpr std::chrono::seconds interval{5};
  static constexpr std::chrono::seconds max_wait{600};

  bool due(steady_time now) const { return !next_ || now >= *next_; }
  void succeeded(steady_time now) {
    failures_ = 0;
    next_ = now + interval;
  }
  /// Counts a failure; returns the wait until the next try.
  std::chrono::seconds failed(steady_time now);
  /// Failures in a row (0 after a success).
  int failures() const { return failures_; }

 private:
  int failures_ = 0;
  std::optional<steady_time> next_;  ///< none yet: at once
};

}  // namespace walhook::relay
