#pragma once
// The column mapping of an application's own outbox table bridged into walhook.outbox
// (`walhook migrate --outbox-table SCHEMA.TABLE`, sql/migrations/009_outbox_bridge.sql): which of
// the table's columns holds each of an event's parts. Pure: the presets, the --columns syntax and
// the rules that need no catalog; migration 009's walhook.bridge_outbox_table() checks the
// columns against the table itself.

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace walhook::relay {

/// The parts of an event a bridge maps, in the order --help and errors list them: id (uuid, text
/// or an integer: the webhook-id, derived stably when it is not a UUID), tenant, type, payload
/// (jsonb, json, text or UTF-8 bytea), aggregate (aggregate_id), aggregate_type, merge_key,
/// created_at (timestamptz, or timestamp read as UTC).
inline constexpr std::array<std::string_view, 8> bridge_parts{"id",        "tenant",         "type",      "payload",
                                                              "aggregate", "aggregate_type", "merge_key", "created_at"};

/// The presets of --preset: `walhook` (a table shaped like walhook.outbox), `debezium` (Debezium's
/// outbox: id, aggregatetype, aggregateid, type, payload; no tenant), `plain` (id,
/// aggregate_type, aggregate_id, event_type, payload, created_at; no tenant).
inline constexpr std::array<std::string_view, 3> bridge_presets{"walhook", "debezium", "plain"};

/// A bridge's mapping: part → column name (exactly as the catalog spells it), and the one tenant
/// of every row when the table has no tenant column.
struct bridge_mapping {
  std::map<std::string, std::string> columns;
  std::optional<std::string> tenant;
  bool operator==(const bridge_mapping&) const = default;
};

/// The mapping or why there is none (a sentence naming the flag), never both.
struct bridge_mapping_result {
  bridge_mapping mapping;
  std::string error;  ///< empty: `mapping` is valid
};

/// Builds the mapping of `--preset` (may be empty), overridden by `--columns` ("part=COLUMN,…";
/// "part=" takes a preset's part away), and `--tenant` (may be empty). --tenant replaces a
/// preset's tenant column; with a tenant column given in --columns it is an error. Needs type and
/// payload, and a tenant column or --tenant.
bridge_mapping_result make_bridge_mapping(std::string_view preset, std::string_view columns, std::string_view tenant);

/// The mapping's columns as the JSON object walhook.bridge_outbox_table() takes ({"id":"id",…}).
std::string bridge_columns_json(const bridge_mapping& m);

}  // namespace walhook::relay
