#pragma once
// A clock_source that tests drive by hand (Envoy's SimulatedTimeSystem, in small): time stands
// still until advance() moves it, so tests about idle timeouts, backoff or timestamps run in
// microseconds and never sleep.

#include "common/time.hpp"

#include <chrono>
#include <stdexcept>

namespace walhook::test {

/// Starts at a fixed instant, steady 1 s after the steady epoch (long before any real
/// steady_clock reading, so code that mixes the two clocks fails visibly) and system
/// 2026-01-01T00:00:00Z, so tests never depend on the real clocks. Not thread-safe: use it on
/// the thread that runs the code under test.
class manual_clock final : public clock_source {
 public:
  manual_clock() = default;
  explicit manual_clock(system_clock::time_point system) : system_(system) {}

  steady_clock::time_point steady_now() const override { return steady_; }
  system_clock::time_point system_now() const override { return system_; }

  /// Time passes: both clocks move forward by `d`. A negative `d` throws std::invalid_argument
  /// (the steady clock never goes back).
  void advance(steady_clock::duration d) {
    if (d < steady_clock::duration::zero()) throw std::invalid_argument("manual_clock::advance: negative duration");
    steady_ += d;
    system_ += std::chrono::duration_cast<system_clock::duration>(d);
  }

  /// The wall clock is set (e.g. an NTP step, backwards or forwards); the steady clock is not.
  void set_system_time(system_clock::time_point t) { system_ = t; }

 private:
  steady_clock::time_point steady_{std::chrono::seconds(1)};
  system_clock::time_point system_{std::chrono::seconds(1'767'225'600)};  // 2026-01-01T00:00:00Z
};

}  // namespace walhook::test
