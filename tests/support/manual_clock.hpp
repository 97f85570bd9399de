#pragma once
// A clock_source that moves only when the test says so (Envoy's SimulatedTimeSource is the
// model): decisions that read the time (hold bound, wait bound, backoff, breaker pauses) are
// tested without sleeping.

#include "common/time.hpp"

namespace walhook::test {

class manual_clock final : public clock_source {
 public:
  /// Starts at an arbitrary, fixed point of each clock.
  manual_clock()
      : steady_(steady_clock::time_point{} + std::chrono::hours{1000}),
        system_(system_clock::time_point{} + std::chrono::seconds{1'800'000'000}) {}

  steady_clock::time_point steady_now() const override { return steady_; }
  system_clock::time_point system_now() const override { return system_; }

  /// Moves both clocks forward by `d`.
  template <class Rep, class Period>
  void advance(std::chrono::duration<Rep, Period> d) {
    steady_ += std::chrono::duration_cast<steady_clock::duration>(d);
    system_ += std::chrono::duration_cast<system_clock::duration>(d);
  }
  /// Sets the wall clock (what customers see); the steady clock is not affected.
  void set_system(system_clock::time_point t) { system_ = t; }

 private:
  steady_clock::time_point steady_;
  system_clock::time_point system_;
};

}  // namespace walhook::test
