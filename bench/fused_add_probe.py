#!/usr/bin/env python3
"""The out-of-place fused add + RMSNorm at batches that fill the GPU several times over: a
minimal kernel (bench/fused_add_probe.cu) with each of fusekit's kernel choices switched on or
off, beside fusekit, the seed kernel and torch.compile, in one process.

At M = 2048 the seed kernel has led fusekit's fused add by 2-10% in every run since 2026-11-27
(bench/NOTES.md, "The fused add at M = 2048 against a minimal kernel"). The probe asks which of
fusekit's choices costs that: the squares over h rounded to bf16 (`rounded`), the weight loaded
beside the row (`early_weight`), h stored after the reduction (`late_residual`; fusekit stores it
before), the IEEE division of the sum by n (`exact_division`), programmatic dependent launch
(`dependent_launch`); and, for a weight loaded after the reduction, whether every group's loads go
out at once (`weight_at_once`) or group by group beside its outputs. Each variant's outputs are
checked against float64 before it is timed.

Timing is the Python benchmark's cold method (fusekit.bench.timing): the L2 emptied by reading a
512 MB buffer before each call, calls enqueued back to back between event pairs, the median of
40; --flush memset empties it by writing instead (dirty lines, what the earlier driver used).
Rounds alternate the variants.

    PYTHONPATH=python python3 bench/fused_add_probe.py [--N 896,2048,4096,8192] [--M 2048]
        [--seed-dir DIR] [--compile] [--rounds 5] [--flush read|memset]
        [--variants base,early_weight,...]   (names joined by +; `base` is none of them)

fusekit's row appears where its compiled operators are loaded for CUDA (FUSEKIT_LIBRARY, as for
the Python benchmark).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import tempfile

import torch

CHOICES = {"rounded": 1, "early_weight": 2, "dependent_launch": 4, "late_residual": 8,
           "exact_division": 16, "weight_at_once": 32}
DEFAULT_VARIANTS = ("base,early_weight,late_residual,early_weight+late_residual,"
                    "late_residual+weight_at_once,"
                    "rounded+exact_division+late_residual,"
                    "rounded+exact_division+late_residual+weight_at_once,"
                    "rounded+exact_division+early_weight,"
                    "rounded+exact_division+early_weight+dependent_launch")


def build_probe() -> ctypes.CDLL:
    """bench/fused_add_probe.cu compiled for the current GPU into a temporary directory."""
    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}" + ("a" if major >= 9 else "")
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fused_add_probe.cu")
    library = os.path.join(tempfile.mkdtemp(prefix="fused_add_probe_"), "probe.so")
    subprocess.run(["nvcc", "-O3", "-std=c++17", f"-gencode=arch=compute_{arch},code=sm_{arch}",
                    "-shared", "-Xcompiler", "-fPIC", "-o", library, source], check=True)
    probe = ctypes.CDLL(library)
    probe.fused_add_probe.argtypes = ([ctypes.c_int] + [ctypes.c_void_p] * 5 +
                                      [ctypes.c_int, ctypes.c_int, ctypes.c_float,
                                       ctypes.c_void_p])
    return probe


def choices_of(variant: str) -> int:
    if variant == "base":
        return 0
    return sum(CHOICES[name] for name in variant.split("+"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--N", default="896,2048,4096,8192")
    parser.add_argument("--M", type=int, default=2048)
    parser.add_argument("--variants", default=DEFAULT_VARIANTS)
    parser.add_argument("--seed-dir", default=None)
    parser.add_argument("--compile", action="store_true", help="also time torch.compile")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--flush", default="read", choices=("read", "memset"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("fused_add_probe.py times GPU kernels; no GPU here")

    probe = build_probe()
    try:
        import fusekit
        if "cuda" not in fusekit.build_info()["backends"]:
            fusekit = None  # the fallbacks are torch's ops, not fusekit's kernels: left out
    except ImportError:
        fusekit = None
    seed = None
    if args.seed_dir:
        from fusekit.bench.baselines import load_seed
        seed = load_seed(args.seed_dir)
    flush = torch.zeros(128 << 20, dtype=torch.int32, device="cuda")  # 512 MB
    eps, m = 1e-6, args.M
    for n in (int(v) for v in args.N.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(n)
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=gen)
        residual = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=gen)
        weight = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=gen)
        y, h = torch.empty_like(x), torch.empty_like(x)
        stream = torch.cuda.current_stream().cuda_stream
        calls = {}
        if fusekit is not None:
            calls["fusekit"] = lambda: fusekit.fused_add_rms_norm(x, residual, weight, eps,
                                                                  out=y, residual_out=h)
        if seed is not None:
            calls["seed"] = lambda: seed.fused_add_rms_norm_triton(x, residual, weight, eps)
        if args.compile and seed is not None:
            compiled = torch.compile(seed.fused_add_rms_norm_eager)
            calls["compile"] = lambda: compiled(x, residual, weight, eps)
        for variant in args.variants.split(","):
            def call(c=choices_of(variant)):
                rc = probe.fused_add_probe(c, x.data_ptr(), residual.data_ptr(),
                                           weight.data_ptr(), y.data_ptr(), h.data_ptr(), m, n,
                                           eps, stream)
                if rc != 0:
                    raise RuntimeError(f"fused_add_probe returned {rc}")
            calls["probe " + variant] = call
        # Outputs that write y and h (the probe's and fusekit's) against float64, NaN first.
        h64 = x.double() + residual.double()
        y64 = h64 * torch.rsqrt(h64.pow(2).mean(-1, keepdim=True) + eps) * weight.double()
        for name, fn in calls.items():
            if name in ("seed", "compile"):
                continue
            y.fill_(float("nan"))
            h.fill_(float("nan"))
            fn()
            # Relative to the value, floored at 0.05: y may carry two bf16 roundings (h's, when
            # its squares use the rounded h, and its own), 2^-8 each. NaN (a row or a column
            # left unwritten) fails.
            y_err = ((y.double() - y64).abs() / (y64.abs() + 0.05)).max().item()
            h_err = ((h.double() - h64).abs() / (h64.abs() + 0.05)).max().item()
            if not (y_err < 2e-2 and h_err < 2e-2):
                raise SystemExit(f"{name} at N = {n}: max relative error y {y_err}, h {h_err}")
        for fn in calls.values():
            fn()
        torch.cuda.synchronize()
        times = {name: [] for name in calls}
        for _ in range(args.rounds):
            for name, fn in calls.items():
                pairs = [(torch.cuda.Event(enable_timing=True),
                          torch.cuda.Event(enable_timing=True)) for _ in range(40)]
                for start, end in pairs:
                    if args.flush == "read":
                        flush.max()
                    else:
                        flush.zero_()
                    start.record()
                    fn()
                    end.record()
                torch.cuda.synchronize()
                times[name].append(statistics.median(s.elapsed_time(e) * 1e3 for s, e in pairs))
        reference = statistics.median(times["seed"]) if "seed" in times else None
        for name, rounds in times.items():
            med = statistics.median(rounds)
            versus = f"  seed/this {reference / med:.3f}" if reference else ""
            print(f"[{m}, {n}] {name:58s} {med:7.2f} us{versus}  (rounds "
                  f"{' '.join(f'{t:.2f}' for t in rounds)})", flush=True)


if __name__ == "__main__":
    main()
