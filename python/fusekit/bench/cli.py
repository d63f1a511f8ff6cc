"""`python -m fusekit bench`: fusekit against PyTorch eager, torch.compile and (given their
directory) the seed Triton kernels, on the default shapes or the ones asked for; a table at the
end, JSON and a PNG plot. The methods are described in timing.py and the compared code in
baselines.py; the table's and the JSON's fields in report.py.

Exit status: 0 when every fusekit measurement ran (a baseline that fails is reported, not fatal),
1 when one did not or its output is outside the tolerance its op defines against eager's (the fp8
forms: see baselines.compare_fp8), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import numbers
import os
import statistics
import sys
import warnings

import torch

from . import baselines, plot, report, timing
from .progress import Progress

SMALL_M = 256  # up to this batch size, GPU time is CUDA-graph replay time
REFERENCE_ROWS = 1024  # the rows of eager's output that every implementation is checked on
DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
          "float16": torch.float16, "half": torch.float16, "fp32": torch.float32,
          "float32": torch.float32, "float": torch.float32}
QUICK = {"M": [1, 256, 2048], "N": [4096]}
# On the CPU, calls moving more than this are skipped unless --max-bytes says otherwise (as the
# C++ benchmark does): the default shapes' largest take eager seconds a call on a host, and the
# whole plan hours. --quick's few shapes are small enough as they are.
CPU_DEFAULT_MAX_BYTES = 64 << 20
DEFAULT_SHAPES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shapes.json")


def _ints(text: str) -> list:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values:  # an empty list would fall back to the shapes file's: the option ignored
        raise argparse.ArgumentTypeError(f"expected comma-separated integers but got {text!r}")
    return values


def _size(text: str) -> int:
    """Bytes, with an optional K, M or G suffix (powers of 1024): "4096", "64M", "4G"."""
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    try:
        value = float(text[:-1] if scale > 1 else text) * scale
    except ValueError:
        value = -1.0
    if not (value >= 0 and math.isfinite(value)):  # int(inf) raises OverflowError
        raise argparse.ArgumentTypeError(f"expected a size such as 4096, 64M or 4G but got "
                                         f"{text!r}")
    return int(value)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _names(text: str) -> list:
    names = [v.strip() for v in text.split(",") if v.strip()]
    if not names:  # an empty list would mean the default: the option ignored
        raise argparse.ArgumentTypeError(f"expected comma-separated names but got {text!r}")
    return names


def _check_section(ap, path: str, family: str, section) -> None:
    """Usage errors (exit 2) for a section the benchmark cannot use, as fusekit_bench gives
    them, instead of a traceback from deep in the run or shapes of floats and strings."""
    where = f"--shapes: {path}: {family}"
    if not isinstance(section, dict):
        ap.error(f"{where}: expected an object with ops, M and N")
    ops = section.get("ops", [])
    if not isinstance(ops, list) or not all(isinstance(op, str) for op in ops):
        ap.error(f"{where}.ops: expected a list of op names but got {ops!r}")
    for key in ("M", "N"):
        values = section.get(key, [])
        if not isinstance(values, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
            ap.error(f"{where}.{key}: expected a list of positive integers but got {values!r}")
    limit = section.get("skip_if_bytes_over", 0)
    if (isinstance(limit, bool) or not isinstance(limit, numbers.Real)
            or not limit >= 0):
        ap.error(f"{where}.skip_if_bytes_over: expected a non-negative number but got "
                 f"{limit!r}")
    dtype = section.get("dtype", "bf16")
    if not isinstance(dtype, str) or dtype not in DTYPES:
        ap.error(f"{where}.dtype: expected one of {sorted(DTYPES)} but got {dtype!r}")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m fusekit bench",
        description="Time fusekit's ops against PyTorch eager, torch.compile and the seed "
                    "Triton kernels; print a table, write JSON and a PNG plot.")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES,
                    help="JSON with a section per op family (ops, M, N, skip_if_bytes_over); "
                         "default: the packaged copy of bench/shapes.json")
    ap.add_argument("--family", type=_names,
                    help=f"comma-separated, of {', '.join(baselines.FAMILIES)} ('act' for "
                         "act_and_mul); default: every family of the shapes file")
    ap.add_argument("--ops", type=_names,
                    help=f"comma-separated, of {', '.join(baselines.OPS)}; default: the ops the "
                         "shapes file lists (an fp8 form runs where its plain op is listed)")
    ap.add_argument("--M", type=_ints, help="batch sizes (rows), comma-separated")
    ap.add_argument("--N", type=_ints,
                    help="hidden sizes (for act_and_mul: the output width; x is [M, 2N]), "
                         "comma-separated")
    ap.add_argument("--dtype", choices=sorted(DTYPES),
                    help="the dtype of every case (default: each shapes file section's "
                         "\"dtype\", else bf16, as fusekit_bench)")
    ap.add_argument("--impls", type=_names, default=list(baselines.IMPLS),
                    help=f"comma-separated, of {', '.join(baselines.IMPLS)} (default: all; "
                         "seed_triton needs --seed-dir)")
    ap.add_argument("--compile", default="per-n", choices=baselines.COMPILE_MODES,
                    help="torch.compile baseline: one compiled function per op and hidden size, "
                         "dynamic in M from its second batch size on (per-n, the default: a "
                         "model of one hidden size), one per op for all shapes (shared, as the "
                         "anchors' script: every size dynamic once N changes) or a fresh compile "
                         "specialised to each shape (per-shape)")
    ap.add_argument("--seed-dir", default=os.environ.get("FUSEKIT_SEED_DIR"),
                    help="directory holding seed_triton.py (default: $FUSEKIT_SEED_DIR)")
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"],
                    help="auto: the GPU when torch sees one, else the CPU (host timings)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time each shape's implementations this many times in turn (A B C A B "
                         "C ...) and report each one's median round; a cell's neighbours and "
                         "its place in the run then weigh less (default 1)")
    ap.add_argument("--size-copy", action="store_true",
                    help="also time, per shape, a copy moving the row's bytes (half read, half "
                         "written) by the same method as its calls, and give each "
                         "implementation as %% of it: the roofline at that size, which calls "
                         "of tens of MB cannot reach at the 1 GiB copy's rate")
    ap.add_argument("--max-bytes", type=_size,
                    help="skip calls moving more bytes than this (K/M/G suffixes; 0: no bound); "
                         "default: "
                         f"{CPU_DEFAULT_MAX_BYTES >> 20}M on the CPU (but for --quick), no bound "
                         "on the GPU (the shapes file's skip_if_bytes_over applies in any case)")
    ap.add_argument("--quick", action="store_true",
                    help=f"few shapes (M {QUICK['M']}, N {QUICK['N']} unless given) and few runs")
    ap.add_argument("--json", default="fusekit-bench.json", help="output JSON ('' for none)")
    ap.add_argument("--plot", default="fusekit-bench.png", help="output PNG ('' for none)")
    ap.add_argument("--plot-n", default="4096",
                    help="the N whose rows are plotted (for each op the nearest one run), or "
                         "'all'")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return ap


def _families(args, ap, shapes: dict) -> list:
    """The families to run: --family's, else those of --ops, else those the shapes file has."""
    if args.family:
        families = [baselines.FAMILY_ALIASES.get(f, f) for f in args.family]
        unknown = [f for f in families if f not in baselines.FAMILIES]
        if unknown:
            ap.error(f"--family: unknown {unknown}; expected some of {list(baselines.FAMILIES)}"
                     f" (or {', '.join(baselines.FAMILY_ALIASES)})")
    elif args.ops:
        families = list(baselines.FAMILIES)
    else:
        families = [f for f in baselines.FAMILIES if f in shapes]
        if not families:
            ap.error(f"--shapes: {args.shapes} has no section of a known op family (expected "
                     f"some of {list(baselines.FAMILIES)})")
    return [f for f in baselines.FAMILIES if f in families]


