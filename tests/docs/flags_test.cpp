// The docs name only flags walhook has: every `walhook …` command line the docs show (fenced
// blocks and inline code) is checked against that command's `--help` of the built binary
// (WALHOOK_BINARY), a bare `--flag` against every command's, and each default of
// docs/architecture.md's Defaults table against the default `--help` prints. A failure names the
// doc, its line and the word.

#include "tests/docs/markdown.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

using namespace walhook::test::docs;

namespace {

/// `text` cut at each `by`.
std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    auto end = text.find(by, start);
    out.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

/// What one command's `--help` lists.
struct command_help {
  std::map<std::string, std::optional<std::string>> flags;  ///< `--name` → its default, if shown
  std::set<std::string> subcommands;
};

std::string run_help(const std::string& path) {
  const std::string command = std::string("'") + WALHOOK_BINARY + "' " + path + " --help 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  REQUIRE(pipe);
  std::string out;
  std::array<char, 4096> buffer{};
  while (auto n = fread(buffer.data(), 1, buffer.size(), pipe.get())) out.append(buffer.data(), n);
  return out;
}

/// The default CLI11 prints after an option's type: "INT=1000", "TEXT:{failed,all}=failed",
/// "UINT:SIZE [b, kb(=1024b), ...]=268435456" (an `=` inside brackets is the type's). The
/// description follows after blanks.
std::optional<std::string> default_of(const std::string& rest) {
  int depth = 0;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    const char c = rest[i];
    if (c == '[' || c == '(' || c == '{') ++depth;
    else if (c == ']' || c == ')' || c == '}') --depth;
    else if (c == ' ' && i + 1 < rest.size() && rest[i + 1] == ' ') return std::nullopt;  // the description
    else if (c == '=' && depth == 0) return rest.substr(i + 1, rest.find(' ', i) - i - 1);
  }
  return std::nullopt;
}

/// Parses CLI11's help: option lines ("  -h,--help   …", "  --max-wait-ms INT=1000   …") under
/// "Options:", command lines ("  add   …") under "Subcommands:".
command_help parse_help(const std::string& text) {
  command_help help;
  std::string section;
  for (const auto& line : split(text, '\n')) {
    if (!line.empty() && line.back() == ':' && line.front() != ' ') {
      section = line;
      continue;
    }
    if (line.size() < 3 || line.compare(0, 2, "  ") != 0 || line[2] == ' ') continue;
    const auto name = line.substr(2, line.find(' ', 2) - 2);
    if (section == "Subcommands:") {
      help.subcommands.insert(name);
    } else if (section == "Options:") {
      const auto default_value = default_of(line.substr(2 + name.size()));
      for (std::size_t at = name.find("--"); at != std::string::npos; at = name.find("--", at + 2))
        help.flags[name.substr(at, name.find(',', at) - at)] = default_value;
    }
  }
  return help;
}

/// `walhook <path> --help`, parsed once per path ("" is the top level).
const command_help& help_of(const std::string& path) {
  static std::map<std::string, command_help> cache;
  auto it = cache.find(path);
  if (it == cache.end()) it = cache.emplace(path, parse_help(run_help(path))).first;
  return it->second;
}

std::string child(const std::string& path, const std::string& name) { return path.empty() ? name : path + ' ' + name; }

/// Every flag of every command.
const std::set<std::string>& every_flag() {
  static const std::set<std::string> all = [] {
    std::set<std::string> out;
    std::vector<std::string> todo{""};
    while (!todo.empty()) {
      auto path = todo.back();
      todo.pop_back();
      for (const auto& [flag, _] : help_of(path).flags) out.insert(flag);
      for (const auto& sub : help_of(path).subcommands) todo.push_back(child(path, sub));
    }
    return out;
  }();
  return all;
}

