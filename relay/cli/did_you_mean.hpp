#pragma once
// "unknown command 'sned'; did you mean 'send'?": a typo in argv named before CLI11's own first
// complaint (a missing required option, say) hides it.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace walhook::relay::cli {

/// Levenshtein distance: insertions, deletions and substitutions of one byte each.
std::size_t edit_distance(std::string_view a, std::string_view b);

/// "; did you mean 'x'?" for the nearest candidate close enough to be a typo (a distance below
/// max(2, |word| / 3) + 1; the first of equals), else "".
std::string suggestion(const std::string& word, const std::vector<std::string>& candidates);

/// An unknown command or option in argv, as one line with a suggestion ("unknown command 'sned';
/// did you mean 'send'?", "unknown option '--max-in-fligh'; did you mean '--max-in-flight'?"),
/// or std::nullopt. Walks argv through `app`'s subcommands the way CLI11 does: an option is
/// looked up in the current subcommand and its parents, a word after "--" is not checked, and a
/// word where a command has no subcommands is a positional argument.
std::optional<std::string> unknown_word(CLI::App& app, int argc, char** argv);

}  // namespace walhook::relay::cli
