#!/usr/bin/env python3
"""function_lengths.py -- the length of every C function in khub's production
folders, for the function budget (docs/ARCHITECTURE.md, "Function budget").

A function is a line at column 0 that ends a declarator (the name and its
parameter list), followed by a line holding only "{" and ending at the next
line holding only "}": our style (STYLE.md) writes every definition that way.
Its length is the count of lines from "{" to "}" inclusive.

usage: function_lengths.py [--over N] [--top K] [ROOT]
  prints "LINES FILE:LINE NAME" for each function longer than N (default 80),
  longest first, and a last line "total: C functions over N lines, longest L".
"""
import os
import re
import sys

FOLDERS = ("accounts", "api", "builder-worker", "common", "farm", "http", "kernel", "mirror",
           "server", "storage", "sync", "web")
NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def functions(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i] == "{" and i > 0:
            # the declarator: walk back to the line at column 0 that opens it
            j = i - 1
            while j > 0 and (lines[j].startswith((" ", "\t")) or lines[j] == ""):
                j -= 1
            head = " ".join(lines[j:i])
            m = None
            for m in NAME.finditer(head.split("(")[0] + "("):
                pass
            name = m.group(1) if m else "?"
            k = i + 1
            while k < len(lines) and lines[k] != "}":
                k += 1
            yield name, j + 1, k - i + 1
            i = k
        i += 1


def main(argv):
    over, top, root = 80, None, "."
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--over":
            over = int(args.pop(0))
        elif a == "--top":
            top = int(args.pop(0))
        else:
            root = a
    found = []
    for folder in FOLDERS:
        base = os.path.join(root, folder)
        for dirpath, _, files in os.walk(base):
            if "node_modules" in dirpath:
                continue
            for name in sorted(files):
                if not name.endswith(".c"):
                    continue
                path = os.path.join(dirpath, name)
                for fn, line, length in functions(path):
                    if length > over:
                        found.append((length, os.path.relpath(path, root), line, fn))
    found.sort(key=lambda t: (-t[0], t[1]))
    for length, path, line, fn in found[:top] if top else found:
        print(f"{length} {path}:{line} {fn}")
    longest = found[0][0] if found else 0
    print(f"total: {len(found)} functions over {over} lines, longest {longest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
