// walhook: delivers PostgreSQL outbox events to customers' webhooks through a logical
// replication slot. This file only builds the command line (CLI11) from the commands
// (relay/cli/commands.hpp, one file each), parses it and runs the command given.

#include "common/log.hpp"
#include "relay/cli/commands.hpp"
#include "relay/cli/did_you_mean.hpp"
#include "relay/core/version.hpp"

#include <CLI/CLI.hpp>

#include <iostream>

int main(int argc, char** argv) {
  namespace cli = walhook::relay::cli;
  CLI::App app{"walhook: PostgreSQL outbox → logical replication → signed webhooks (Standard Webhooks)"};
  app.require_subcommand(1);
  using walhook::relay::walhook_commit, walhook::relay::walhook_version;
  app.set_version_flag("--version", "walhook " + std::string(walhook_version) + " (" + std::string(walhook_commit) + ")");
  std::string log_level;
  app.add_option("--log-level", log_level, "debug, info, warn or error (default info; env WALHOOK_LOG_LEVEL)")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  const auto commands = cli::add_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0)  // not --help or --version
      if (auto unknown = cli::unknown_word(app, argc, argv)) {
        std::cerr << "walhook: " << *unknown << "\n";
        return e.get_exit_code();
      }
    return app.exit(e);
  }
  if (!log_level.empty()) {
    walhook::log::level l;
    walhook::log::parse_level(log_level, l);
    walhook::log::set_level(l);
  }
  return cli::run_parsed(commands);
}
