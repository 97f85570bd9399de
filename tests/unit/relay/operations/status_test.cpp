// relay/operations/status.hpp's pure part: a time to the second, as `walhook status` shows it
// (the rows themselves: it_admin_api and it_console).

#include "relay/operations/status.hpp"

#include <doctest/doctest.h>

TEST_CASE("status: a time to the second, as walhook status shows it") {
  using walhook::relay::operations::to_the_second;
  CHECK(to_the_second("2026-11-30T03:23:51.123456Z") == "2026-11-30T03:23:51Z");
  CHECK(to_the_second("2026-11-30T03:23:51.5Z") == "2026-11-30T03:23:51Z");
  CHECK(to_the_second("2026-11-30T03:23:51Z") == "2026-11-30T03:23:51Z");
  CHECK(to_the_second("infinity") == "infinity");
}
