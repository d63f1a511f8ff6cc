#!/usr/bin/env python3
"""Per-head RMSNorm on views of a fused q/k/v projection's output, the q/k norms of Qwen3 and
Gemma 3: q = qkv[:, :H * D].view(T, H, D), whose leading dimensions do not flatten into one row
stride (a run of H rows per token, the runs qkv's row width apart).

Each variant normalizes q and returns a contiguous [T, H, D] result, as an attention layer's
per-head norm does (or, `in place`, writes it back into qkv):
  fusekit   fusekit.rms_norm(q, w): the kernels take rows of one stride, so the function copies
            such a view first (a pass over q that a kernel reading it in place would not need)
  rows      fusekit.rms_norm(q.contiguous(), w) without the copy: the same rows laid out
            contiguously beforehand, the floor for a kernel that reads the view in place
  eager     torch.nn.functional.rms_norm(q, (D,), w, eps)
  compile   the same under torch.compile (dynamic=False: a kernel per shape)
  in place  fusekit.rms_norm(q, w, out=q)
Time per call: CUDA-graph replay for T <= 256, else one call with the L2 emptied (median),
fusekit.bench.timing's two methods. GB/s counts q read and the result written once (and the
weight), against the device-to-device copy bandwidth measured in the same run. bench/NOTES.md,
"Rows in runs", has an H200's numbers.

    PYTHONPATH=python python3 bench/per_head_norm.py [--tokens 1,32,256,2048,16384]
        [--heads 32,8] [--head-dim 128] [--dtype bf16] [--json PATH]
"""
from __future__ import annotations

import argparse
import json

import torch

import fusekit
from fusekit.bench.timing import CudaTimer, Settings

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="1,32,256,2048,16384")
    parser.add_argument("--heads", default="32,8", help="head counts (Qwen3-8B: 32 q, 8 kv)")
    parser.add_argument("--kv-heads", type=int, default=8,
                        help="qkv's rows hold max(H, 32) + 2 * kv-heads heads; q is the first H")
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("per_head_norm.py times GPU kernels; no GPU here")

    dtype, d, eps = DTYPES[args.dtype], args.head_dim, 1e-6
    timer = CudaTimer(Settings())
    copy_gbps = timer.copy_gbps(dtype)
    # One compiled kernel per shape: more shapes than dynamo's default limit of recompilations
    # (8), past which it would run the eager function instead.
    torch._dynamo.config.recompile_limit = 64
    compiled = torch.compile(torch.nn.functional.rms_norm, dynamic=False)
    rows = []
    print(f"{torch.cuda.get_device_name()}, copy bandwidth {copy_gbps:.0f} GB/s, {args.dtype}, "
          f"D = {d}")
    print(f"{'T':>6} {'H':>4} | " + " | ".join(
        f"{v:>17}" for v in ("fusekit", "rows", "eager", "compile", "in place")) + " | method")
    for h in (int(v) for v in args.heads.split(",")):
        width = (max(h, 32) + 2 * args.kv_heads) * d
        for t in (int(v) for v in args.tokens.split(",")):
            qkv = torch.randn(t, width, dtype=dtype, device="cuda")
            w = torch.randn(d, dtype=dtype, device="cuda") * 0.1 + 1.0
            q = qkv[:, :h * d].view(t, h, d)
            q_rows = q.contiguous()
            variants = {
                "fusekit": lambda: fusekit.rms_norm(q, w, eps),
                "rows": lambda: fusekit.rms_norm(q_rows, w, eps),
                "eager": lambda: torch.nn.functional.rms_norm(q, (d,), w, eps),
                "compile": lambda: compiled(q, (d,), w, eps),
                "in place": lambda: fusekit.rms_norm(q, w, eps, out=q),
            }
            assert torch.equal(variants["fusekit"](), variants["rows"]())
            small = t <= 256
            nbytes = 2 * t * h * d * qkv.element_size() + d * w.element_size()
            cells, record = [], {"tokens": t, "heads": h, "head_dim": d, "dtype": args.dtype,
                                 "bytes": nbytes, "method": "graph" if small else "cold"}
            for name, fn in variants.items():
                us = timer.graph_us(fn) if small else timer.cold_us(fn)
                gbps = nbytes / us / 1e3
                record[name] = {"us": us, "gbps": gbps, "pct_of_copy": 100 * gbps / copy_gbps}
                cells.append(f"{us:7.2f} us {100 * gbps / copy_gbps:4.0f}%")
            rows.append(record)
            print(f"{t:>6} {h:>4} | " + " | ".join(cells) + f" | {record['method']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "copy_gbps": copy_gbps,
                       "fusekit": fusekit.build_info().get("version"), "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
