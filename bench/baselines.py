"""Times what fusekit is compared against, on the GPU, with the method the reference numbers
were taken with: PyTorch eager, torch.compile of the eager code, and (given their path) the seed
documents' Triton kernels, on the default shapes (bench/shapes.json).

    python3 bench/baselines.py --seed-dir DIR [--shapes bench/shapes.json] [--json OUT]
                               [--ops rms_norm,...] [--M 1,32] [--N 4096] [--flush read|write]

DIR holds seed_triton.py (the seed kernels; not part of this repository). "us" is timed the way
fusekit_bench times its own calls: before each call the L2 is emptied (--flush read, the default:
a read of a buffer twice the L2's size, leaving clean lines; --flush write: a memset, as
triton's do_bench does, which leaves dirty lines the timed call must write back), then one event
pair around the call; median of the runs. "graph_us" is do_bench_cudagraph (median, L2 warm)
when M <= 256. Bytes = inputs read once + outputs written once.
Output rows use the schema of the reference anchors file, so bench/compare.py reads both.
"""
import argparse
import importlib.util
import json
import os
import sys

import torch
import triton
from triton.testing import do_bench, do_bench_cudagraph

# fusekit op name -> name used in the reference anchors file.
ANCHOR_NAMES = {"rms_norm": "rms_norm", "fused_add_rms_norm": "add_rms_norm",
                "layer_norm": "layer_norm", "fused_add_layer_norm": "add_layer_norm"}


def load_seed(seed_dir):
    if not seed_dir:
        return None
    path = os.path.join(seed_dir, "seed_triton.py")
    spec = importlib.util.spec_from_file_location("seed_triton", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ColdTimer:
    """Cold-L2 event timing with the same flush fusekit_bench uses (see the module docstring)."""

    def __init__(self, mode, runs=100, warmup=10):
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.buf = torch.zeros(max(2 * l2, 256 << 20) // 4, dtype=torch.int32, device="cuda")
        self.mode, self.runs, self.warmup = mode, runs, warmup
        self.events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                       for _ in range(runs)]

    def flush(self):
        if self.mode == "write":
            self.buf.zero_()
        else:
            self.buf.max()  # reads every word; the one-element result is not looked at

    def us(self, fn):
        for _ in range(self.warmup):
            fn()
        for start, end in self.events:
            self.flush()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        times = sorted(start.elapsed_time(end) for start, end in self.events)
        mid = len(times) // 2
        ms = times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid])
        return ms * 1e3


def rms_eager(x, w, eps=1e-6):
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return (x * torch.rsqrt(variance + eps) * w).to(x.dtype)


def add_rms_eager(x, r, w, eps=1e-6):
    h = x + r
    return rms_eager(h, w, eps), h


def ln_eager(x, w, b, eps=1e-5):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def add_ln_eager(x, r, w, b, eps=1e-5):
    h = x + r
    return ln_eager(h, w, b, eps), h


def op_table(seed):
    """op -> (make inputs, bytes, {impl: fn})."""
    bf = torch.bfloat16

    def rnd(*shape):
        return torch.randn(*shape, device="cuda", dtype=bf)

    table = {
        "rms_norm": (lambda m, n: (rnd(m, n), rnd(n)), lambda m, n: (2 * m * n + n) * 2,
                     {"eager": rms_eager, "compile": torch.compile(rms_eager)}),
        "fused_add_rms_norm": (lambda m, n: (rnd(m, n), rnd(m, n), rnd(n)),
                               lambda m, n: (4 * m * n + n) * 2,
                               {"eager": add_rms_eager, "compile": torch.compile(add_rms_eager)}),
        "layer_norm": (lambda m, n: (rnd(m, n), rnd(n), rnd(n)), lambda m, n: (2 * m * n + 2 * n) * 2,
                       {"eager": ln_eager, "compile": torch.compile(ln_eager)}),
        "fused_add_layer_norm": (lambda m, n: (rnd(m, n), rnd(m, n), rnd(n), rnd(n)),
                                 lambda m, n: (4 * m * n + 2 * n) * 2,
                                 {"eager": add_ln_eager, "compile": torch.compile(add_ln_eager)}),
    }
    if seed is not None:
        table["rms_norm"][2]["seed_triton"] = seed.rms_norm_triton
        table["fused_add_rms_norm"][2]["seed_triton"] = seed.fused_add_rms_norm_triton
    return table


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed-dir", default=os.environ.get("FUSEKIT_SEED_DIR"))
    ap.add_argument("--shapes", default=os.path.join(here, "shapes.json"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--ops", default=None)
    ap.add_argument("--M", default=None)
    ap.add_argument("--N", default=None)
    ap.add_argument("--flush", choices=["read", "write"], default="read")
    args = ap.parse_args()

    torch.manual_seed(0)
    shapes = json.load(open(args.shapes))["norm"]
    ops = args.ops.split(",") if args.ops else shapes["ops"]
    ms = [int(v) for v in args.M.split(",")] if args.M else shapes["M"]
    ns = [int(v) for v in args.N.split(",")] if args.N else shapes["N"]
    limit = shapes.get("skip_if_bytes_over", 1 << 62)

    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "triton": triton.__version__, "flush": args.flush}
    timer = ColdTimer(args.flush)
    n = 1 << 30
    a = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    b = torch.empty_like(a)
    t = do_bench(lambda: b.copy_(a), warmup=50, rep=300, return_mode="median")
    env["copy_GBps"] = 2 * a.numel() * 2 / (t * 1e-3) / 1e9
    del a, b
    z = torch.empty(1, device="cuda")
    env["launch_floor_us_graph"] = do_bench_cudagraph(lambda: z.add_(0), rep=200,
                                                      return_mode="median") * 1e3
    print(json.dumps(env), flush=True)

    table = op_table(load_seed(args.seed_dir))
    rows = []
    for op in ops:
        make, nbytes, impls = table[op]
        for N in ns:
            for M in ms:
                if nbytes(M, N) * 1.0 > limit:
                    continue
                inputs = make(M, N)
                row = {"op": ANCHOR_NAMES[op], "shape": [M, N], "bytes": nbytes(M, N)}
                # The roofline at this size: a copy moving the same bytes, timed the same way.
                half = max(nbytes(M, N) // 4, 1)
                src = torch.empty(half, dtype=torch.bfloat16, device="cuda")
                dst = torch.empty_like(src)
                row["copy_us"] = timer.us(lambda: dst.copy_(src))
                del src, dst
                for name, fn in impls.items():
                    try:
                        fn(*inputs)
                        us = timer.us(lambda: fn(*inputs))
                        g = None
                        if M <= 256:
                            g = do_bench_cudagraph(lambda: fn(*inputs), rep=100,
                                                   return_mode="median") * 1e3
                        row[name] = {"us": us, "graph_us": g, "GBps": row["bytes"] / (us * 1e-6) / 1e9}
                    except Exception as e:  # a baseline failing must not stop the others
                        row[name] = {"error": repr(e)[:200]}
                rows.append(row)
                print(json.dumps(row), flush=True)
                del inputs
                torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"env": env, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