/// A word of a command line without the brackets, quotes and punctuation prose puts around it.
std::string bare(std::string w) {
  const std::string_view lead = "[(\"'", trail = "])\"',.:;";
  while (!w.empty() && lead.find(w.front()) != std::string_view::npos) w.erase(0, 1);
  while (!w.empty() && trail.find(w.back()) != std::string_view::npos) w.pop_back();
  return w;
}

bool is_flag(const std::string& w) { return w.size() > 2 && w.starts_with("--") && w[2] != '-'; }
std::string flag_name(const std::string& w) { return w.substr(0, w.find('=')); }
bool is_walhook(const std::string& w) { return w == "walhook" || w.ends_with("/walhook"); }

/// The shell commands of a code piece: split at `&&`, `||`, `|`, `;`, `&`; a block's `#` comment dropped.
std::vector<std::vector<std::string>> commands_of(const code_piece& piece) {
  auto text = piece.text;
  if (piece.block) {
    if (auto hash = text.find(" #"); hash != std::string::npos) text.resize(hash);
    if (text.starts_with("#")) text.clear();
  }
  std::vector<std::vector<std::string>> out(1);
  for (const auto& w : words(text)) {
    if (w == "&&" || w == "||" || w == "|" || w == ";" || w == "&") {
      out.emplace_back();
      continue;
    }
    if (auto b = bare(w); !b.empty()) out.back().push_back(b);
  }
  return out;
}

/// The docs whose walhook command lines are checked. bench/ and tests/ are left out: their flags
/// belong to walhook-bench, ctest and scripts/.
std::vector<std::string> docs_with_commands() {
  std::vector<std::string> out;
  for (const auto& path : markdown_paths())
    if (!path.starts_with("bench/") && !path.starts_with("tests/")) out.push_back(path);
  return out;
}

/// Where a flag on its own (`--max-hold-ms`) is walhook's: the README, docs/ and relay/. Other
/// folders' READMEs also name other programs' flags (apt-get's, docker's).
bool bare_flags_are_walhooks(const std::string& path) {
  return path == "README.md" || path.starts_with("docs/") || path.starts_with("relay/");
}

struct flag_checker {
  int checked = 0;

  void fail(const markdown_file& doc, int line, const std::string& what) {
    FAIL_CHECK(doc.path << ":" << line << ": " << what);
  }

  /// `walhook [sub …] [--flag value …]`: each flag must be one of the command it follows.
  void check_walhook(const markdown_file& doc, const code_piece& piece, const std::vector<std::string>& cmd) {
    std::string path;
    for (std::size_t i = 1; i < cmd.size(); ++i) {
      const auto& w = cmd[i];
      const auto& help = help_of(path);
      const auto alternatives = split(w, '|');  // `endpoint pause|resume 1`
      if (!alternatives.empty() && help.subcommands.contains(alternatives.front())) {
        for (const auto& alt : alternatives)
          if (!help.subcommands.contains(alt))
            fail(doc, piece.line, "`" + piece.text + "`: `walhook " + child(path, alt) + "` is not a command");
        path = child(path, alternatives.front());
        continue;
      }
      if (!is_flag(w)) continue;
      ++checked;
      if (!help.flags.contains(flag_name(w)))
        fail(doc, piece.line, "`" + piece.text + "`: " + flag_name(w) + " is not in `walhook " + child(path, "--help`"));
    }
  }

  void check(const markdown_file& doc) {
    for (const auto& piece : code_pieces(doc.text)) {
      for (const auto& cmd : commands_of(piece)) {
        std::size_t start = 0;
        while (start < cmd.size() && cmd[start].find('=') != std::string::npos && !cmd[start].starts_with("-")) ++start;
        if (start >= cmd.size()) continue;
        const std::vector<std::string> words_of(cmd.begin() + static_cast<long>(start), cmd.end());
        if (is_walhook(words_of.front())) {
          check_walhook(doc, piece, words_of);
        } else if (is_flag(words_of.front()) && bare_flags_are_walhooks(doc.path)) {  // e.g. `--max-hold-ms`
          for (const auto& w : words_of) {
            if (!is_flag(w)) continue;
            ++checked;
            if (!every_flag().contains(flag_name(w)))
              fail(doc, piece.line, "`" + piece.text + "`: " + flag_name(w) + " is not a flag of any walhook command");
          }
        }
      }
    }
  }
};

