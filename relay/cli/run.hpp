#pragma once
// `walhook run`'s flags (relay/cli/run.cpp), apart so a test can parse them: each binds straight
// to the setting it changes in run_options (relay/engine/options.hpp, which declares each once,
// with its default), durations in the flag's unit (ms, s, days) to their std::chrono member.

#include "relay/engine/options.hpp"

#include <string>

namespace CLI {
class App;
}

namespace walhook::relay::cli {

/// What `walhook run`'s flags set: the options, and the flags read only when it starts.
struct run_flags {
  run_options run;
  std::string shard;  ///< --shard K/N as given (shard_flag: "" = not sharded)
};

/// Adds every flag of `walhook run` to `cmd`, in --help's order, bound to `f` (which must
/// outlive the parse).
void add_run_flags(CLI::App* cmd, run_flags& f);

}  // namespace walhook::relay::cli
