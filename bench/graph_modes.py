#!/usr/bin/env python3
"""Graph replay of one fusekit call, captured many times over, under two capture recipes.

fusekit's GPU kernels launch the next grid early (programmatic dependent launch). Two recipes
for warming up and capturing the same call, run in turn (fresh, one, fresh):
  fresh  - each capture warms up on a new torch.cuda.Stream() (torch's pool of 32 streams, taken
           in turn) and captures on torch's shared capture stream (torch.cuda.graph's default);
  one    - every warm-up and capture on one stream (fusekit_bench, the Python benchmark's timer).
On an H100, under `fresh` consecutive captures of the same call replay in two modes (silu_and_mul
[32, 14336]: 1.46 or 1.82 us per call) that cycle with period 32 captures, the size of torch's
stream pool; under `one` every capture replays in the mode the recipe started in, whichever that
was. So the mode is a state of the process that moves on as new streams come into use, not a
property of one graph. This prints a letter per capture (a: within 10% of the fastest capture of
the run, b: slower) and the times, so the effect can be checked on other GPUs, drivers and
torch versions (bench/NOTES.md, "Graph replay and the capture stream").

    PYTHONPATH=python python3 bench/graph_modes.py [--op silu_and_mul] [--M 32] [--N 14336]
"""
import argparse
import statistics

import torch

import fusekit


def capture(fn, calls: int, warm: torch.cuda.Stream, cap) -> torch.cuda.CUDAGraph:
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        for _ in range(3):
            fn()
    warm.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=cap):
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    graph.replay()
    return graph


def replay_us(graph: torch.cuda.CUDAGraph, calls: int, replays: int = 10) -> float:
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(replays)]
    for start, end in pairs:
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs) * 1e3 / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", default="silu_and_mul",
                        choices=["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"])
    parser.add_argument("--M", type=int, default=32)
    parser.add_argument("--N", type=int, default=14336)
    parser.add_argument("--captures", type=int, default=48)
    parser.add_argument("--calls", type=int, default=100, help="calls per graph")
    args = parser.parse_args()
    x = torch.randn(args.M, 2 * args.N, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(args.M, args.N, device="cuda", dtype=torch.bfloat16)
    op = getattr(fusekit, args.op)
    fn = lambda: op(x, out=y)  # noqa: E731
    one = torch.cuda.Stream()
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; "
          f"{args.op} [{args.M}, {args.N}] bf16, {args.calls} calls per graph, us per call")
    results = []
    for recipe in ("fresh", "one", "fresh"):
        times = []
        for _ in range(args.captures):
            warm, cap = (torch.cuda.Stream(), None) if recipe == "fresh" else (one, one)
            times.append(replay_us(capture(fn, args.calls, warm, cap), args.calls))
        results.append((recipe, times))
    best = min(min(times) for _, times in results)
    for recipe, times in results:
        letters = "".join("a" if t <= 1.1 * best else "b" for t in times)
        print(f"{recipe:5s} {letters}  min {min(times):.2f} median {statistics.median(times):.2f} "
              f"max {max(times):.2f}")


if __name__ == "__main__":
    main()
