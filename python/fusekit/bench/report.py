"""What a benchmark run leaves behind: the derived numbers of each row (GB/s, % of the copy
bandwidth, fusekit's speedups), the environment that makes a result reproducible (GPU, versions,
fusekit's build, commit, date), the JSON document, and the plain-text tables printed at the end
(one per op family).

JSON schema (version 1):
  {"schema": 1, "env": {...}, "copy_GBps": float, "rows": [row, ...], "skipped": [...]}
  row: {"op", "family" ("norm" | "act_and_mul"), "M", "N", "dtype", "bytes",
        "results": {impl: result},
        "copy"? (--size-copy: a copy moving the row's bytes, timed as its calls: {"time_us",
        "method", ...} as a result's, or {"error"})}
       (act_and_mul rows: N is the output width, the input x is [M, 2N]; the *_quant_fp8 ops
       write e4m3fn codes and a float32 scale per row)
  result: {"time_us", "method" ("graph" | "cold" | "host"), "cold_us"?, "graph_us"?,
           "rounds_us"? (--rounds > 1: each round's time; the times above are their medians),
           "call_us",
           "GBps", "pct_copy", "pct_size_copy"? (--size-copy: copy time_us / time_us, in %),
           "max_abs_diff_vs_eager" (fp8 ops: of the decoded values,
           codes * scale), "fp8_max_steps_vs_eager"?, "scale_max_rel_diff_vs_eager"?,
           "within_tolerance"? (fp8 ops: codes within one e4m3fn step of eager's, scales within
           1e-3), "backend"? (fusekit only), "speedup"? / "call_speedup"? (fusekit only: baseline
           time / fusekit time per baseline)}
          or {"error": "why it did not run"} (it was tried and failed, or could not be loaded)
          or {"skipped": "why it cannot run here"} (the seed Triton kernels on the CPU, or
          without triton)
  skipped: {"op", "family", "M", "N", "reason": "skip_if_bytes_over" or "max_bytes", "limit"}
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import subprocess

import torch

from .baselines import COMPILE_MODE_NOTES

SCHEMA = 1


def derive(row: dict, copy_gbps: float) -> None:
    """Adds GB/s and % of copy bandwidth to each result, and fusekit's speedups over the others."""
    size_copy_us = row.get("copy", {}).get("time_us")
    for result in row["results"].values():
        if "time_us" in result:
            result["GBps"] = row["bytes"] / (result["time_us"] * 1e-6) / 1e9
            result["pct_copy"] = 100.0 * result["GBps"] / copy_gbps
            if size_copy_us is not None:
                result["pct_size_copy"] = 100.0 * size_copy_us / result["time_us"]
    ours = row["results"].get("fusekit", {})
    if "time_us" not in ours:
        return
    for key, field in (("speedup", "time_us"), ("call_speedup", "call_us")):
        ours[key] = {name: result[field] / ours[field]
                     for name, result in row["results"].items()
                     if name != "fusekit" and field in result}


def _git(args: list, cwd: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10,
                          check=True)
    return done.stdout.strip()


def commit() -> dict | None:
    """The fusekit commit: from $FUSEKIT_COMMIT, else git, if the package runs from a checkout."""
    if os.environ.get("FUSEKIT_COMMIT"):
        return {"commit": os.environ["FUSEKIT_COMMIT"], "source": "FUSEKIT_COMMIT"}
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        top = _git(["rev-parse", "--show-toplevel"], here)
        if not os.path.isdir(os.path.join(top, "include", "fusekit")):
            return None  # some other repository holds the installed package
        dirty = bool(_git(["status", "--porcelain", "--untracked-files=no"], top))
        return {"commit": _git(["rev-parse", "HEAD"], top), "dirty": dirty, "source": "git"}
    except (OSError, subprocess.SubprocessError):
        return None


def environment(device: str, timing_note: str, options: dict) -> dict:
    import fusekit

    try:
        import triton
        triton_version = triton.__version__
    except Exception:  # not installed, or broken: the seed kernels then do not run either
        triton_version = None
    gpu = None
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        gpu = {"name": props.name, "sms": props.multi_processor_count,
               "memory_GiB": round(props.total_memory / 2**30, 1),
               "l2_MiB": round(props.L2_cache_size / 2**20, 1)}
    build_info = getattr(fusekit, "build_info", None)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device,
        "gpu": gpu,
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "torch_hip": getattr(torch.version, "hip", None),
        "triton": triton_version,
        "fusekit": getattr(fusekit, "__version__", None),
        "fusekit_build": build_info() if callable(build_info) else None,
        "commit": commit(),
        "timing": timing_note,
        "options": options,
    }


