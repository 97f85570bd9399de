#pragma once
// walhook's commands, one file each (relay/cli/<command>.cpp), each owning its flags, its SQL
// and its output. A command file exposes one function that adds its subcommand to the CLI11 app
// — its flags bound to state the command owns — and returns how to run it; main.cpp adds them
// all, parses, and runs the one given. Exit codes and messages are a contract (outside scripts
// use them; tests/integration/cli_errors.cpp and cli_operator.cpp check many): user-facing
// failures throw a user_error of their kind (relay/operations/errors.hpp; cli_error is `invalid`),
// printed as "walhook: <message>" with exit_code_of(kind), 1 for every kind.

#include <functional>
#include <vector>

namespace CLI {
class App;
}

namespace walhook::relay::cli {

/// A command added to the app.
struct command {
  CLI::App* app = nullptr;   ///< its subcommand (owned by the app)
  std::function<int()> run;  ///< runs it once parsed: the process exit code
};

command add_migrate(CLI::App& app);   ///< relay/cli/migrate.cpp
command add_run(CLI::App& app);       ///< relay/cli/run.cpp
command add_endpoint(CLI::App& app);  ///< relay/cli/endpoint.cpp: add, list, enable … rotate-secret
command add_send(CLI::App& app);      ///< relay/cli/send.cpp
command add_status(CLI::App& app);    ///< relay/cli/status.cpp
command add_resend(CLI::App& app);    ///< relay/cli/resend.cpp
command add_replay(CLI::App& app);    ///< relay/cli/replay.cpp
command add_recover(CLI::App& app);   ///< relay/cli/recover.cpp
command add_reshard(CLI::App& app);   ///< relay/cli/reshard.cpp
command add_events(CLI::App& app);    ///< relay/cli/events.cpp
command add_event(CLI::App& app);     ///< relay/cli/event.cpp
command add_inbox(CLI::App& app);     ///< relay/cli/inbox.cpp: inbox source add|update|remove|list
command add_ingest(CLI::App& app);    ///< relay/cli/ingest.cpp
command add_tenant(CLI::App& app);    ///< relay/cli/tenant.cpp: tenant token create|list|revoke, tenant limits
command add_demo(CLI::App& app);      ///< relay/cli/demo.cpp
command add_help(CLI::App& app);      ///< relay/cli/help.cpp (`app` must outlive the command)

/// Adds every command, in the order `walhook --help` lists them.
std::vector<command> add_commands(CLI::App& app);

/// Runs the command that was parsed (0 if none). An exception it throws is printed as
/// "walhook: <what>" on stderr; the exit code is exit_code_of(kind) for a user_error
/// (relay/operations/errors.hpp), 1 for anything else (`walhook run` logs its own as JSON instead).
int run_parsed(const std::vector<command>& commands);

}  // namespace walhook::relay::cli
