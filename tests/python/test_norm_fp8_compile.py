"""torch.compile(fullgraph=True) over code using RMSNorm with an fp8 output (dynamic and static
scales, the fused-add forms updating the residual in place), on each device: no graph break, the
graph calls the fusekit operators, and results (codes, scales and the updated residual) equal
eager bit for bit. On the GPU also CUDA-graph capture and replay, with the static scale changed
between replays: the kernels read it when they run."""

from __future__ import annotations

import pytest
import torch

import fusekit
from conftest import gpu_skip_reason, randn

BF16, F32 = torch.bfloat16, torch.float32


def layer(x, residual, w, static_scale):
    """A layer boundary's norms with fp8 outputs; residual is updated in place twice."""
    q1, s1 = fusekit.fused_add_rms_norm_quant_fp8(x, residual, w, format="e4m3fn",
                                                  scale_upper_bound=0.5)
    q2 = fusekit.rms_norm_quant_fp8_static(residual, w, static_scale, format="e4m3fnuz")
    q3, s3 = fusekit.rms_norm_quant_fp8(x, w, 1e-5, 1.0, format="e4m3fnuz", scale_keepdim=True)
    q4 = fusekit.fused_add_rms_norm_quant_fp8_static(x, residual, w, static_scale,
                                                     format="e4m3fn")
    return (q1.view(torch.uint8), s1, q2.view(torch.uint8), q3.view(torch.uint8), s3,
            q4.view(torch.uint8), residual * 1)


def inputs(device, gen, n=769, m=6):
    return (randn((m, n), BF16, device, gen), randn((m, n), F32, device, gen),
            randn((n,), F32, device, gen, mean=1.0),
            torch.tensor([0.02], dtype=F32, device=device))


def compare(fn, args, **compile_args):
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, **compile_args)
    eager_args = [a.clone() for a in args]
    compiled_args = [a.clone() for a in args]
    expected = fn(*eager_args)
    actual = compiled(*compiled_args)
    for e, a in zip(expected, actual):
        assert a.dtype == e.dtype and a.shape == e.shape
        assert torch.equal(a, e), (a.float() - e.float()).abs().max()
    assert torch.equal(compiled_args[1], eager_args[1])  # the residual, updated in place


@pytest.mark.parametrize("backend", ("inductor", "aot_eager"))
def test_compiled_equals_eager(device, gen, backend):
    compare(layer, inputs(device, gen), backend=backend)


def test_dynamic_shapes(device, gen):
    torch._dynamo.reset()
    compiled = torch.compile(layer, fullgraph=True, dynamic=True, backend="aot_eager")
    for m in (3, 5, 11):
        args = inputs(device, gen, m=m)
        eager_args = [a.clone() for a in args]
        for a, e in zip(compiled(*args), layer(*eager_args)):
            assert torch.equal(a, e)


def test_graph_calls_the_fusekit_operators(device, gen):
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(layer, fullgraph=True, backend=capture)(*inputs(device, gen))
    code = graphs[0].code
    for op in ("fusekit.fused_add_rms_norm_quant_fp8", "fusekit.rms_norm_quant_fp8_static",
               "fusekit.rms_norm_quant_fp8", "fusekit.fused_add_rms_norm_quant_fp8_static"):
        assert op in code, f"{op} not in the traced graph:\n{code}"


@pytest.mark.skipif(gpu_skip_reason() is not None, reason=gpu_skip_reason() or "")
def test_cuda_graph_capture_and_replay(gen):
    static = [a.clone() for a in inputs("cuda", gen, n=4096, m=64)]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up on a side stream, as capture requires
        layer(*[a.clone() for a in static])
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = layer(*static)
    for trial, scale in enumerate((0.02, 0.005, 0.1)):
        fresh = inputs("cuda", gen, n=4096, m=64)
        fresh[3].fill_(scale)  # a new static scale: read by the replayed kernels
        for s, f in zip(static, fresh):
            s.copy_(f)
        graph.replay()
        expected = layer(*[f.clone() for f in fresh])
        torch.cuda.synchronize()
        for a, e in zip(outputs, expected):
            assert torch.equal(a, e), f"replay {trial} differs from eager"
