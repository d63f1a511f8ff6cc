#!/usr/bin/env python3
"""Per-head norms on views of a fused q/k/v projection's output, the q/k norms of Qwen3 and
Gemma 3 (RMSNorm) or Command R (LayerNorm): q = qkv[:, :H * D].view(T, H, D), whose leading
dimensions do not flatten into one row stride (a run of H rows per token, the runs qkv's row
width apart). fusekit's rms_norm and layer_norm read such rows in runs where they lie.

Each variant normalizes q and returns a contiguous [T, H, D] result, as an attention layer's
per-head norm does (or, `in place`, writes it back into qkv):
  fusekit   fusekit.rms_norm(q, w): the view read where it lies
  copy      fusekit.rms_norm(q.contiguous(), w): a copy into rows of one stride first, what a
            library whose kernels take only those must do
  rows      fusekit.rms_norm(q_rows, w) on the same rows laid out contiguously beforehand: the
            same bytes moved, from one stride
  eager     torch.nn.functional.rms_norm(q, (D,), w, eps)
  compile   the same under torch.compile (dynamic=False: a kernel per shape)
  in place  fusekit.rms_norm(q, w, out=q)
(layer_norm likewise, with a bias, under --op layer_norm.) Time per call: CUDA-graph replay for
T <= 256, else one call with the L2 emptied (median), fusekit.bench.timing's two methods. GB/s
counts q read and the result written once (and the weight), against the device-to-device copy
bandwidth measured in the same run. bench/NOTES.md, "Rows in runs", has an H200's numbers.

    PYTHONPATH=python python3 bench/per_head_norm.py [--op rms_norm] [--tokens 1,32,256,2048,16384]
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
    parser.add_argument("--op", default="rms_norm", choices=("rms_norm", "layer_norm"))
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

    dtype, d = DTYPES[args.dtype], args.head_dim
    timer = CudaTimer(Settings())
    copy_gbps = timer.copy_gbps(dtype)
    # One compiled kernel per shape: more shapes than dynamo's default limit of recompilations
    # (8), past which it would run the eager function instead.
    torch._dynamo.config.recompile_limit = 64
    layer = args.op == "layer_norm"
    eps = 1e-5 if layer else 1e-6
    torch_fn = torch.nn.functional.layer_norm if layer else torch.nn.functional.rms_norm
    compiled = torch.compile(torch_fn, dynamic=False)
    rows = []
    print(f"{torch.cuda.get_device_name()}, copy bandwidth {copy_gbps:.0f} GB/s, {args.op}, "
          f"{args.dtype}, D = {d}")
    names = ("fusekit", "copy", "rows", "eager", "compile", "in place")
    print(f"{'T':>6} {'H':>4} | " + " | ".join(f"{v:>17}" for v in names) + " | method")
    for h in (int(v) for v in args.heads.split(",")):
        width = (max(h, 32) + 2 * args.kv_heads) * d
        for t in (int(v) for v in args.tokens.split(",")):
            qkv = torch.randn(t, width, dtype=dtype, device="cuda")
            w = torch.randn(d, dtype=dtype, device="cuda") * 0.1 + 1.0
            b = torch.randn(d, dtype=dtype, device="cuda") * 0.1 if layer else None
            q = qkv[:, :h * d].view(t, h, d)
            q_rows = q.contiguous()
            if layer:
                def ours(x, out=None):
                    return fusekit.layer_norm(x, w, b, eps, out=out)

                def theirs(fn, x):
                    return fn(x, (d,), w, b, eps)
            else:
                def ours(x, out=None):
                    return fusekit.rms_norm(x, w, eps, out=out)

                def theirs(fn, x):
                    return fn(x, (d,), w, eps)
            variants = {
                "fusekit": lambda: ours(q),
                "copy": lambda: ours(q.contiguous()),
                "rows": lambda: ours(q_rows),
                "eager": lambda: theirs(torch_fn, q),
                "compile": lambda: theirs(compiled, q),
                "in place": lambda: ours(q, out=q),
            }
            assert torch.equal(variants["fusekit"](), variants["rows"]())
            assert torch.equal(variants["copy"](), variants["rows"]())
            small = t <= 256
            params = (2 if layer else 1) * d * w.element_size()
            nbytes = 2 * t * h * d * qkv.element_size() + params
            cells, record = [], {"op": args.op, "tokens": t, "heads": h, "head_dim": d,
                                 "dtype": args.dtype,
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
