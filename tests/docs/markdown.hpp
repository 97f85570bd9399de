#pragma once
// What the doc checks (tests/docs/) read of the repository's markdown: the files, their lines,
// and the code in them (fenced blocks and inline code spans), each with its line number so a
// failure can say where. Plain text handling, no markdown library: the docs only need these two
// kinds of code.

#include <string>
#include <vector>

namespace walhook::test::docs {

/// One markdown file of the repository.
struct markdown_file {
  std::string path;  ///< relative to the repository root, e.g. "docs/architecture.md"
  std::string text;  ///< the whole file
};

/// Reads `relative` (a path under the repository root, WALHOOK_SOURCE_DIR). Fails the test
/// (doctest REQUIRE) if the file cannot be read.
markdown_file read_markdown(const std::string& relative);

/// Every `*.md` under the repository root, relative paths, sorted. Skips `.git/`, build
/// directories (`build*/`) and `bench/results/` (reports the bench generates, not docs).
std::vector<std::string> markdown_paths();

/// A piece of code in a markdown text: one line of a fenced block (shell continuations `\`
/// joined), or one inline code span (its newlines as spaces, `\|` of a table cell as `|`).
struct code_piece {
  int line = 0;       ///< 1-based line where the piece starts
  std::string text;   ///< the code, without the backticks
  bool block = false; ///< from a fenced block (a `#` there starts a shell comment)
};

/// The code pieces of `markdown`, in order of appearance.
std::vector<code_piece> code_pieces(const std::string& markdown);

/// Splits `text` at blanks.
std::vector<std::string> words(const std::string& text);

}  // namespace walhook::test::docs
