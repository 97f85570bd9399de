#include "common/pg_connection.hpp"

#include <doctest/doctest.h>

using walhook::pg::connection;
using walhook::pg::split_hosts;

namespace {
std::string param(const connection::connect_params& p, const std::string& keyword) {
  for (const auto& [k, v] : p)
    if (k == keyword) return v;
  return "(unset)";
}
}  // namespace

TEST_CASE("split_hosts: one attempt per host of a multi-host URL, in order, with everything else kept") {
  auto a = split_hosts("postgresql://walhook@db1:5432,db2:5433/app?target_session_attrs=read-write&connect_timeout=3",
                       {{"replication", "database"}, {"application_name", "walhook x"}});
  REQUIRE(a.size() == 2);
  CHECK(param(a[0].params, "host") == "db1");
  CHECK(param(a[0].params, "port") == "5432");
  CHECK(param(a[1].params, "host") == "db2");
  CHECK(param(a[1].params, "port") == "5433");
  for (const auto& h : a) {
    CHECK(param(h.params, "dbname") == "app");
    CHECK(param(h.params, "user") == "walhook");
    CHECK(param(h.params, "target_session_attrs") == "read-write");
    CHECK(param(h.params, "replication") == "database");  // extra keywords are added…
    CHECK(param(h.params, "application_name") == "walhook x");
    CHECK(h.connect_timeout == std::chrono::seconds{3});
  }
  // …and override the URL's.
  auto o = split_hosts("host=a,b dbname=x application_name=mine", {{"application_name", "walhook"}});
  REQUIRE(o.size() == 2);
  CHECK(param(o[1].params, "application_name") == "walhook");
  CHECK(param(o[1].params, "port") == "(unset)");
  CHECK(!o[1].connect_timeout);  // none in the conninfo: the caller shares its deadline
}

TEST_CASE("split_hosts: one port for every host, hostaddr lists, libpq's minimum connect_timeout") {
  auto a = split_hosts("host=a,b,c hostaddr=10.0.0.1,10.0.0.2,10.0.0.3 port=6432 connect_timeout=1", {});
  REQUIRE(a.size() == 3);
  CHECK(param(a[2].params, "host") == "c");
  CHECK(param(a[2].params, "hostaddr") == "10.0.0.3");
  CHECK(param(a[2].params, "port") == "6432");
  CHECK(a[0].connect_timeout == std::chrono::seconds{2});  // libpq waits at least 2 s per host
}

TEST_CASE("split_hosts: nothing to split — libpq connects (and reports) as it would") {
  CHECK(split_hosts("postgresql://db1/app", {}).empty());
  CHECK(split_hosts("host=a dbname=x", {}).empty());
  CHECK(split_hosts("dbname=x", {}).empty());
  CHECK(split_hosts("postgresql://db1:1,db2:2,db3:3/app?port=1,2", {}).empty());  // mismatched port list
  CHECK(split_hosts("host=a,b port=1,2,3", {}).empty());
  CHECK(split_hosts("not a conninfo", {}).empty());
  // prefer-standby makes two passes over the hosts: libpq's own iteration keeps its meaning.
  CHECK(split_hosts("postgresql://db1,db2/app?target_session_attrs=prefer-standby", {}).empty());
}
