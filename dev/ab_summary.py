#!/usr/bin/env python3
"""The summary of a dev/ab_bench.sh run (not part of the build).

Reads DIR/GROUP-TREE-rROUND.json (fusekit_bench --json) and prints, per group and cell, each
tree's median over its rounds (graph-replay us where M <= 256 and the run has it, else the cold
us), the ratios to the first tree, and every round's value, so that a reader sees the spread.

  python3 dev/ab_summary.py DIR base,new
"""
import glob
import json
import os
import re
import statistics
import sys

FILE = re.compile(r"(?P<group>[^-]+)-(?P<tree>.+)-r(?P<round>\d+)\.json$")


def cell_time(row):
    """Graph replay at decode sizes (what a model's step sees), else the cold-L2 time."""
    if row["shape"][0] <= 256 and row.get("graph_us"):
        return row["graph_us"]
    return row["us"]


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    directory, trees = argv[1], argv[2].split(",")
    groups = {}  # group -> {cell: {tree: [(round, us)]}}, cells in first-seen order
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        match = FILE.match(os.path.basename(path))
        if not match or match["tree"] not in trees:
            continue
        try:
            rows = json.load(open(path))["rows"]
        except (OSError, ValueError, KeyError) as error:
            print(f"# {path}: {error}")
            continue
        cells = groups.setdefault(match["group"], {})
        for row in rows:
            key = (row["op"], row["shape"][0], row["shape"][1], row["dtype"])
            cells.setdefault(key, {}).setdefault(match["tree"], []).append(
                (int(match["round"]), cell_time(row)))
    for group, cells in groups.items():
        print(f"== {group}: " + " ".join(trees) + f" (us), ratios to {trees[0]}")
        for (op, m, n, dtype), per_tree in cells.items():
            medians = [statistics.median(v for _, v in per_tree[t]) if t in per_tree
                       else float("nan") for t in trees]
            ratios = " ".join(f"{x / medians[0]:.3f}" for x in medians[1:])
            rounds = " | ".join("/".join(f"{v:.2f}" for _, v in sorted(per_tree.get(t, [])))
                                for t in trees)
            print(f"{op:<30} {m:>6} {n:>6} {dtype:<4} "
                  + " ".join(f"{x:8.2f}" for x in medians) + f"  {ratios}  ({rounds})")


if __name__ == "__main__":
    main(sys.argv)
