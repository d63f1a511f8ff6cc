"""Checks shared by the torch.compile and CUDA-graph test files: a function of fusekit calls
compiled with fullgraph=True gives eager's results bit for bit (outputs, and arguments it updates
in place), under dynamic shapes too; the traced graph calls the fusekit operators; and a CUDA
graph captured over it replays eager's results on fresh inputs (outputs, and arguments it updates
in place)."""

from __future__ import annotations

import re

import torch


def _assert_all_equal(actual, expected, what):
    # zip() alone would stop at the shorter sequence and pass a missing output.
    assert len(actual) == len(expected), f"{what}: {len(actual)} tensors, eager {len(expected)}"
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape, what
        assert torch.equal(a, e), f"{what}: max difference {(a.float() - e.float()).abs().max()}"


def assert_compiled_equals_eager(fn, args, **compile_args):
    """fn(*args) under torch.compile equals eager, outputs and arguments (each run gets its own
    copy of the arguments, so in-place updates are compared too)."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, **compile_args)
    eager_args = [a.clone() for a in args]
    compiled_args = [a.clone() for a in args]
    _assert_all_equal(compiled(*compiled_args), fn(*eager_args), "outputs")
    _assert_all_equal(compiled_args, eager_args, "arguments updated in place")


def assert_dynamic_shapes_equal_eager(fn, make_args, batch_sizes=(3, 5, 11)):
    """One dynamic-shape compilation serves every batch size, each equal to eager (eager calls
    in between, as a model's first steps run before it is compiled)."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, dynamic=True, backend="aot_eager")
    # A recompilation raises: a guard on the package's state (its caches, which eager calls
    # fill) would otherwise recompile at every new batch size and still give eager's values.
    with torch._dynamo.config.patch(error_on_recompile=True):
        for m in batch_sizes:
            args = make_args(m)
            actual = compiled(*[a.clone() for a in args])
            _assert_all_equal(actual, fn(*[a.clone() for a in args]), f"batch {m}")


def assert_graph_calls(fn, args, ops):
    """The graph Dynamo traces from fn(*args) calls each of `ops` (qualified names)."""
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, fullgraph=True, backend=capture)(*args)
    code = graphs[0].code
    for op in ops:
        # The whole name: a plain substring test would take fusekit.rms_norm_out for
        # fusekit.rms_norm, or an fp8 op's _static form for the dynamic one.
        whole_name = re.escape(op) + r"(?!\w)"
        assert re.search(whole_name, code), f"{op} not in the traced graph:\n{code}"


def assert_cuda_graph_replays_equal_eager(fn, fresh_inputs, trials=3):
    """Captures fn over static inputs (after a warm-up on a side stream, as capture requires),
    then for each trial copies fresh_inputs(trial) into them, replays and compares with eager
    on its own copy of the same inputs: the outputs, and then every input, so that what fn
    updates in place (an in-place fused add's residual, k normalized inside qkv) must be
    updated by the replay as by eager, and what it only reads left alone by both."""
    static = [a.clone() for a in fresh_inputs(0)]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn(*[a.clone() for a in static])
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = fn(*static)
    for trial in range(trials):
        fresh = fresh_inputs(trial)
        for s, f in zip(static, fresh):
            s.copy_(f)
        graph.replay()
        eager_args = [f.clone() for f in fresh]
        expected = fn(*eager_args)
        torch.cuda.synchronize()
        _assert_all_equal(outputs, expected, f"replay {trial}")
        # An update the replay misses (or makes where eager makes none) need not show in the
        # outputs: per_head_norms returns none of the k it writes into qkv.
        _assert_all_equal(static, eager_args, f"replay {trial}: inputs after the call")
