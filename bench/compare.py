#!/usr/bin/env python3
"""Compare a fusekit_bench --json result with the anchor measurements (anchor_bench.py's JSON).

Why it is shaped this way: the two programs measure the same way (cold-L2 median "us", graph
replay "graph_us" for M <= 256, bytes = inputs read once + outputs written once) but on their
own runs, so each side's % of copy bandwidth is computed against the copy bandwidth measured in
its own run, and the speedup uses the time that matters for the shape: graph replay for small M
(where launch overhead dominates a real model's step), cold time otherwise. Standard library
only, so it runs wherever the JSON files are.

usage: python3 bench/compare.py --fusekit FUSEKIT.json --anchors ANCHORS.json [--anchors MORE.json]
                                [--markdown OUT.md]
"""
import argparse
import json
import math
import sys

# fusekit op name -> the anchor script's op name.
OP_MAP = {
    "rms_norm": "rms_norm",
    "fused_add_rms_norm": "add_rms_norm",      # in place, as vLLM calls it
    "fused_add_rms_norm_oop": "add_rms_norm",  # out of place, as the anchors' seed kernels are
    "layer_norm": "layer_norm",
    "fused_add_layer_norm": "add_layer_norm",  # bench/baselines.py's name; not in the anchors
    "fused_add_layer_norm_oop": "add_layer_norm",
}
# Anchor implementations in the order shown; others found in the file follow.
PREFERRED_IMPLS = ["seed_triton", "compile", "eager"]
GRAPH_MAX_M = 256


def load(path):
    with open(path) as f:
        return json.load(f)


def num(v):
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def fmt_pct(pct):
    if pct is None:
        return "-"
    return "%.1f%%" % pct if pct < 10 else "%.0f%%" % pct


def cell(us, graph_us, pct):
    return "%s / %s / %s" % (fmt(us), fmt(graph_us), fmt_pct(pct))


def pct_of(gbps, copy):
    return None if gbps is None or not copy else 100.0 * gbps / copy


def anchor_tables(paths):
    """{(anchor_op, M, N): {impl_label: (us, graph_us, pct)}}, impl labels in order, env list."""
    table, labels, envs = {}, [], []
    for i, path in enumerate(paths):
        data = load(path)
        env = data.get("env", {})
        envs.append((path, env))
        copy = num(env.get("copy_GBps"))
        suffix = "" if len(paths) == 1 else "/r%d" % (i + 1)
        for row in data.get("rows", []):
            shape = row.get("shape") or []
            if len(shape) != 2:
                continue
            key = (row.get("op"), int(shape[0]), int(shape[1]))
            impls = [k for k, v in row.items() if isinstance(v, dict)]
            impls.sort(key=lambda k: PREFERRED_IMPLS.index(k) if k in PREFERRED_IMPLS
                       else len(PREFERRED_IMPLS))
            for impl in impls:
                v = row[impl]
                if "error" in v or num(v.get("us")) is None:
                    continue
                label = impl + suffix
                if label not in labels:
                    labels.append(label)
                table.setdefault(key, {})[label] = (
                    num(v.get("us")), num(v.get("graph_us")), pct_of(num(v.get("GBps")), copy))
    return table, labels, envs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fusekit", required=True, help="fusekit_bench --json output")
    ap.add_argument("--anchors", required=True, action="append",
                    help="anchor_bench.py output (repeat to add e.g. the peers file)")
    ap.add_argument("--markdown", help="also write the report to this file")
    args = ap.parse_args()

    ours = load(args.fusekit)
    env = ours.get("env", {})
    our_copy = num(env.get("copy_GBps"))
    anchors, labels, anchor_envs = anchor_tables(args.anchors)

    out = []
    out.append("# fusekit vs anchors\n")
    out.append("- fusekit %s (commit %s, %s): %s, %s mode, copy %s GB/s, graph floor %s us" % (
        env.get("fusekit_version", "?"), env.get("commit", "?"), env.get("date", "?"),
        env.get("device", "?"), env.get("mode", "?"), fmt(our_copy, ".0f"),
        fmt(num(env.get("graph_floor_us")))))
    for path, aenv in anchor_envs:
        out.append("- anchors %s: %s, copy %s GB/s, graph floor %s us" % (
            path, aenv.get("gpu", "?"), fmt(num(aenv.get("copy_GBps")), ".0f"),
            fmt(num(aenv.get("launch_floor_us_graph")))))
        if aenv.get("gpu") and aenv.get("gpu") != env.get("device"):
            out.append("  - **different devices**: compare % of copy, not times")
    out.append("")
    out.append("Cells: us (cold L2) / graph_us (graph replay, M <= %d) / %% of that run's copy "
               "bandwidth (from us). Speedup: best anchor time / fusekit time, graph time for "
               "M <= %d, cold time otherwise.\n" % (GRAPH_MAX_M, GRAPH_MAX_M))

    header = ["op", "M", "N", "fusekit"] + labels + ["speedup vs best"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    speedups, skipped_dtype = [], 0
    for row in ours.get("rows", []):
        anchor_op = OP_MAP.get(row.get("op"))
        shape = row.get("shape") or []
        if anchor_op is None or len(shape) != 2:
            continue
        if row.get("dtype", "bf16") != "bf16":  # the anchors are bf16
            skipped_dtype += 1
            continue
        m, n = int(shape[0]), int(shape[1])
        theirs = anchors.get((anchor_op, m, n))
        if not theirs:
            continue
        us, g_us = num(row.get("us")), num(row.get("graph_us"))
        use_graph = m <= GRAPH_MAX_M and g_us is not None
        mine = g_us if use_graph else us
        best = None
        for label, (a_us, a_g, _) in theirs.items():
            t = a_g if use_graph else a_us
            if t is not None and (best is None or t < best[1]):
                best = (label, t)
        cells = [row["op"], str(m), str(n),
                 cell(us, g_us, pct_of(num(row.get("GBps")), our_copy))]
        cells += [cell(*theirs[label]) if label in theirs else "-" for label in labels]
        if best is not None and mine:
            s = best[1] / mine
            speedups.append(s)
            cells.append("**%.2fx** vs %s (%s)" % (s, best[0], "graph" if use_graph else "cold"))
        else:
            cells.append("-")
        lines.append("| " + " | ".join(cells) + " |")

    if len(lines) == 2:
        print("no bf16 (op, shape) in %s matches the anchors (%d non-bf16 rows left out); the "
              "anchors cover: %s" % (args.fusekit, skipped_dtype,
                                     ", ".join(sorted({"%s %dx%d" % k for k in anchors}))),
              file=sys.stderr)
        return 1
    out += lines
    if speedups:
        geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        out.append("\nGeometric mean speedup over the best anchor: %.2fx over %d rows "
                   "(%d faster, %d slower)." % (geo, len(speedups),
                                                sum(s > 1 for s in speedups),
                                                sum(s < 1 for s in speedups)))
    if skipped_dtype:
        out.append("\n%d non-bf16 rows left out (the anchors are bf16)." % skipped_dtype)
    text = "\n".join(out) + "\n"
    print(text, end="")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
