"""torch.compile(fullgraph=True) over code that uses every kind of fusekit call (functional, fused,
in place, modules, training), on each device: no graph break, the compiled graph calls the fusekit
operators, and results equal eager; likewise torch.export. On the GPU also CUDA-graph capture and
replay, which needs kernels that launch on the current stream, allocate only through PyTorch and
never synchronize."""

from __future__ import annotations

import pytest
import torch

import fusekit
from compile_checks import (assert_compiled_equals_eager, assert_cuda_graph_replays_equal_eager,
                            assert_dynamic_shapes_equal_eager, assert_graph_calls)
from conftest import gpu_skip_reason, randn

BF16, F32 = torch.bfloat16, torch.float32


def block(x, residual, w, ln_w, ln_b):
    """A pre-norm block's norms: fused add + RMSNorm, LayerNorm, in-place fused add."""
    y, h = fusekit.fused_add_rms_norm(x, residual, w, 1e-6, residual_dtype=F32)
    z = fusekit.layer_norm(y * 2, ln_w, ln_b, 1e-5)
    z = z + fusekit.rms_norm(z, w, 1e-6, 1.0)
    fusekit.fused_add_rms_norm_(z, h, w, 1e-6)
    return z, h


def inputs(device, gen, n=769, m=6):
    return (randn((m, n), BF16, device, gen), randn((m, n), BF16, device, gen),
            randn((n,), BF16, device, gen, mean=1.0), randn((n,), F32, device, gen, mean=1.0),
            randn((n,), F32, device, gen))


def test_inductor_forward(device, gen):
    # The default backend: Inductor's C++ (CPU) or Triton (GPU) code around the fusekit calls.
    assert_compiled_equals_eager(block, inputs(device, gen), backend="inductor")


def test_graph_calls_the_fusekit_operators(device, gen):
    assert_graph_calls(block, inputs(device, gen),
                       ("fusekit.fused_add_rms_norm", "fusekit.layer_norm", "fusekit.rms_norm",
                        "fusekit.fused_add_rms_norm_"))


def test_dynamic_shapes(device, gen):
    assert_dynamic_shapes_equal_eager(block, lambda m: inputs(device, gen, m=m))


def test_training_step(device, gen):
    # Forward and backward through AOTAutograd: the fake backward ops and the autograd formulas.
    norm = fusekit.RMSNorm(769, device=device)
    ln = fusekit.LayerNorm(769, device=device)

    def step(x, r):
        y, h = norm(x, r)
        return (ln(y).float() * h).sum()

    x, r = randn((6, 769), F32, device, gen), randn((6, 769), F32, device, gen)
    grads = []
    for fn in (step, torch.compile(step, fullgraph=True, backend="aot_eager")):
        for p in (*norm.parameters(), *ln.parameters()):
            p.grad = None
        xl = x.clone().requires_grad_(True)
        fn(xl, r).backward()
        grads.append([xl.grad, norm.weight.grad, ln.weight.grad, ln.bias.grad])
    for eager, compiled in zip(*grads):
        assert torch.equal(eager, compiled)


def test_export(device, gen):
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rms = fusekit.RMSNorm(769, device=device)
            self.ln = fusekit.LayerNorm(769, device=device)

        def forward(self, x, residual):
            y, h = self.rms(x, residual)
            return self.ln(y), h

    model = Block()
    args = (randn((6, 769), F32, device, gen), randn((6, 769), F32, device, gen))
    exported = torch.export.export(model, args)
    called = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    assert {"fusekit.fused_add_rms_norm_with_rstd.default",
            "fusekit.layer_norm_with_stats.default"} <= called
    for a, e in zip(exported.module()(*args), model(*args)):
        assert torch.equal(a, e)


def per_head_norms(qkv, w_q, w_k):
    """An attention layer's q / k norms (Qwen3's) on per-head views of its fused q/k/v
    projection's output, rows in runs that the kernels read where they lie: q into a new tensor,
    k in place inside qkv."""
    t = qkv.shape[0]
    q = qkv[:, :4 * 64].view(t, 4, 64)
    k = qkv[:, 4 * 64:6 * 64].view(t, 2, 64)
    fusekit.rms_norm(k, w_k, 1e-6, out=k)
    return fusekit.rms_norm(q, w_q, 1e-6), fusekit.layer_norm(q, w_q, w_k, 1e-5)


def per_head_inputs(device, gen, t=5):
    return (randn((t, 8 * 64), BF16, device, gen), randn((64,), BF16, device, gen, mean=1.0),
            randn((64,), BF16, device, gen, mean=1.0))


def test_per_head_views(device, gen):
    assert_compiled_equals_eager(per_head_norms, per_head_inputs(device, gen),
                                 backend="inductor")
    assert_dynamic_shapes_equal_eager(per_head_norms, lambda t: per_head_inputs(device, gen, t))
    assert_graph_calls(per_head_norms, per_head_inputs(device, gen),
                       ("fusekit.rms_norm_out", "fusekit.rms_norm", "fusekit.layer_norm"))


@pytest.mark.skipif(gpu_skip_reason() is not None, reason=gpu_skip_reason() or "")
def test_per_head_views_under_cuda_graph(gen):
    assert_cuda_graph_replays_equal_eager(per_head_norms,
                                          lambda trial: per_head_inputs("cuda", gen, t=32))


@pytest.mark.skipif(gpu_skip_reason() is not None, reason=gpu_skip_reason() or "")
def test_cuda_graph_capture_and_replay(gen):
    assert_cuda_graph_replays_equal_eager(block, lambda trial: inputs("cuda", gen, n=4096, m=64))


@pytest.mark.skipif(gpu_skip_reason() is not None, reason=gpu_skip_reason() or "")
def test_backward_under_cuda_graph(gen):
    x = randn((64, 4096), BF16, "cuda", gen)
    w = randn((4096,), F32, "cuda", gen, mean=1.0)
    g = randn((64, 4096), BF16, "cuda", gen)
    y, rstd = torch.ops.fusekit.rms_norm_with_rstd(x, w, 1e-6)
    torch.ops.fusekit.rms_norm_backward(g, x, rstd, w)  # warm up
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        grad_x, grad_w = torch.ops.fusekit.rms_norm_backward(g, x, rstd, w)
    graph.replay()
    expected = torch.ops.fusekit.rms_norm_backward(g, x, rstd, w)
    torch.cuda.synchronize()
    assert torch.equal(grad_x, expected[0]) and torch.equal(grad_w, expected[1])
