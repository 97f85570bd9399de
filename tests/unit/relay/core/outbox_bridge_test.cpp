// The column mapping of a bridged outbox table (relay/core/outbox_bridge.hpp): presets, --columns
// overrides, --tenant, and the refusals, as a table.

#include "relay/core/outbox_bridge.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace walhook::relay;

namespace {
using column_map = std::map<std::string, std::string>;
}

TEST_CASE("make_bridge_mapping: presets, overrides and the tenant") {
  struct row {
    const char* name;
    const char* preset;
    const char* columns;
    const char* tenant;
    column_map want;
    std::optional<std::string> want_tenant;
  };
  const row rows[] = {
      {"walhook preset", "walhook", "", "",
       {{"id", "id"}, {"tenant", "tenant_id"}, {"type", "event_type"}, {"payload", "payload"},
        {"aggregate", "aggregate_id"}, {"merge_key", "merge_key"}, {"created_at", "created_at"}},
       std::nullopt},
      {"debezium preset with a tenant", "debezium", "", "acme",
       {{"id", "id"}, {"aggregate_type", "aggregatetype"}, {"aggregate", "aggregateid"}, {"type", "type"}, {"payload", "payload"}},
       "acme"},
      {"plain preset with a tenant", "plain", "", "acme",
       {{"id", "id"}, {"aggregate_type", "aggregate_type"}, {"aggregate", "aggregate_id"}, {"type", "event_type"},
        {"payload", "payload"}, {"created_at", "created_at"}},
       "acme"},
      {"--tenant replaces the walhook preset's tenant column", "walhook", "", "acme",
       {{"id", "id"}, {"type", "event_type"}, {"payload", "payload"}, {"aggregate", "aggregate_id"},
        {"merge_key", "merge_key"}, {"created_at", "created_at"}},
       "acme"},
      {"--columns override and drop a preset's parts", "plain", " payload = body , created_at= ,merge_key=key", "acme",
       {{"id", "id"}, {"aggregate_type", "aggregate_type"}, {"aggregate", "aggregate_id"}, {"type", "event_type"},
        {"payload", "body"}, {"merge_key", "key"}},
       "acme"},
      {"--columns alone", "", "type=kind,payload=data,tenant=account", "",
       {{"type", "kind"}, {"payload", "data"}, {"tenant", "account"}}, std::nullopt},
  };
  for (const auto& r : rows) {
    CAPTURE(r.name);
    auto m = make_bridge_mapping(r.preset, r.columns, r.tenant);
    CHECK(m.error == "");
    CHECK(m.mapping.columns == r.want);
    CHECK(m.mapping.tenant == r.want_tenant);
  }
}

TEST_CASE("make_bridge_mapping: what it refuses, and why") {
  struct row {
    const char* name;
    const char* preset;
    const char* columns;
    const char* tenant;
    const char* error_contains;
  };
  const row rows[] = {
      {"nothing", "", "", "", "give --preset"},
      {"an unknown preset", "kafka", "", "t", "unknown --preset 'kafka': the presets are walhook, debezium, plain"},
      {"an unknown part", "", "type=a,payload=b,colour=c", "t", "unknown part 'colour'"},
      {"not part=COLUMN", "", "type=a,payload", "t", "'payload' is not part=COLUMN"},
      {"a part twice", "", "type=a,type=b,payload=c", "t", "names type twice"},
      {"no type", "", "payload=p", "t", "needs the event type column"},
      {"no payload", "debezium", "payload=", "t", "needs the payload column"},
      {"debezium without a tenant", "debezium", "", "", "give --tenant T"},
      {"a tenant column and --tenant", "debezium", "tenant=account", "t", "not both"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.name);
    auto m = make_bridge_mapping(r.preset, r.columns, r.tenant);
    CHECK(m.error.find(r.error_contains) != std::string::npos);
    CHECK(m.mapping.columns.empty());
  }
}

TEST_CASE("bridge_columns_json: the parts in their order, names escaped") {
  bridge_mapping m;
  m.columns = {{"payload", "body"}, {"type", "Event \"Type\""}, {"id", "id"}};
  CHECK(bridge_columns_json(m) == R"({"id":"id","type":"Event \"Type\"","payload":"body"})");
}
