// relay/cli/did_you_mean.hpp as tables: the typo suggestion, and the unknown word found in argv
// the way CLI11 walks it (one row per rule).

#include "relay/cli/did_you_mean.hpp"

#include <CLI/CLI.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace walhook::relay::cli;

TEST_CASE("edit_distance: insertions, deletions and substitutions of one byte each") {
  struct row {
    const char* a;
    const char* b;
    std::size_t distance;
  };
  for (const auto& r : std::vector<row>{
           {"", "", 0},
           {"send", "send", 0},
           {"sned", "send", 2},       // a swap is two substitutions
           {"sen", "send", 1},        // insertion
           {"sendd", "send", 1},      // deletion
           {"rend", "send", 1},       // substitution
           {"", "run", 3},
           {"status", "", 6},
       }) {
    const std::string a = r.a, b = r.b;
    CAPTURE(a);
    CAPTURE(b);
    CHECK(edit_distance(r.a, r.b) == r.distance);
    CHECK(edit_distance(r.b, r.a) == r.distance);
  }
}

TEST_CASE("suggestion: the nearest candidate within max(2, |word| / 3) edits, the first of equals") {
  const std::vector<std::string> commands{"migrate", "run", "endpoint", "send", "status", "resend", "replay", "recover"};
  struct row {
    const char* word;
    const char* expected;
  };
  for (const auto& r : std::vector<row>{
           {"sned", "; did you mean 'send'?"},      // 2 edits: within 2
           {"stauts", "; did you mean 'status'?"},  // 2 edits
           {"migarte", "; did you mean 'migrate'?"},
           {"rn", "; did you mean 'run'?"},         // 1 edit
           {"replya", "; did you mean 'replay'?"},  // replay (2) before resend, recover
           {"frob", ""},                            // nothing close
           {"xyz", ""},                             // 3 edits from run: too far for a short word
           {"send", "; did you mean 'send'?"},      // itself (the caller only asks for unknown words)
       }) {
    const std::string word = r.word;
    CAPTURE(word);
    CHECK(suggestion(r.word, commands) == r.expected);
  }
  CHECK(suggestion("anything", {}).empty());
  // Long words allow more edits: |word| / 3.
  CHECK(suggestion("--max-queue-per-endpnt", {"--max-queue-per-endpoint"}) == "; did you mean '--max-queue-per-endpoint'?");
}

namespace {

/// A small app shaped like walhook's: a global option, commands with options, one with verbs,
/// one with a positional argument.
struct test_app {
  CLI::App app{"test"};
  std::string s;
  long long id = 0;
  bool flag = false;
  test_app() {
    app.add_option("--log-level", s);
    auto* run = app.add_subcommand("run");
    run->add_option("--max-in-flight", id);
    run->add_option("--database-url", s)->required();
    run->add_flag("--allow-private-networks", flag);
    app.add_subcommand("send")->add_option("--tenant", s);
    auto* endpoint = app.add_subcommand("endpoint");
    auto* add = endpoint->add_subcommand("add");
    add->add_option("--url", s);
    auto* pause = endpoint->add_subcommand("pause");
    pause->add_option("id", id);
  }
  std::optional<std::string> unknown(std::vector<std::string> words) {
    words.insert(words.begin(), "walhook");
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    return unknown_word(app, static_cast<int>(argv.size()), argv.data());
  }
};

}  // namespace

TEST_CASE("unknown_word: walks argv through the subcommands as CLI11 does") {
  struct row {
    std::vector<std::string> argv;
    std::optional<std::string> expected;
  };
  for (const auto& r : std::vector<row>{
           {{"run", "--database-url", "x"}, std::nullopt},                                   // all known
           {{"sned"}, "unknown command 'sned'; did you mean 'send'?"},                        // a command
           {{"frob"}, "unknown command 'frob'"},                                              // nothing close
           {{"endpoint", "ad"}, "unknown command 'ad'; did you mean 'add'?"},                 // a verb
           {{"run", "--max-in-fligh", "3"}, "unknown option '--max-in-fligh'; did you mean '--max-in-flight'?"},
           {{"run", "--bogus=1"}, "unknown option '--bogus'"},                                // --name=value: the name
           {{"run", "--log-level", "info"}, std::nullopt},                                    // a parent's option
           {{"run", "--database-url", "--max-in-fligh"}, std::nullopt},                       // an option's value
           {{"run", "--database-url=x", "--max-in-fligh"},                                    // =value: the next is a word
            "unknown option '--max-in-fligh'; did you mean '--max-in-flight'?"},
           {{"run", "--allow-private-networks", "--tenent"}, "unknown option '--tenent'"},    // a flag takes no value
           {{"send", "--tenent", "a"}, "unknown option '--tenent'; did you mean '--tenant'?"},
           {{"endpoint", "pause", "7"}, std::nullopt},                                        // a positional argument
           {{"run", "--", "--anything"}, std::nullopt},                                       // after "--": not checked
       }) {
    CAPTURE(r.argv.size());
    CAPTURE(r.argv.back());
    test_app t;
    CHECK(t.unknown(r.argv) == r.expected);
  }
}
