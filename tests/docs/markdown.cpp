#include "tests/docs/markdown.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace walhook::test::docs {

namespace fs = std::filesystem;

markdown_file read_markdown(const std::string& relative) {
  std::ifstream in(fs::path(WALHOOK_SOURCE_DIR) / relative, std::ios::binary);
  INFO("reading ", relative);
  REQUIRE(in.good());
  std::ostringstream text;
  text << in.rdbuf();
  return {relative, text.str()};
}

std::vector<std::string> markdown_paths() {
  const fs::path root(WALHOOK_SOURCE_DIR);
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const auto relative = fs::relative(it->path(), root).generic_string();
    if (it->is_directory()) {
      const auto name = it->path().filename().string();
      if (name == ".git" || name.starts_with("build") || relative == "bench/results") it.disable_recursion_pending();
      continue;
    }
    if (it->path().extension() == ".md") out.push_back(relative);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool is_fence(const std::string& line) {
  auto first = line.find_first_not_of(' ');
  return first != std::string::npos && line.compare(first, 3, "```") == 0;
}

/// The inline code spans of the prose between fences (`text` holds those lines, from `first_line`).
void spans_of(const std::string& text, int first_line, std::vector<code_piece>& out) {
  int line = first_line;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      continue;
    }
    if (text[i] != '`') continue;
    auto close = text.find('`', i + 1);
    if (close == std::string::npos) return;
    code_piece piece{line, text.substr(i + 1, close - i - 1), false};
    for (std::size_t at; (at = piece.text.find("\\|")) != std::string::npos;) piece.text.replace(at, 2, "|");
    line += static_cast<int>(std::count(piece.text.begin(), piece.text.end(), '\n'));
    std::replace(piece.text.begin(), piece.text.end(), '\n', ' ');
    out.push_back(std::move(piece));
    i = close;
  }
}

}  // namespace

std::vector<code_piece> code_pieces(const std::string& markdown) {
  std::vector<code_piece> out;
  const auto lines = lines_of(markdown);
  std::string prose;
  int prose_start = 1;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!is_fence(lines[i])) {
      if (prose.empty()) prose_start = static_cast<int>(i) + 1;
      prose += lines[i] + '\n';
      continue;
    }
    spans_of(prose, prose_start, out);
    prose.clear();
    for (++i; i < lines.size() && !is_fence(lines[i]); ++i) {
      code_piece piece{static_cast<int>(i) + 1, lines[i], true};
      while (piece.text.ends_with("\\") && i + 1 < lines.size() && !is_fence(lines[i + 1]))
        piece.text = piece.text.substr(0, piece.text.size() - 1) + ' ' + lines[++i];
      out.push_back(std::move(piece));
    }
  }
  spans_of(prose, prose_start, out);
  return out;
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace walhook::test::docs
