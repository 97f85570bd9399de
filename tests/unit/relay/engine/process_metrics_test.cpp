// relay/engine/process_metrics.hpp: this process's metrics, read from /proc/self.

#include "relay/engine/process_metrics.hpp"

#include <doctest/doctest.h>

#include <chrono>

using namespace walhook::relay;

TEST_CASE("read_process_metrics: this process, from /proc/self") {
  auto m = read_process_metrics();
  REQUIRE(m);
  CHECK(m->resident_bytes > 1 << 20);
  CHECK(m->virtual_bytes >= m->resident_bytes);
  CHECK(m->cpu_seconds >= 0);
  REQUIRE(m->open_fds);
  CHECK(*m->open_fds >= 3);  // stdin, stdout, stderr
  if (m->max_fds) CHECK(*m->max_fds >= *m->open_fds);
  // Started in the last day, not in the future (the clock reads the same btime the kernel does).
  double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(m->start_time_seconds <= now + 1);
  CHECK(m->start_time_seconds > now - 86400);
}
