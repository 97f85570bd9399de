#include "relay/core/outbox_bridge.hpp"

#include "common/json_writer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace walhook::relay {

namespace {

using preset_columns = std::map<std::string, std::string>;

std::optional<preset_columns> preset_of(std::string_view name) {
  if (name == "walhook")
    return preset_columns{{"id", "id"},           {"tenant", "tenant_id"}, {"type", "event_type"},
                          {"payload", "payload"}, {"aggregate", "aggregate_id"}, {"merge_key", "merge_key"},
                          {"created_at", "created_at"}};
  if (name == "debezium")
    return preset_columns{{"id", "id"},
                          {"aggregate_type", "aggregatetype"},
                          {"aggregate", "aggregateid"},
                          {"type", "type"},
                          {"payload", "payload"}};
  if (name == "plain")
    return preset_columns{{"id", "id"},         {"aggregate_type", "aggregate_type"}, {"aggregate", "aggregate_id"},
                          {"type", "event_type"}, {"payload", "payload"},            {"created_at", "created_at"}};
  return std::nullopt;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

bool known_part(std::string_view part) {
  return std::find(bridge_parts.begin(), bridge_parts.end(), part) != bridge_parts.end();
}

}  // namespace

bridge_mapping_result make_bridge_mapping(std::string_view preset, std::string_view columns, std::string_view tenant) {
  bridge_mapping_result r;
  auto fail = [&](std::string why) {
    r.error = std::move(why);
    r.mapping = {};
    return r;
  };
  if (preset.empty() && trim(columns).empty())
    return fail(fmt::format("give --preset ({}) or --columns part=COLUMN,… (parts: {})", fmt::join(bridge_presets, ", "),
                            fmt::join(bridge_parts, ", ")));
  if (!preset.empty()) {
    auto p = preset_of(preset);
    if (!p) return fail(fmt::format("unknown --preset '{}': the presets are {}", preset, fmt::join(bridge_presets, ", ")));
    r.mapping.columns = std::move(*p);
    if (!tenant.empty()) r.mapping.columns.erase("tenant");  // --tenant replaces a preset's tenant column
  }
  bool tenant_column_given = false;
  std::map<std::string, bool> seen;
  std::string_view rest = columns;
  while (!trim(rest).empty()) {
    const auto comma = rest.find(',');
    const std::string_view entry = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (entry.empty()) continue;
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos)
      return fail(fmt::format("--columns entry '{}' is not part=COLUMN", entry));
    const std::string part(trim(entry.substr(0, eq)));
    const std::string column(trim(entry.substr(eq + 1)));
    if (!known_part(part))
      return fail(fmt::format("--columns: unknown part '{}' (parts: {})", part, fmt::join(bridge_parts, ", ")));
    if (seen[part]) return fail(fmt::format("--columns names {} twice", part));
    seen[part] = true;
    if (column.empty()) {
      r.mapping.columns.erase(part);
    } else {
      r.mapping.columns[part] = column;
      if (part == "tenant") tenant_column_given = true;
    }
  }
  if (!tenant.empty()) {
    if (tenant_column_given)
      return fail("give either a tenant column (--columns tenant=COLUMN) or --tenant for every row, not both");
    if (tenant.size() > 256) return fail("--tenant must be at most 256 bytes");
    r.mapping.tenant = std::string(tenant);
  }
  if (!r.mapping.columns.contains("type")) return fail("the mapping needs the event type column (--columns type=COLUMN)");
  if (!r.mapping.columns.contains("payload")) return fail("the mapping needs the payload column (--columns payload=COLUMN)");
  if (!r.mapping.columns.contains("tenant") && !r.mapping.tenant)
    return fail("the table has no tenant column in this mapping: give --tenant T (every row's tenant) or --columns "
                "tenant=COLUMN");
  return r;
}

std::string bridge_columns_json(const bridge_mapping& m) {
  json_writer j;
  j.begin_object();
  for (const auto& part : bridge_parts)
    if (auto it = m.columns.find(std::string(part)); it != m.columns.end()) j.key(part).string(it->second);
  j.end_object();
  return j.take();
}

}  // namespace walhook::relay
