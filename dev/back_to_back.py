#!/usr/bin/env python3
"""Times fusekit calls alone and back to back on the GPU (a probe, not part of the build).

Each call alone: an L2 read flush, then one call between two events. Back to back: a flush, then
20 calls between two events, per call. Medians of 15 and 7 runs. A kernel whose early launch of
the next grid (programmatic dependent launch) gets in the way of that grid shows up as a
back-to-back time above the alone one (bench/NOTES.md, "Norm v39"; FUSEKIT_PDL=0 turns the early
launches off). Run from the repository root with the PyTorch operators built:

  FUSEKIT_LIBRARY=build/gpu/torch/libfusekit_torch.so python3 dev/back_to_back.py
"""
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import fusekit  # noqa: E402

torch.manual_seed(0)
flush = torch.empty(256 << 18, dtype=torch.int32, device="cuda")  # 256 MiB: past the L2
events = [torch.cuda.Event(enable_timing=True) for _ in range(2)]


def timed_us(fn, calls):
    flush.max()
    events[0].record()
    for _ in range(calls):
        fn()
    events[1].record()
    torch.cuda.synchronize()
    return events[0].elapsed_time(events[1]) * 1e3 / calls


def bench(name, fn, calls=20):
    for _ in range(3):
        fn()
    alone = statistics.median(timed_us(fn, 1) for _ in range(15))
    back_to_back = statistics.median(timed_us(fn, calls) for _ in range(7))
    print(f"{name:44s} cold {alone:8.1f} us   back-to-back {back_to_back:8.1f} us/call  "
          f"({back_to_back / alone:.2f}x)", flush=True)


def rows(m, n):
    return torch.randn(m, n, device="cuda", dtype=torch.bfloat16)


for m, n in [(2048, 18432), (16384, 18432), (2048, 20480), (2048, 32768), (2048, 4096)]:
    x, r, w = rows(m, n), rows(m, n), rows(1, n)[0]
    bench(f"fused_add_rms_norm [{m}, {n}]", lambda: fusekit.fused_add_rms_norm(x, r, w))
    bench(f"rms_norm [{m}, {n}]", lambda: fusekit.rms_norm(x, w))
    bench(f"rms_norm_quant_fp8 [{m}, {n}]",
          lambda: fusekit.rms_norm_quant_fp8(x, w, format="e4m3fn"))
    bench(f"layer_norm [{m}, {n}]", lambda: fusekit.layer_norm(x, w, w))
    del x, r, w
gate_up = rows(2048, 2 * 18944)
bench("silu_and_mul_quant_fp8 [2048, 18944]",
      lambda: fusekit.silu_and_mul_quant_fp8(gate_up, format="e4m3fn"))
