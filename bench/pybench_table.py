#!/usr/bin/env python3
"""Markdown table of a `python -m fusekit bench` JSON, for the README: per op and shape, each
implementation's GPU time (CUDA-graph replay for M <= 256) or % of the copy bandwidth measured in
the same run, and for M = 1 the host time of one eager call (what a Python caller waits).

    python3 bench/pybench_table.py bench/results/pybench-h100-2026-11-21.json [--all]

Without --all, the shapes the README shows: M in {1, 32, 256, 2048, 16384, 65536} at N = 4096,
and M in {16384, 65536} at N = 8192.
"""
import argparse
import json

IMPLS = ["fusekit", "seed_triton", "compile", "eager"]
HEADERS = {"fusekit": "fusekit", "seed_triton": "seed Triton", "compile": "torch.compile",
           "eager": "eager"}


def cell(result: dict | None, m: int) -> str:
    if not result:
        return "-"
    if m <= 256:
        text = f"{result['time_us']:.2f} us"
        if m == 1:
            text += f" (call {result['call_us']:.1f} us)"
        return text
    return f"{result['pct_copy']:.0f}%"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--all", action="store_true", help="every shape of the run")
    args = ap.parse_args()
    doc = json.load(open(args.json))
    env = doc["env"]
    gpu = env.get("gpu")
    print(f"<!-- {gpu['name'] if isinstance(gpu, dict) else env.get('device')}, commit "
          f"{(env.get('commit') or {}).get('commit')}, {env['date']}, copy "
          f"{doc['copy_GBps']:.0f} GB/s -->")
    print("| op | M x N | " + " | ".join(HEADERS[i] for i in IMPLS) + " |")
    print("|---|---|" + "---|" * len(IMPLS))
    for row in doc["rows"]:
        m, n = row["M"], row["N"]
        if not args.all and not (n == 4096 or (n == 8192 and m >= 16384)):
            continue
        cells = [cell(row["results"].get(i), m) for i in IMPLS]
        print(f"| {row['op']} | {m} x {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
