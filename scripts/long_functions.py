#!/usr/bin/env python3
"""long_functions.py: the functions of src/ longer than a limit (issue 21: about 150 lines).

    /usr/bin/python3 scripts/long_functions.py [--max N] [--all] [PATH...]

Prints one line per function over N lines (default 150), longest first:
    LINES  FILE:FIRST-LAST  NAME
and exits 1 when any is found, 0 otherwise. PATHs (files or folders) default to src/;
the files read are *.c, *.h, *.cu, *.cuh. --all lists every function with its length.

A function is counted from the first line of its header (return type, name, parameters)
to the line of the brace that closes its body, both included. Definitions are found at
file level and inside struct/namespace/extern "C" blocks (C++ methods of the .cu files);
comments, string and character literals and preprocessor lines are skipped, so a brace in
a string or a macro does not fool it. It does not preprocess: a function cut in two by
#if branches is counted as written, both branches included.
"""
import os
import re
import sys

EXTS = (".c", ".h", ".cu", ".cuh")
NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_:~]*)\s*\(")
NOT_FUNCS = {"if", "for", "while", "switch", "return", "sizeof", "defined"}


def strip(line, state):
    """line without comments and literals; state carries an open /* comment over lines."""
    out = []
    i, n = 0, len(line)
    while i < n:
        if state["comment"]:
            j = line.find("*/", i)
            if j < 0:
                return "".join(out)
            state["comment"] = False
            i = j + 2
            continue
        c = line[i]
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["comment"] = True
            i += 2
            continue
        if c in "\"'":
            j = i + 1
            while j < n and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(path):
    """(name, first, last) of each function definition in path, lines 1-based."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    state = {"comment": False}
    code, cont = [], False
    for l in lines:
        s = strip(l, state)
        pre = cont or s.lstrip().startswith("#")
        cont = pre and l.rstrip().endswith("\\")
        code.append("" if pre else s)
    text = "\n".join(code)
    line_at = [0] * (len(text) + 1)
    n = 1
    for i, c in enumerate(text):
        line_at[i] = n
        n += c == "\n"
    found, header_start, i = [], 0, 0
    while i < len(text):
        c = text[i]
        if c in ";}":
            header_start = i + 1
        elif c == "{":
            name = function_name(text[header_start:i])
            if name:
                depth, k = 0, i
                while k < len(text):
                    depth += (text[k] == "{") - (text[k] == "}")
                    if depth == 0:
                        break
                    k += 1
                first = header_start + len(text[header_start:i]) - len(text[header_start:i].lstrip())
                found.append((name, line_at[first], line_at[min(k, len(text) - 1)]))
                i = k
            header_start = i + 1
        i += 1
    return found


def function_name(header):
    """The name a function definition's header declares, or None (struct, initializer...)."""
    h = header.strip()
    h = re.sub(r"\b(const|override|noexcept|final)\s*$", "", h).strip()
    if not h.endswith(")") or "(" not in h:
        return None
    depth, k = 0, len(h) - 1
    while k >= 0:
        depth += (h[k] == ")") - (h[k] == "(")
        if depth == 0:
            break
        k -= 1
    before = h[:k].rstrip()
    if "=" in before.replace("operator=", ""):
        return None
    m = re.search(r"([A-Za-z_~][A-Za-z0-9_:~]*)$", before)
    if not m or m.group(1) in NOT_FUNCS:
        return None
    return m.group(1)


def main(argv):
    limit, show_all, paths = 150, False, []
    it = iter(argv)
    for a in it:
        if a == "--max":
            limit = int(next(it))
        elif a == "--all":
            show_all = True
        elif a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        else:
            paths.append(a)
    files = []
    for p in paths or ["src"]:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                files += [os.path.join(root, n) for n in names if n.endswith(EXTS)]
        else:
            files.append(p)
    rows = []
    for f in sorted(files):
        for name, a, b in functions(f):
            n = b - a + 1
            if show_all or n > limit:
                rows.append((n, f"{f}:{a}-{b}", name))
    rows.sort(key=lambda r: (-r[0], r[1]))
    for n, where, name in rows:
        print(f"{n:5d}  {where}  {name}")
    return 1 if any(n > limit for n, _, _ in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