def _plan(args, ap) -> list:
    """[(specs, Ms, Ns, byte limit)], one entry per family to run, from the shapes file and the
    overrides."""
    try:
        with open(args.shapes, encoding="utf-8") as f:
            shapes = json.load(f)
    except (OSError, ValueError) as error:
        ap.error(f"--shapes: cannot read {args.shapes}: {error}")
    if not isinstance(shapes, dict):
        ap.error(f"--shapes: {args.shapes}: expected a JSON object (a section per op family) "
                 f"but got {type(shapes).__name__}")
    if not any(isinstance(shapes.get(f), dict) for f in baselines.FAMILIES) and "M" in shapes:
        shapes = {"norm": shapes}  # a file of one section, the norms' (the first format)
    families = _families(args, ap, shapes)
    if args.ops:
        unknown = [op for op in args.ops if op not in baselines.OPS]
        if unknown:
            ap.error(f"--ops: unknown {unknown}; expected some of {list(baselines.OPS)}")
        elsewhere = [op for op in args.ops if baselines.OPS[op].family not in families]
        if elsewhere:
            ap.error(f"--ops: {elsewhere} are not in the families chosen by --family {families}")
    bad = [name for name in args.impls if name not in baselines.IMPLS]
    if bad:
        ap.error(f"--impls: unknown {bad}; expected some of {list(baselines.IMPLS)}")
    if args.plot_n != "all" and not args.plot_n.isdigit():
        ap.error(f"--plot-n: expected a number or 'all' but got {args.plot_n!r}")

    plan = []
    for family in families:
        section = shapes.get(family)
        if section is not None:
            _check_section(ap, args.shapes, family, section)
        section = section if isinstance(section, dict) else {}
        if args.ops:
            specs = [baselines.OPS[op] for op in args.ops if baselines.OPS[op].family == family]
        else:
            known = baselines.family_ops(family)
            listed = section.get("ops", [spec.shapes_name for spec in known])
            specs = [spec for spec in known if spec.shapes_name in listed]
            strange = sorted(set(listed) - {spec.shapes_name for spec in known})
            if strange:
                print(f"note: --shapes: {family}.ops {strange} skipped: not known to the "
                      "benchmark", file=sys.stderr)
        if not specs:
            continue
        ms = args.M or (QUICK["M"] if args.quick else section.get("M"))
        ns = args.N or (QUICK["N"] if args.quick else section.get("N"))
        if not ms or not ns or min(ms + ns) < 1:
            ap.error(f"{family}: expected positive M and N lists (from the shapes file's "
                     f"'{family}' section, or --M and --N) but got M={ms} N={ns}")
        dtype = DTYPES[args.dtype or section.get("dtype", "bf16")]
        plan.append((specs, ms, ns, section.get("skip_if_bytes_over", 0), dtype))
    if not plan:
        ap.error("no op to run: the families chosen list none")
    return plan


