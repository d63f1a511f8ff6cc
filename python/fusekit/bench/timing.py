"""How the benchmark times a call, on a GPU and, when there is none, on the host.

GPU time is what the kernels cost on the device, without the host: for small batches (M <= 256,
where a call is a few microseconds and launch overhead would dominate) the replay of a CUDA graph
of R back-to-back calls divided by R, as triton.testing.do_bench_cudagraph does; for large batches
one event pair per call with the L2 emptied before each (by *reading* a buffer twice the L2's
size, at least 256 MiB, as fusekit_bench and bench/baselines.py do: a memset flush would leave
dirty lines that the timed call must write back), median of the runs. The copy bandwidth that
the results are compared against is measured with the same cold method.

The eager call time is what a Python caller waits per call with dispatch included: host wall
clock of many back-to-back calls on a warm device, synchronized only at the two ends, divided by
their count.

Without a GPU, both are host wall-clock times (per call, median) and there is no graph or flush.
Run counts adapt to the call's length so that each measurement takes about `budget_s`.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

Fn = Callable[[], object]


@dataclass(frozen=True)
class Settings:
    budget_s: float = 0.25      # about this much timed work per measurement
    min_runs: int = 10
    max_runs: int = 500
    warmup: int = 3
    graph_calls: int = 100      # most calls captured in one graph (fewer for long calls)
    graph_target_ms: float = 2.0
    graph_replays: int = 10
    call_repeats: int = 5       # eager call time: median of this many back-to-back loops
    copy_bytes: int = 1 << 30   # each buffer of the copy-bandwidth measurement

    @staticmethod
    def quick() -> "Settings":
        return Settings(budget_s=0.02, min_runs=3, max_runs=50, warmup=2, graph_calls=20,
                        graph_replays=3, call_repeats=3, copy_bytes=64 << 20)


def runs_for(estimate_s: float, settings: Settings) -> int:
    """How many runs fit the budget, given one run's estimated length."""
    if estimate_s <= 0:
        return settings.max_runs
    return max(settings.min_runs, min(settings.max_runs, int(settings.budget_s / estimate_s)))


class HostTimer:
    """Wall-clock timing for CPU tensors; the base of CudaTimer's eager call time."""

    device = "cpu"
    method_note = "host wall clock (no GPU: no CUDA graphs, no L2 flush)"

    def __init__(self, settings: Settings):
        self.settings = settings

    def sync(self) -> None:
        pass

    def _estimate_s(self, fn: Fn) -> float:
        for _ in range(self.settings.warmup):
            fn()
        self.sync()
        start = time.perf_counter()
        fn()
        self.sync()
        return time.perf_counter() - start

    def call_us(self, fn: Fn) -> float:
        """Back-to-back calls synchronized at the ends only: host time per call, median of loops
        (together about one budget's worth of calls)."""
        repeats = self.settings.call_repeats
        count = runs_for(self._estimate_s(fn), self.settings) // repeats
        count = max(self.settings.min_runs, count)
        loops = []
        for _ in range(repeats):
            self.sync()
            start = time.perf_counter()
            for _ in range(count):
                fn()
            self.sync()
            loops.append((time.perf_counter() - start) / count)
        return statistics.median(loops) * 1e6

    def measure(self, fn: Fn, small: bool) -> dict:
        """{"time_us", "method", ...}: the time to report for one call of fn on the device."""
        count = runs_for(self._estimate_s(fn), self.settings)
        times = []
        for _ in range(count):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return {"time_us": statistics.median(times) * 1e6, "method": "host"}

    def copy_bytes(self) -> int:
        return min(self.settings.copy_bytes, 256 << 20)  # far beyond the host's caches

    def copy_gbps(self, dtype: torch.dtype) -> float:
        """Copy bandwidth of a large torch copy (bytes read + bytes written), timed as measure()."""
        elements = self.copy_bytes() // torch.empty((), dtype=dtype).element_size()
        src = torch.full((elements,), 1.5, dtype=dtype, device=self.device)
        dst = torch.empty_like(src)
        us = self.measure(lambda: dst.copy_(src), small=False)["time_us"]
        return 2 * src.nbytes / (us * 1e-6) / 1e9


class CudaTimer(HostTimer):
    """Device timing on the current CUDA (or ROCm) device: cold-L2 events and graph replay."""

    device = "cuda"
    method_note = ("GPU: CUDA-graph replay for M <= 256, else cold L2 (read flush) with events; "
                   "median")
    min_flush_bytes = 256 << 20

    def __init__(self, settings: Settings):
        super().__init__(settings)
        l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        self.flush_bytes = max(2 * l2, self.min_flush_bytes)
        self.flush_buffer = torch.zeros(self.flush_bytes // 4, dtype=torch.int32, device="cuda")
        self.events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                       for _ in range(settings.max_runs)]
        self.graph_stream = torch.cuda.Stream()  # graph_us's warm-up and capture stream

    def sync(self) -> None:
        torch.cuda.synchronize()

    def copy_bytes(self) -> int:
        return self.settings.copy_bytes

    def flush(self) -> None:
        self.flush_buffer.max()  # reads every word, leaving clean lines; the result is unused

    def cold_us(self, fn: Fn) -> float:
        estimate = self._estimate_s(fn)
        pairs = self.events[:runs_for(estimate, self.settings)]
        for start, end in pairs:
            self.flush()
            start.record()
            fn()
            end.record()
        self.sync()
        return statistics.median(start.elapsed_time(end) for start, end in pairs) * 1e3

    def graph_us(self, fn: Fn) -> float:
        """Replay of one graph of back-to-back calls (L2 warm), per call; median of replays."""
        estimate = self._estimate_s(fn)
        calls = self.settings.graph_calls
        if estimate > 0:
            calls = max(1, min(calls, int(self.settings.graph_target_ms * 1e-3 / estimate)))
        # Every graph is warmed up and captured on the timer's one side stream, as fusekit_bench
        # does with its stream. On an H100 the replay of kernels that launch the next grid early
        # (PDL) falls into one of two modes, up to ~35% apart, that moves on as new streams come
        # into use: with a new warm-up stream per graph, consecutive captures of one call cycled
        # through both; with one stream, all of a run's graphs stay in one mode (bench/NOTES.md,
        # "Graph replay and the capture stream"; bench/graph_modes.py shows it).
        side = self.graph_stream
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # lazy init and workspaces happen outside the capture
            for _ in range(self.settings.warmup):
                fn()
        side.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            for _ in range(calls):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph.replay()
        pairs = self.events[:self.settings.graph_replays]
        for start, end in pairs:
            start.record()
            graph.replay()
            end.record()
        self.sync()
        us = statistics.median(start.elapsed_time(end) for start, end in pairs) * 1e3 / calls
        del graph
        return us

    def measure(self, fn: Fn, small: bool) -> dict:
        result = {"cold_us": self.cold_us(fn)}
        if small:
            try:
                result["graph_us"] = self.graph_us(fn)
            except Exception as error:  # a call that cannot be captured: report the cold time
                self.sync()
                result["graph_error"] = short_error(error)
        if "graph_us" in result:
            result.update(time_us=result["graph_us"], method="graph")
        else:
            result.update(time_us=result["cold_us"], method="cold")
        return result


def short_error(error: BaseException) -> str:
    """The first line of an exception, for a report."""
    text = f"{type(error).__name__}: {error}".strip()
    first = text.splitlines()[0] if text else type(error).__name__
    return first[:300]


def make_timer(device: str, settings: Settings) -> HostTimer:
    return CudaTimer(settings) if device == "cuda" else HostTimer(settings)

