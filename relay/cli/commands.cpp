#include "relay/cli/commands.hpp"

#include "relay/operations/errors.hpp"

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

namespace walhook::relay::cli {

std::vector<command> add_commands(CLI::App& app) {
  return {add_migrate(app), add_run(app),     add_endpoint(app), add_send(app),   add_status(app), add_resend(app),
          add_replay(app),  add_recover(app), add_reshard(app),  add_events(app), add_event(app),  add_inbox(app), add_ingest(app), add_tenant(app), add_demo(app),
          add_help(app)};
}

int run_parsed(const std::vector<command>& commands) {
  for (const auto& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      return c.run();
    } catch (const user_error& e) {
      std::cerr << "walhook: " << e.what() << "\n";
      return exit_code_of(e.kind());
    } catch (const std::exception& e) {
      std::cerr << "walhook: " << e.what() << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace walhook::relay::cli
