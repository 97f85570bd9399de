#!/usr/bin/env python3
"""ctest `house_rules`: the size rules of relay/ (issue 17), checked rather than remembered.

* No C++ file under relay/ over 600 lines.
* No function under relay/ over 80 lines, except a table: a function whose definition is
  preceded by a comment line containing "(a table)" is exempt (say why the length is data).
* Every folder under relay/ that holds code has a README.md.

Functions are found by brace matching on the source with comments and string literals blanked:
a `{` at namespace or class scope whose head has a parameter list opens a function (lambdas and
blocks inside it count as its lines). Usage: house_rules.py <repository root>
"""

import os
import re
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
TABLE_MARK = "(a table)"


def blank_comments_and_strings(src: str) -> str:
    """The source with comments, string and character literals blanked; newlines are kept."""
    out = []
    i, n = 0, len(src)
    while i < n:
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * src.count("\n", i, j))
            i = j
            continue
        raw = re.match(r'R"([^(\s]*)\(', src[i:i + 24])
        if raw and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end_mark = ")" + raw.group(1) + '"'
            j = src.find(end_mark, i)
            j = n if j < 0 else j + len(end_mark)
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j
            continue
        c = src[i]
        if c == "'" and i > 0 and src[i - 1].isalnum():  # a digit separator: 1'000
            out.append(c)
            i += 1
            continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(text: str):
    """(first line, lines, head) of each function defined at namespace or class scope."""
    code = blank_comments_and_strings(text)
    found, stack, head, line = [], [], [], 1
    for c in code:
        if c == "\n":
            line += 1
        if c == "{":
            h = "".join(head).strip()
            kind = "block"
            if all(k in ("namespace", "class") for k, _ in stack):
                if re.search(r"\bnamespace\b", h):
                    kind = "namespace"
                elif re.search(r"\b(class|struct|union|enum)\b[^()]*$", h) or h.endswith("=") or "(" not in h:
                    kind = "class"
                else:
                    kind = "function"
            stack.append((kind, (line, h)))
            head = []
        elif c == "}":
            if stack:
                kind, (first, h) = stack.pop()
                if kind == "function":
                    found.append((first, line - first + 1, " ".join(h.split())[-100:]))
            head = []
        elif c == ";":
            head = []
        else:
            head.append(c)
    return found


def marked_as_table(lines, first_line: int) -> bool:
    """A comment line with TABLE_MARK among the few lines just above the definition."""
    for i in range(max(0, first_line - 6), first_line):
        if TABLE_MARK in lines[i] and lines[i].lstrip().startswith("//"):
            return True
    return False


def main() -> int:
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    relay = os.path.join(root, "relay")
    problems, files = [], 0
    for folder, _, names in os.walk(relay):
        sources = [n for n in names if n.endswith((".cpp", ".hpp"))]
        if sources and "README.md" not in names:
            problems.append(f"{os.path.relpath(folder, root)}/ has no README.md saying what it holds")
        for name in sorted(sources):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            files += 1
            lines = text.split("\n")
            if text.count("\n") > MAX_FILE_LINES:
                problems.append(f"{rel}: {text.count(chr(10))} lines (at most {MAX_FILE_LINES}): split it along its parts")
            for first, length, head in functions(text):
                if length > MAX_FUNCTION_LINES and not marked_as_table(lines, first):
                    problems.append(f"{rel}:{first}: a function of {length} lines (at most {MAX_FUNCTION_LINES}, "
                                    f"or mark a table with a '{TABLE_MARK}' comment): {head}")
    for p in problems:
        print("house_rules:", p)
    if not files:
        print(f"house_rules: no C++ file under {relay}")
        return 1
    if problems:
        return 1
    print(f"house_rules: {files} files under relay/, none over {MAX_FILE_LINES} lines, "
          f"no function over {MAX_FUNCTION_LINES} lines but tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
