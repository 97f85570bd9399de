#pragma once
// Flags more than one command shares, and flags bound straight to a setting's own member.

#include "relay/core/shard.hpp"

#include <CLI/CLI.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace walhook::relay::cli {

/// --database-url (required; env WALHOOK_DATABASE_URL), bound to `url`.
CLI::Option* add_database_url(CLI::App* cmd, std::string& url);

/// A CLI11 check: a whole number ≥ 1, refused in plain words ("must be at least 1 (got 0)").
/// Named POSITIVE as CLI11's own, so --help reads the same; CLI11's prints a double range
/// ("not in range 0.000000 to 1.797…e308").
extern const CLI::Validator positive;
/// A CLI11 check without a name in --help: a whole number ≥ 0 ("must not be negative (got -5)").
extern const CLI::Validator not_negative;

/// Adds `name`, a whole number of `Unit` (std::chrono::milliseconds, seconds, days …), bound
/// straight to the setting `d`: given, it sets d; --help shows d's own default in `Unit`. No copy
/// of the setting to convert back after parsing.
template <class Unit, class Rep, class Period>
CLI::Option* add_duration(CLI::App* cmd, const std::string& name, std::chrono::duration<Rep, Period>& d,
                          const std::string& help) {
  using setting = std::chrono::duration<Rep, Period>;
  auto* o = cmd->add_option_function<long long>(
      name, [&d](const long long& n) { d = std::chrono::duration_cast<setting>(Unit{n}); }, help);
  o->default_str(std::to_string(std::chrono::duration_cast<Unit>(d).count()));
  o->check(not_negative);  // a duration below zero means nothing
  return o;
}

/// Parses a duration like "24h", "90m", "2s", "7d" or "1h30m" (a bare number: seconds).
/// Throws cli_error naming `flag` on anything else.
std::chrono::seconds parse_duration(const std::string& text, const std::string& flag);

/// --shard K/N as given (relay/core/shard.hpp): "" = not sharded. Throws cli_error with why not.
shard_spec shard_flag(const std::string& text);

/// --secret-file FILE: the secret is the file's first line, blanks around it trimmed; "-" reads
/// that line from stdin. A secret given this way stays out of the process list and the shell's
/// history (--secret does not). Throws cli_error naming the flag if it cannot be read or is empty.
std::string read_secret_file(const std::string& path, const std::string& flag = "--secret-file");

/// "" → std::nullopt (an optional text flag left out), else the text.
std::optional<std::string> text_or_null(const std::string& text);

}  // namespace walhook::relay::cli