def _finite(value):
    """`value` with every NaN and infinity (which JSON cannot hold) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def write_json(path: str, env: dict, copy_gbps: float, rows: list, skipped: list) -> None:
    document = {"schema": SCHEMA, "env": env, "copy_GBps": copy_gbps, "rows": rows,
                "skipped": skipped}
    # json.dump would write NaN and Infinity as bare tokens, which strict readers reject: null.
    with open(path, "w", encoding="utf-8") as f:
        json.dump(_finite(document), f, indent=1, allow_nan=False)
        f.write("\n")


# ---- the tables ----------------------------------------------------------------------------------

def _us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 1000 else f"{value:.0f}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _note(notes: list, text: str) -> int:
    """The number of a note (the same text is noted once)."""
    if text not in notes:
        notes.append(text)
    return notes.index(text) + 1


def _cells(key: list, label: str, name: str, result: dict, ours: dict, notes: list,
           size_copy: str | None) -> list:
    """A line of the table; size_copy: the "% size copy" cell's text where the table has that
    column (filled in here from the result), else None."""
    for kind in ("error", "skipped"):
        if kind in result:
            text = result[kind] if kind == "skipped" else f"{label} {name}: {result[kind]}"
            blank = 6 + (size_copy is not None)
            return key + [name, f"{kind} [{_note(notes, text)}]"] + [""] * blank
    flags = []
    backend = result.get("backend", "")
    if backend.startswith("fallback"):
        flags.append(f"fallback [{_note(notes, backend)}]")
    elif backend:
        flags.append(backend)
    if result.get("within_tolerance") is False:
        why = (f"{label} {name}: output outside the tolerance against eager's (max |diff| "
               f"{result['max_abs_diff_vs_eager']:.4g}")
        if "fp8_max_steps_vs_eager" in result:
            why += (f", {result['fp8_max_steps_vs_eager']:.3g} fp8 steps, scales "
                    f"{result['scale_max_rel_diff_vs_eager']:.3g} apart")
        flags.append(f"MISMATCH [{_note(notes, why + ')')}]")
    backend = ", ".join(flags)
    speedup = ours.get("speedup", {}).get(name)
    call_speedup = ours.get("call_speedup", {}).get(name)
    cells = key + [name, backend, f"{_us(result['time_us'])} {result['method']}",
                   _us(result.get("call_us")), f"{result['GBps']:.1f}",
                   f"{result['pct_copy']:.0f}%"]
    if size_copy is not None:
        pct = result.get("pct_size_copy")
        cells.append(size_copy if pct is None else f"{pct:.0f}%")
    return cells + [_times(speedup), _times(call_speedup)]


def table(rows: list, device: str) -> str:
    """One line per implementation, the op and shape on the first line of each group."""
    time_head = "GPU us" if device == "cuda" else "host us"
    # --size-copy: each implementation against a copy of the row's bytes timed the same way.
    size_copy = any("copy" in row for row in rows)
    header = ["op", "M", "N", "impl", "backend", time_head, "call us", "GB/s", "% copy",
              "fusekit x", "call x"]
    if size_copy:
        header.insert(9, "% size copy")
    groups, notes = [], []
    for row in rows:
        ours = row["results"].get("fusekit", {})
        label = f"{row['op']} {row['M']}x{row['N']}"
        key = [row["op"], str(row["M"]), str(row["N"])]
        missing = None  # the size-copy cell where there is no copy time
        if size_copy:
            copy_error = row.get("copy", {}).get("error")
            missing = (f"- [{_note(notes, f'{label} copy of the same bytes: {copy_error}')}]"
                       if copy_error else "-")
        groups.append([_cells(key if i == 0 else ["", "", ""], label, name, result, ours, notes,
                              missing)
                       for i, (name, result) in enumerate(row["results"].items())])
    lines = [cells for group in groups for cells in group]
    widths = [max(len(cells[i]) for cells in [header] + lines) for i in range(len(header))]
    left = {0, 3, 4}  # text columns; numbers are right-aligned

    def fmt(cells):
        return "  ".join(c.ljust(w) if i in left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [fmt(header), fmt(["-" * w for w in widths])]
    for i, group in enumerate(groups):
        if i:
            out.append("")
        out += [fmt(cells) for cells in group]
    out += [f"[{i}] {note}" for i, note in enumerate(notes, 1)]
    return "\n".join(out)


def family_title(family: str, dtypes: str) -> str:
    """The heading of a family's table; dtypes: its rows' dtypes (a shapes file section's)."""
    if family == "act_and_mul":
        return (f"act_and_mul, {dtypes}: x [M, 2N] -> [M, N] (N = output width); *_quant_fp8: "
                "e4m3fn codes and a float32 scale per row")
    return f"{family}, {dtypes}"


def summary(env: dict, copy_gbps: float) -> str:
    where = env["gpu"]["name"] if env.get("gpu") else f"CPU ({env['cpu']}, no GPU used)"
    build = env.get("fusekit_build") or {}
    library = (build.get("library") or {}).get("loaded")
    backends = ", ".join(build.get("backends") or []) or "none"
    lines = [
        f"device: {where}; torch {env['torch']}, triton {env['triton'] or 'not installed'}",
        f"fusekit {env['fusekit']}: compiled library {'loaded' if library else 'not loaded'}"
        f" (kernels for: {backends}); commit {(env.get('commit') or {}).get('commit', 'unknown')}",
        f"timing: {env['timing']}",
        f"copy bandwidth (read + write, same method): {copy_gbps:.1f} GB/s",
        "call us = host wall clock per call of back-to-back calls (dispatch included); "
        "fusekit x / call x = baseline time / fusekit time",
    ]
    # The torch.compile column's numbers depend on how it was compiled (a shared compile ran
    # dynamic-size kernels from the second hidden size on): say so where it is in the table.
    options = env.get("options") or {}
    mode = options.get("compile")
    if mode and "compile" in (options.get("impls") or ()):
        lines.append(f"torch.compile: --compile {mode}, {COMPILE_MODE_NOTES[mode]}")
    return "\n".join(lines)
