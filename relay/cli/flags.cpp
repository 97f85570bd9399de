#include "relay/cli/flags.hpp"

#include "relay/operations/blocking_db.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>

namespace walhook::relay::cli {

namespace {

/// The whole number `text` holds, or nullopt ("12", "-5"; not "1.5", "12x").
std::optional<long long> whole_number(const std::string& text) {
  long long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

/// At least `min`, else "<what> (got <text>)"; text that is not a whole number is left to the
/// option's own conversion, which says so.
CLI::Validator at_least(long long min, std::string what, std::string name) {
  return CLI::Validator(
      [min, what](std::string& text) -> std::string {
        auto v = whole_number(text);
        return v && *v < min ? what + " (got " + text + ")" : std::string();
      },
      std::move(name));
}

}  // namespace

const CLI::Validator positive = at_least(1, "must be at least 1", "POSITIVE");
const CLI::Validator not_negative = at_least(0, "must not be negative", "");

CLI::Option* add_database_url(CLI::App* cmd, std::string& url) {
  return cmd->add_option("--database-url", url, "PostgreSQL URL, e.g. postgresql://walhook@db:5432/app")
      ->envname("WALHOOK_DATABASE_URL")
      ->required();
}

std::chrono::seconds parse_duration(const std::string& text, const std::string& flag) {
  long long total = 0;
  std::size_t i = 0;
  const auto bad = [&] {
    return cli_error(fmt::format("{} {}: give a duration such as 24h, 90m, 30s, 7d or 1h30m", flag, text));
  };
  if (text.empty()) throw bad();
  while (i < text.size()) {
    std::size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j == i || j - i > 9) throw bad();
    const long long n = std::stoll(text.substr(i, j - i));
    long long unit = 1;
    if (j < text.size()) {
      switch (text[j]) {
        case 's': unit = 1; break;
        case 'm': unit = 60; break;
        case 'h': unit = 3600; break;
        case 'd': unit = 86400; break;
        default: throw bad();
      }
      ++j;
    } else if (i != 0) {
      throw bad();  // "1h30": the unit of 30 is missing
    }
    total += n * unit;
    i = j;
  }
  return std::chrono::seconds{total};
}

shard_spec shard_flag(const std::string& text) {
  if (text.empty()) return shard_spec{};
  std::string why;
  auto s = parse_shard(text, why);
  if (!s) throw cli_error(why);
  return *s;
}

std::string read_secret_file(const std::string& path, const std::string& flag) {
  std::string line;
  if (path == "-") {
    std::getline(std::cin, line);
  } else {
    std::ifstream in(path);
    if (!in) throw cli_error(fmt::format("{} {}: cannot read it: {}", flag, path, std::strerror(errno)));
    std::getline(in, line);
  }
  const auto blank = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!line.empty() && blank(static_cast<unsigned char>(line.back()))) line.pop_back();
  const auto first = std::find_if_not(line.begin(), line.end(), blank);
  line.erase(line.begin(), first);
  if (line.empty())
    throw cli_error(fmt::format("{} {}: no secret in it (the first line holds the secret)", flag,
                                path == "-" ? "- (stdin)" : path));
  return line;
}

std::optional<std::string> text_or_null(const std::string& text) {
  return text.empty() ? std::nullopt : std::optional<std::string>(text);
}

}  // namespace walhook::relay::cli
