#include "relay/cli/did_you_mean.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

namespace walhook::relay::cli {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates)
    if (auto d = edit_distance(word, c); d < best_distance) {
      best = &c;
      best_distance = d;
    }
  return best ? "; did you mean '" + *best + "'?" : "";
}

namespace {

/// The long names of every option of `cur` and its parents, as "--name".
std::vector<std::string> option_names(CLI::App* cur) {
  std::vector<std::string> names;
  for (CLI::App* a = cur; a; a = a->get_parent())
    for (const auto* o : a->get_options())
      for (const auto& l : o->get_lnames()) names.push_back("--" + l);
  return names;
}

}  // namespace

std::optional<std::string> unknown_word(CLI::App& app, int argc, char** argv) {
  CLI::App* cur = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string token = argv[i];
    if (token == "--") break;
    if (token.size() > 1 && token[0] == '-') {
      const std::string name = token.substr(0, token.find('='));
      const CLI::Option* opt = nullptr;
      for (CLI::App* a = cur; a && !opt; a = a->get_parent()) opt = a->get_option_no_throw(name);
      if (!opt) return "unknown option '" + name + "'" + suggestion(name, option_names(cur));
      if (opt->get_expected_min() > 0 && token.find('=') == std::string::npos) ++i;  // its value
      continue;
    }
    CLI::App* sub = nullptr;
    std::vector<std::string> names;
    for (auto* s : cur->get_subcommands([](CLI::App*) { return true; })) {
      if (s->check_name(token)) sub = s;
      names.push_back(s->get_name());
    }
    if (sub) {
      cur = sub;
      continue;
    }
    // A positional argument (an endpoint id) of a command without subcommands.
    if (!names.empty()) return "unknown command '" + token + "'" + suggestion(token, names);
  }
  return std::nullopt;
}

}  // namespace walhook::relay::cli
