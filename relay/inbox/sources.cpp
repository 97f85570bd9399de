#include "relay/inbox/sources.hpp"

#include "relay/operations/sources.hpp"

#include <fmt/format.h>

#include <charconv>

namespace walhook::relay::inbox {

const std::string_view sources_query =
    "SELECT name, scheme, "
    "       CASE WHEN secret_grace_until IS NULL OR secret_grace_until > now() THEN secret "
    "            ELSE split_part(secret, ' ', 1) END, "
    "       tolerance_s, id_from, type_from, order_key_from, signature_header, signature_encoding, "
    "       signed_content, timestamp_header, max_body_bytes "
    "  FROM walhook.inbox_sources ORDER BY name";

namespace {

std::vector<std::string> split_spaces(std::string_view text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto end = text.find(' ', at);
    const auto word = text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    if (!word.empty()) out.emplace_back(word);
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return out;
}

std::int64_t integer_of(std::string_view text) {
  std::int64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

}  // namespace

boost::system::result<source_config, std::string> source_of_row(const pg::query_result& rows, int row) {
  using result = boost::system::result<source_config, std::string>;
  const auto fail = [](std::string why) { return result(boost::system::in_place_error, std::move(why)); };
  source_config s;
  s.name = std::string(rows.value(row, 0));
  const auto kind = parse_scheme(rows.value(row, 1));
  if (!kind) return fail(fmt::format("source {}: unknown scheme '{}'", s.name, rows.value(row, 1)));
  s.kind = *kind;
  s.secrets = split_spaces(rows.value(row, 2));
  s.tolerance = std::chrono::seconds(integer_of(rows.value(row, 3)));
  const std::pair<int, std::optional<value_source>*> sources[] = {{4, &s.id_from}, {5, &s.type_from}, {6, &s.order_key_from}};
  for (auto [column, target] : sources) {
    if (rows.is_null(row, column)) continue;
    *target = parse_value_source(rows.value(row, column));
    if (!*target) return fail(fmt::format("source {}: '{}' is neither header:NAME nor a JSON pointer", s.name, rows.value(row, column)));
  }
  if (!rows.is_null(row, 7)) s.signature_header = std::string(rows.value(row, 7));
  s.base64 = !rows.is_null(row, 8) && rows.value(row, 8) == "base64";
  s.signs_timestamp = !rows.is_null(row, 9) && rows.value(row, 9) == "timestamp.body";
  if (!rows.is_null(row, 10)) s.timestamp_header = std::string(rows.value(row, 10));
  s.max_body_bytes = static_cast<std::size_t>(integer_of(rows.value(row, 11)));
  if (auto problem = check_source(s)) return fail(fmt::format("source {}: {}", s.name, *problem));
  return s;
}

bool valid_source_name(std::string_view name) { return operations::is_source_name(name); }

std::string inbox_tenant(std::string_view source_name) { return fmt::format("inbox:{}", source_name); }

}  // namespace walhook::relay::inbox
