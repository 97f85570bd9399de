// `walhook help [COMMAND [SUBCOMMAND]]`: the help `walhook --help` or `walhook COMMAND --help`
// prints, word for word, for people who type the word first.

#include "relay/cli/commands.hpp"
#include "relay/cli/did_you_mean.hpp"
#include "relay/operations/errors.hpp"

#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

namespace walhook::relay::cli {

command add_help(CLI::App& app) {
  auto words = std::make_shared<std::vector<std::string>>();
  auto* c = app.add_subcommand("help", "Show this help, or a command's: walhook help endpoint add");
  c->add_option("command", *words, "A command and its subcommands, e.g. endpoint add");
  return {c, [&app, c, words] {
            CLI::App* target = &app;
            std::string usage_name = app.get_name();  // "walhook endpoint add" in the usage line
            for (const auto& word : *words) {
              CLI::App* sub = nullptr;
              std::vector<std::string> names;
              for (auto* s : target->get_subcommands([c](CLI::App* s) { return s != c; })) {
                if (s->check_name(word)) sub = s;
                names.push_back(s->get_name());
              }
              if (!sub) throw cli_error("unknown command '" + word + "'" + suggestion(word, names));
              target = sub;
              usage_name += " " + sub->get_name();
            }
            // Not target->help(): the root delegates to the subcommand parsed, which is this one.
            std::cout << target->get_formatter()->make_help(target, usage_name, CLI::AppFormatMode::Normal);
            return 0;
          }};
}

}  // namespace walhook::relay::cli