def _warm(spec, fn, args, want):
    """A call of `fn` on `args` and how its output compares with eager's (`want`). Its first
    call compiles, loads and warms up."""
    def call():
        return fn(*args)

    return call, spec.compare(call(), want)


def _combine(rounds: list) -> dict:
    """One result from the rounds of measure(): each time the median over the rounds, and with
    more than one round, every round's time (rounds_us)."""
    result = dict(rounds[0])
    for key in ("cold_us", "graph_us", "time_us"):
        values = [r[key] for r in rounds if key in r]
        if len(values) == len(rounds):
            result[key] = statistics.median(values)
        else:
            result.pop(key, None)  # not a median of every round
    if len({r["method"] for r in rounds}) > 1:
        # A graph that failed to capture in some rounds: time_us would be the median of graph
        # and cold times together, labelled as rounds[0]'s method. Report the cold time, which
        # every round has.
        result.update(time_us=result["cold_us"], method="cold",
                      graph_error=next(r["graph_error"] for r in rounds if "graph_error" in r))
    if len(rounds) > 1:
        result["rounds_us"] = [r["time_us"] for r in rounds]
    return result


def _size_copy(timer, nbytes: int, small: bool) -> dict:
    """A copy moving `nbytes` in all (half read from one buffer, half written to another), timed
    as timer.measure times a call of that batch size: the roofline at the row's size."""
    half = max(nbytes // 2, 1)
    src = torch.full((half,), 7, dtype=torch.uint8, device=timer.device)
    dst = torch.empty_like(src)
    return timer.measure(lambda: dst.copy_(src), small)


def _failed(timer, error: BaseException) -> dict:
    if timer.device == "cuda":
        torch.cuda.synchronize()
    return {"error": timing.short_error(error)}


def run(args, ap) -> int:
    groups = _plan(args, ap)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch sees no GPU")
    if args.rounds < 1:
        ap.error("--rounds: at least 1")
    settings = timing.Settings.quick() if args.quick else timing.Settings()
    timer = timing.make_timer(device, settings)
    impls = baselines.Implementations(device, tuple(args.impls), args.seed_dir, args.compile)
    if device == "cpu":
        print("No GPU in use: timing on the CPU with the host clock (no CUDA graphs, no L2 "
              "flush).", file=sys.stderr)
    # fusekit warns once per op when it falls back to eager; the rows say so instead.
    warnings.filterwarnings("ignore", message=r"fusekit\.", category=RuntimeWarning)
    torch.manual_seed(0)

    max_bytes = args.max_bytes
    if max_bytes is None and device == "cpu" and not args.quick:
        max_bytes = CPU_DEFAULT_MAX_BYTES
    plan, skipped = [], []
    for specs, ms, ns, limit, dtype in groups:
        for spec in specs:
            for n in ns:
                for m in ms:
                    nbytes = spec.bytes(m, n, dtype)
                    # 0 is no bound, for both limits, as fusekit_bench reads them.
                    if limit and nbytes > limit:
                        skipped.append({"op": spec.name, "family": spec.family, "M": m, "N": n,
                                        "reason": "skip_if_bytes_over", "limit": limit})
                    elif max_bytes and nbytes > max_bytes:
                        skipped.append({"op": spec.name, "family": spec.family, "M": m, "N": n,
                                        "reason": "max_bytes", "limit": max_bytes})
                    else:
                        plan.append((spec, m, n, dtype))
    if not plan:  # as fusekit_bench: bad usage, not an empty table and success
        ap.error(f"no cases to run: all {len(skipped)} are over a byte limit "
                 "(--max-bytes or the shapes file's skip_if_bytes_over)")
    steps = {spec.name: len(impls.for_op(spec)) for specs, *_ in groups for spec in specs}
    copies = len(plan) if args.size_copy else 0
    progress = Progress(1 + copies + args.rounds * sum(steps[spec.name] for spec, *_ in plan),
                        enabled=not args.no_progress)
    progress.start("copy bandwidth")
    copy_gbps = timer.copy_gbps(groups[0][4])  # a rate of bytes: the same for any dtype
    progress.step("copy bandwidth")

    rows = []
    for spec, m, n, dtype in plan:
        row = {"op": spec.name, "family": spec.family, "M": m, "N": n, "dtype": _name(dtype),
               "bytes": spec.bytes(m, n, dtype), "results": {}}
        call_args = want = snapshot = None
        try:
            call_args = spec.make_args(m, n, dtype, device)
            snapshot = spec.inputs_snapshot(call_args)  # inputs a call updates in place
            want = spec.reference(spec.eager(*call_args), REFERENCE_ROWS)
        except Exception as error:  # out of memory, most likely: each entry says so
            call_args = None
            why_not = f"making the inputs failed: {timing.short_error(error)}"
        # Every implementation warmed up first, then timed in turn, round after round.
        small = device == "cuda" and m <= SMALL_M
        ready, checks, rounds = {}, {}, {}
        for name, fn in impls.for_op(spec, (m, n)).items():
            if isinstance(fn, baselines.NotRun):
                row["results"][name] = fn.result()
            elif call_args is None:
                row["results"][name] = {"error": why_not}
            else:
                progress.start(f"{spec.name} {m}x{n} {name}")
                try:  # one implementation failing must not stop the others
                    spec.restore_inputs(call_args, snapshot)
                    ready[name], checks[name] = _warm(spec, fn, call_args, want)
                    rounds[name] = []
                except Exception as error:
                    row["results"][name] = _failed(timer, error)
            if name not in ready:  # no rounds to time: its steps are done
                for _ in range(args.rounds):
                    progress.step(f"{spec.name} {m}x{n} {name}")
        for round_index in range(args.rounds):
            for name in list(ready):
                label = f"{spec.name} {m}x{n} {name}"
                if args.rounds > 1:
                    label += f" (round {round_index + 1}/{args.rounds})"
                progress.start(label)
                try:
                    rounds[name].append(timer.measure(ready[name], small))
                except Exception as error:
                    row["results"][name] = _failed(timer, error)
                    del ready[name]
                    for _ in range(args.rounds - round_index - 1):  # its later rounds
                        progress.step(label)
                progress.step(label)
        for name, call in ready.items():
            try:
                result = _combine(rounds[name])
                result["call_us"] = timer.call_us(call)
                result.update(checks[name])
                if name == "fusekit":
                    result["backend"] = baselines.fusekit_backend(spec, call_args)
                row["results"][name] = result
            except Exception as error:
                row["results"][name] = _failed(timer, error)
        for name, result in row["results"].items():
            if name == "compile" and "error" in result:
                impls.failed(spec, name, result["error"])
        if args.size_copy:
            label = f"{spec.name} {m}x{n} copy of the same bytes"
            progress.start(label)
            try:
                row["copy"] = _size_copy(timer, row["bytes"], small)
            except Exception as error:  # out of memory, most likely
                row["copy"] = _failed(timer, error)
            progress.step(label)
        # The table lists the implementations in the run's order.
        row["results"] = {name: row["results"][name] for name in impls.for_op(spec)
                          if name in row["results"]}
        report.derive(row, copy_gbps)
        rows.append(row)
        del call_args, want, snapshot
        if device == "cuda":
            torch.cuda.empty_cache()
    progress.close()

    options = {k: v for k, v in vars(args).items() if k not in ("no_progress",)}
    env = report.environment(device, timer.method_note, options)
    print(report.summary(env, copy_gbps))
    for family in dict.fromkeys(row["family"] for row in rows):
        print()
        family_rows = [row for row in rows if row["family"] == family]
        dtypes = ", ".join(dict.fromkeys(row["dtype"] for row in family_rows))
        print(report.family_title(family, dtypes))
        print(report.table(family_rows, device))
    for reason, why in (("skip_if_bytes_over", "over the shapes file's skip_if_bytes_over"),
                        ("max_bytes", "over --max-bytes" + (
                            "" if args.max_bytes is not None else
                            f" ({CPU_DEFAULT_MAX_BYTES >> 20}M on the CPU by default)"))):
        these = [s for s in skipped if s["reason"] == reason]
        if these:
            print(f"skipped ({why}): " + ", ".join(
                f"{s['op']} {s['M']}x{s['N']} (> {s['limit']} bytes)" for s in these))
    if args.json:
        report.write_json(args.json, env, copy_gbps, rows, skipped)
        print(f"wrote {args.json}")
    if args.plot:
        where = env["gpu"]["name"] if env["gpu"] else "CPU (host timings)"
        dtypes = ", ".join(dict.fromkeys(row["dtype"] for row in rows))
        why = plot.plot(rows, args.plot, args.plot_n, f"fusekit bench: {where}, {dtypes}",
                        SMALL_M if device == "cuda" else None)
        print(f"warning: {why}" if why else f"wrote {args.plot}",
              file=sys.stderr if why else sys.stdout)
    failed = [r for r in rows if "error" in r["results"].get("fusekit", {})
              or r["results"].get("fusekit", {}).get("within_tolerance") is False]
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    return run(args, ap)


if __name__ == "__main__":
    sys.exit(main())
