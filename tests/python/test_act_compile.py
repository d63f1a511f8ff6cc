"""torch.compile(fullgraph=True) over code using the gated activations (fused input, split gate /
up views, fp8 forms, training), on each device: no graph break, the graph calls the fusekit
operators, and results equal eager bit for bit. On the GPU also CUDA-graph capture and replay
(kernels on the current stream, allocation only through PyTorch, no synchronization)."""

from __future__ import annotations

import pytest
import torch

import fusekit
from compile_checks import (assert_compiled_equals_eager, assert_cuda_graph_replays_equal_eager,
                            assert_dynamic_shapes_equal_eager, assert_graph_calls)
from conftest import gpu_skip_reason, randn

BF16, F32 = torch.bfloat16, torch.float32


def mlp_activations(gate_up, gate, up):
    """The activation forms an MLP uses: fused silu, split gelu_tanh, fp8 gelu of both formats."""
    a = fusekit.silu_and_mul(gate_up)
    b = fusekit.gelu_tanh_and_mul(gate, up)
    q, s = fusekit.gelu_and_mul_quant_fp8(gate_up, format="e4m3fn", scale_upper_bound=0.5)
    q2, s2 = fusekit.silu_and_mul_quant_fp8(gate, up, format="e4m3fnuz", scale_keepdim=True)
    return a + b, q.view(torch.uint8), s, q2.view(torch.uint8), s2


def inputs(device, gen, n=769, m=6):
    gate_up = randn((m, 2 * n), BF16, device, gen, scale=2.0)
    other = randn((m, 2 * n + 3), BF16, device, gen)
    return gate_up, other[:, :n], other[:, n + 3:]  # gate and up: strided views of one buffer


@pytest.mark.parametrize("backend", ("inductor", "aot_eager"))
def test_compiled_equals_eager(device, gen, backend):
    assert_compiled_equals_eager(mlp_activations, inputs(device, gen), backend=backend)


def test_dynamic_shapes(device, gen):
    assert_dynamic_shapes_equal_eager(mlp_activations, lambda m: inputs(device, gen, m=m))


def test_graph_calls_the_fusekit_operators(device, gen):
    assert_graph_calls(mlp_activations, inputs(device, gen),
                       ("fusekit.silu_and_mul", "fusekit.gelu_tanh_and_mul_split",
                        "fusekit.gelu_and_mul_quant_fp8", "fusekit.silu_and_mul_split_quant_fp8"))


def test_training_step(device, gen):
    # Forward and backward through AOTAutograd: the fake backward ops and the autograd formulas.
    def step(gate_up, gate, up):
        return (fusekit.silu_and_mul(gate_up).float() * fusekit.gelu_and_mul(gate, up)).sum()

    args = [a.float() for a in inputs(device, gen)]
    grads = []
    for fn in (step, torch.compile(step, fullgraph=True, backend="aot_eager")):
        leaves = [a.clone().requires_grad_(True) for a in args]
        fn(*leaves).backward()
        grads.append([leaf.grad for leaf in leaves])
    for eager, compiled in zip(*grads):
        assert torch.equal(eager, compiled)


@pytest.mark.skipif(gpu_skip_reason() is not None, reason=gpu_skip_reason() or "")
def test_cuda_graph_capture_and_replay(gen):
    assert_cuda_graph_replays_equal_eager(mlp_activations,
                                          lambda trial: inputs("cuda", gen, n=4096, m=64))


@pytest.mark.skipif(gpu_skip_reason() is not None, reason=gpu_skip_reason() or "")
def test_backward_under_cuda_graph(gen):
    x = randn((64, 2 * 4096), BF16, "cuda", gen)
    g = randn((64, 4096), BF16, "cuda", gen)
    ops = torch.ops.fusekit
    ops.gelu_tanh_and_mul_backward(g, x)  # warm up
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        grad_x = ops.gelu_tanh_and_mul_backward(g, x)
    graph.replay()
    expected = ops.gelu_tanh_and_mul_backward(g, x)
    torch.cuda.synchronize()
    assert torch.equal(grad_x, expected)
