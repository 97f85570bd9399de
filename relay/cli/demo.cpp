// `walhook demo`: its flags; the demo itself is relay/demo/demo.hpp's cmd_demo.

#include "relay/cli/commands.hpp"
#include "relay/demo/demo.hpp"

#include <CLI/CLI.hpp>

#include <memory>

namespace walhook::relay::cli {

command add_demo(CLI::App& app) {
  auto a = std::make_shared<demo_args>();
  auto* c = app.add_subcommand("demo", "Throwaway PostgreSQL + demo receiver + sample events, end to end");
  c->add_option("--events", a->events, "Sample events to commit")->capture_default_str()->check(CLI::Range(1, 100000));
  c->add_flag("--hold", a->hold, "Keep running after the samples until Ctrl-C");
  c->add_option("--admin-listen", a->admin_listen,
                "Serve the console and /metrics on HOST:PORT, loopback (default: localhost:9187 with --hold, none "
                "without; \"off\": none)");
  return {c, [a] { return cmd_demo(*a); }};
}

}  // namespace walhook::relay::cli
