#pragma once
// `walhook-bench policies` (issue 22): what an endpoint's payload filter costs per event, and how
// exactly its rate limit holds on a real clock (bench/README.md, RESULTS.md "Payload filter",
// "Rate limiter").

namespace CLI {
class App;
}

namespace walhook::bench {

/// Adds the `policies` subcommand to `app`; it runs (and prints a Markdown report on stdout) when parsed.
void add_policies_command(CLI::App& app);

}  // namespace walhook::bench
