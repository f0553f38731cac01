#!/usr/bin/env python3
"""include_graph.py: which folders of src/ include which (docs/architecture.md, issue 21).

    /usr/bin/python3 scripts/include_graph.py [--files] [--ignore DIR ...] [--skip FILE ...]

For each folder src/D (util left out unless named), the other folders src/E whose headers
its files #include ("E/..." relative to src/, as the Makefile's -Isrc resolves them; a
bare "x.h" resolves beside the including file, then in src/). Prints one line per folder,
`D -> E1 E2 ...`, then every pair of folders that include each other (a cycle of two) and
any longer cycle, and exits 1 when there is a cycle, 0 otherwise. --files adds, under each
edge, the files that make it. --ignore DIR drops a folder's edges from the cycle check
(its own and those into it), e.g. --ignore kernels. --skip FILE leaves one file's
#includes out altogether (what the graph becomes when that file changes). Without a
cycle it also prints the layering: the folders lowest first, each after every folder it
includes (folders that include each other share a line).
"""
import os
import re
import sys

INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
EXTS = (".c", ".h", ".cu", ".cuh")


def folder_of(path):
    parts = os.path.relpath(path, "src").split(os.sep)
    return parts[0] if len(parts) > 1 else "(src)"


def graph(skip=()):
    edges = {}
    for root, _, names in os.walk("src"):
        for n in sorted(names):
            if not n.endswith(EXTS):
                continue
            f = os.path.join(root, n)
            if os.path.normpath(f) in skip:
                continue
            d = folder_of(f)
            with open(f, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    m = INC.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    beside = os.path.normpath(os.path.join(root, inc))
                    target = beside if os.path.exists(beside) else os.path.join("src", inc)
                    e = folder_of(target)
                    if e != d:
                        edges.setdefault(d, {}).setdefault(e, []).append(f"{f} -> {inc}")
    return edges


def cycles(edges, ignore):
    """Strongly connected components of more than one folder (Tarjan)."""
    adj = {d: [e for e in es if e not in ignore and e != "util"]
           for d, es in edges.items() if d not in ignore and d != "util"}
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(adj):
        if v not in index:
            visit(v)
    pairs = sorted((a, b) for a in adj for b in adj[a] if a < b and a in adj.get(b, []))
    return pairs, out


def layers(edges, ignore):
    """The folders lowest first; a strongly connected group (e.g. model and kernels when
    kernels is not ignored) stands as one entry, its folders joined by '+'."""
    nodes = set(edges) | {e for es in edges.values() for e in es}
    # condense the cycles that the ignore set lets stand
    adj = {d: set(es) - {d} for d, es in edges.items()}
    group = {n: n for n in nodes}
    for d in ignore:
        for e in list(adj.get(d, ())):
            if d in adj.get(e, ()):
                g = "+".join(sorted({group[d], group[e]}))
                for n in nodes:
                    if group[n] in (group[d], group[e]):
                        group[n] = g
    deps = {}
    for d, es in adj.items():
        for e in es:
            if group[e] != group[d]:
                deps.setdefault(group[d], set()).add(group[e])
    order, done = [], set()
    pending = sorted(set(group.values()))
    while pending:
        ready = [g for g in pending if deps.get(g, set()) <= done]
        if not ready:
            return None
        for g in ready:
            order.append(g)
            done.add(g)
        pending = [g for g in pending if g not in done]
    return order


def main(argv):
    files = "--files" in argv
    ignore = {argv[i + 1] for i, a in enumerate(argv) if a == "--ignore" and i + 1 < len(argv)}
    skip = {os.path.normpath(argv[i + 1]) for i, a in enumerate(argv) if a == "--skip" and i + 1 < len(argv)}
    edges = graph(skip)
    for d in sorted(edges):
        print(f"{d} -> {' '.join(sorted(edges[d]))}")
        if files:
            for e in sorted(edges[d]):
                for why in edges[d][e]:
                    print(f"    {why}")
    pairs, comps = cycles(edges, ignore)
    for a, b in pairs:
        print(f"cycle: {a} <-> {b}")
    for c in comps:
        print(f"strongly connected: {' '.join(c)}")
    if not comps:
        order = layers(edges, ignore)
        if order:
            print("layering (lowest first): " + " < ".join(order))
    return 1 if comps else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