/// The numbers a Defaults cell states, as integers in the flag's unit: "5,000 ms" → 5000,
/// "256 MiB" → 268435456.
std::set<std::string> numbers_in(const std::string& cell) {
  static const std::regex number(R"((\d[\d,]*)(\s*(KiB|MiB|GiB))?)");
  std::set<std::string> out;
  for (std::sregex_iterator it(cell.begin(), cell.end(), number), end; it != end; ++it) {
    std::string digits = (*it)[1];
    std::erase(digits, ',');
    long long value = std::stoll(digits);
    const std::string unit = (*it)[3];
    if (unit == "KiB") value <<= 10;
    if (unit == "MiB") value <<= 20;
    if (unit == "GiB") value <<= 30;
    out.insert(std::to_string(value));
  }
  return out;
}

std::vector<std::string> cells_of(std::string row) {
  for (std::size_t at; (at = row.find("\\|")) != std::string::npos;) row.replace(at, 2, "\x01");
  auto cells = split(row, '|');
  for (auto& c : cells)
    for (auto& ch : c)
      if (ch == '\x01') ch = '|';
  return cells;
}

}  // namespace

TEST_CASE("every walhook flag the docs show is in that command's --help") {
  flag_checker checker;
  for (const auto& path : docs_with_commands()) checker.check(read_markdown(path));
  MESSAGE(checker.checked, " flags checked");
  CHECK(checker.checked > 100);  // the docs show well over a hundred: a parser that finds none is broken
}

TEST_CASE("docs/architecture.md's Defaults table: each flag exists and has the default --help shows") {
  const auto doc = read_markdown("docs/architecture.md");
  const auto lines = split(doc.text, '\n');
  std::size_t i = 0;
  while (i < lines.size() && lines[i] != "## Defaults") ++i;
  REQUIRE(i < lines.size());
  int rows = 0;
  for (++i; i < lines.size() && !lines[i].starts_with("## "); ++i) {
    const auto cells = cells_of(lines[i]);
    if (!lines[i].starts_with("| ") || cells.size() < 4 || cells[1].find("---") != std::string::npos ||
        cells[1] == " setting ")
      continue;
    ++rows;
    const auto line = static_cast<int>(i) + 1;
    for (const auto& span : code_pieces(cells[3])) {
      auto w = words(span.text);
      if (w.empty()) continue;
      std::string path;
      std::size_t at = 0;
      if (!is_flag(w.front())) {  // `endpoint add --max-concurrency`: another command than run
        for (; at < w.size() && help_of(path).subcommands.contains(w[at]); ++at) path = child(path, w[at]);
        if (path.empty()) continue;  // not a command: a column such as endpoints.max_concurrency
      } else {
        path = "run";
      }
      for (; at < w.size(); ++at) {
        if (!is_flag(w[at])) continue;
        const auto flag = flag_name(bare(w[at]));
        const auto& flags = help_of(path).flags;
        auto found = flags.find(flag);
        if (found == flags.end()) {
          FAIL_CHECK(doc.path << ":" << line << ": Defaults table: " << flag << " is not in `walhook " << path
                              << " --help`");
          continue;
        }
        const auto& shown = found->second;
        if (!shown) continue;
        auto squeezed = cells[2];
        std::erase(squeezed, ' ');
        const bool numeric = shown->find_first_not_of("0123456789") == std::string::npos;
        const bool stated = numeric ? numbers_in(cells[2]).contains(*shown) : squeezed.find(*shown) != std::string::npos;
        if (!stated)
          FAIL_CHECK(doc.path << ":" << line << ": Defaults table says '" << cells[2] << "' but `walhook " << path
                              << " --help` shows " << flag << "=" << *shown);
      }
    }
  }
  CHECK(rows > 20);
}
