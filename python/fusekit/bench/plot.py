"""The picture of a run: % of the copy bandwidth against the batch size M (log axis), one panel
per op (the norms' first, then the gated activations') and one line per implementation, for one
hidden size N (the output width for act_and_mul) or a line per N. The copy bandwidth is the
ceiling of these memory-bound ops, so the lines say how far each one is from it, and where (small
M is launch-bound, large M bandwidth-bound). matplotlib is optional: without it there is no plot,
and the caller is told why.
"""

from __future__ import annotations

import math

STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P")


def _pick_n(rows: list, wanted: str) -> dict:
    """op -> the N values to draw: all of them, or the one nearest to `wanted`."""
    sizes: dict = {}
    for row in rows:
        sizes.setdefault(row["op"], set()).add(row["N"])
    if wanted == "all":
        return {op: sorted(ns) for op, ns in sizes.items()}
    target = int(wanted)
    return {op: [min(ns, key=lambda n: (abs(n - target), n))] for op, ns in sizes.items()}


def _series(rows: list, op: str, n: int) -> dict:
    """impl -> ([M], [% copy]) for one op and N, in M order."""
    lines: dict = {}
    for row in sorted((r for r in rows if r["op"] == op and r["N"] == n), key=lambda r: r["M"]):
        for name, result in row["results"].items():
            if "pct_copy" in result:
                xs, ys = lines.setdefault(name, ([], []))
                xs.append(row["M"])
                ys.append(result["pct_copy"])
    return lines


def plot(rows: list, path: str, plot_n: str, title: str, graph_max_m: int | None) -> str | None:
    """Writes the PNG; returns why it did not (None when it did)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed, so no plot was written (pip install matplotlib)"
    chosen = _pick_n(rows, plot_n)
    if not chosen:
        return "no results to plot"
    ops = list(chosen)
    cols = min(2, len(ops))
    nrows = math.ceil(len(ops) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6.4 * cols, 4.2 * nrows), squeeze=False)
    impls = list(dict.fromkeys(name for row in rows for name in row["results"]))
    colors = {name: f"C{i}" for i, name in enumerate(impls)}
    for ax, op in zip(axes.flat, ops):
        for k, n in enumerate(chosen[op]):
            for name, (xs, ys) in _series(rows, op, n).items():
                label = name if len(chosen[op]) == 1 else f"{name} N={n}"
                ax.plot(xs, ys, STYLES[k % len(STYLES)], color=colors[name],
                        marker=MARKERS[impls.index(name) % len(MARKERS)], label=label)
        ax.set_xscale("log", base=2)
        ms = sorted({row["M"] for row in rows if row["op"] == op})
        ax.set_xticks(ms, [str(m) for m in ms])
        ax.minorticks_off()
        ax.axhline(100, color="gray", linewidth=0.8, linestyle=":")
        if graph_max_m:
            ax.axvline(graph_max_m, color="gray", linewidth=0.8, linestyle="--")
        sizes = ", ".join(str(n) for n in chosen[op])
        family = next((row.get("family") for row in rows if row["op"] == op), None)
        ax.set_title(f"{op} (N = {sizes}, x [M, 2N])" if family == "act_and_mul"
                     else f"{op} (N = {sizes})")
        ax.set_xlabel("M (rows)")
        ax.set_ylabel("% of copy bandwidth")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(ops):]:
        ax.set_visible(False)
    note = (f"; M <= {graph_max_m} (dashed line): CUDA-graph time, warm L2" if graph_max_m
            else "")
    fig.suptitle(title + note, fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
