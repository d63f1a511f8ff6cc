#!/usr/bin/env python3
"""Markdown tables of a `python -m fusekit bench` JSON, for the README, one per op family: per op
and shape, each implementation's GPU time (CUDA-graph replay for M <= 256) or % of the copy
bandwidth measured in the same run, and for M = 1 the host time of one eager call (what a Python
caller waits). A baseline that did not run (an error, or skipped) shows "-".

    python3 bench/pybench_table.py bench/results/pybench-h100-2026-11-21.json [--all]

Without --all, the shapes the README shows: for the norms, M in {1, 32, 256, 2048, 16384, 65536}
at N = 4096 and M in {16384, 65536} at N = 5120 and 8192; for the gated activations (and their fp8 forms),
every M at N = 14336. A family none of whose rows is among those shows all of its rows.
"""
import argparse
import json

IMPLS = ["fusekit", "seed_triton", "compile", "eager"]
HEADERS = {"fusekit": "fusekit", "seed_triton": "seed Triton", "compile": "torch.compile",
           "eager": "eager"}
FAMILIES = ["norm", "act_and_mul"]
TITLES = {"norm": "Normalization ([M, N] -> [M, N])",
          "act_and_mul": "Gated activations (x [M, 2N] -> [M, N]; *_quant_fp8: e4m3fn codes and a "
                         "float32 scale per row)"}


def shown(family: str, m: int, n: int) -> bool:
    """Whether the README's table shows this shape."""
    if family == "act_and_mul":
        return n == 14336
    return n == 4096 or (n in (5120, 8192) and m >= 16384)


def cell(result: dict | None, m: int) -> str:
    if not result or "time_us" not in result:
        return "-"
    if m <= 256:
        text = f"{result['time_us']:.2f} us"
        if m == 1:
            text += f" (call {result['call_us']:.1f} us)"
        return text
    return f"{result['pct_copy']:.0f}%"


def table(rows: list) -> list:
    lines = ["| op | M x N | " + " | ".join(HEADERS[i] for i in IMPLS) + " |",
             "|---|---|" + "---|" * len(IMPLS)]
    for row in rows:
        m, n = row["M"], row["N"]
        cells = [cell(row["results"].get(i), m) for i in IMPLS]
        lines.append(f"| {row['op']} | {m} x {n} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--all", action="store_true", help="every shape of the run")
    args = ap.parse_args()
    doc = json.load(open(args.json))
    env = doc["env"]
    gpu = env.get("gpu")
    # The torch.compile column depends on how it was compiled (--compile); runs before the
    # option existed compiled one function per op for all shapes ("shared").
    compile_mode = (env.get("options") or {}).get("compile", "shared")
    print(f"<!-- {gpu['name'] if isinstance(gpu, dict) else env.get('device')}, commit "
          f"{(env.get('commit') or {}).get('commit')}, {env['date']}, copy "
          f"{doc['copy_GBps']:.0f} GB/s, torch.compile {compile_mode} -->")
    families = {}
    for row in doc["rows"]:  # rows of the first JSONs have no family: they are norms
        families.setdefault(row.get("family", "norm"), []).append(row)
    order = FAMILIES + sorted(set(families) - set(FAMILIES))
    first = True
    for family in (f for f in order if f in families):
        rows = families[family]
        picked = rows if args.all else [r for r in rows if shown(family, r["M"], r["N"])]
        if not first:
            print()
        first = False
        if len(families) > 1:
            print(f"{TITLES.get(family, family)}:")
            print()
        print("\n".join(table(picked or rows)))


if __name__ == "__main__":
    main()
