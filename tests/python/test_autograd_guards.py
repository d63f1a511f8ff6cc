"""What autograd must be told about fusekit's calls, so that it never computes a wrong gradient
in silence:

- every tensor a function writes into (out=, the in-place forms, the fp8 fused adds' residual)
  is marked modified (its version counter), so a backward pass through a value saved before the
  write raises, as after PyTorch's own in-place ops;
- the fp8 forms are not differentiable: their outputs never require grad, and a residual they
  would update in place may not require it either;
- the backward formulas are first-order only: a second-order gradient raises instead of coming
  out as zero;
- a tensor on the meta device beside real ones is refused, not answered with unwritten memory.
"""

from __future__ import annotations

import pytest
import torch

import fusekit
from conftest import randn

F32 = torch.float32
N = 64


def saved_for_backward(t: torch.Tensor):
    """A graph that saved t (the gradient of (a * t).sum() with respect to a is t)."""
    a = torch.ones_like(t, requires_grad=True)
    return (a * t).sum()


@pytest.mark.parametrize("name", ["fused_add_rms_norm_", "fused_add_layer_norm_"])
def test_in_place_forms_mark_both_tensors_modified(device, gen, name):
    x, r = randn((4, N), F32, device, gen), randn((4, N), F32, device, gen)
    w = randn((N,), F32, device, gen, mean=1.0)
    loss_x, loss_r = saved_for_backward(x), saved_for_backward(r)
    versions = (x._version, r._version)
    getattr(fusekit, name)(x, r, w)
    assert x._version > versions[0] and r._version > versions[1]
    for loss in (loss_x, loss_r):
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def out_calls(device, gen):
    x, r = randn((4, N), F32, device, gen), randn((4, N), F32, device, gen)
    w, b = randn((N,), F32, device, gen, mean=1.0), randn((N,), F32, device, gen)
    gate_up = randn((4, 2 * N), F32, device, gen)
    fp8 = torch.float8_e4m3fn
    return {
        "rms_norm": (lambda o: fusekit.rms_norm(x, w, out=o[0]), [(4, N)]),
        "fused_add_rms_norm": (
            lambda o: fusekit.fused_add_rms_norm(x, r, w, out=o[0], residual_out=o[1]),
            [(4, N), (4, N)]),
        "layer_norm": (lambda o: fusekit.layer_norm(x, w, b, out=o[0]), [(4, N)]),
        "fused_add_layer_norm": (
            lambda o: fusekit.fused_add_layer_norm(x, r, w, b, out=o[0], residual_out=o[1]),
            [(4, N), (4, N)]),
        "silu_and_mul": (lambda o: fusekit.silu_and_mul(gate_up, out=o[0]), [(4, N)]),
        "gelu_and_mul split": (lambda o: fusekit.gelu_and_mul(x, r, out=o[0]), [(4, N)]),
        "silu_and_mul_quant_fp8": (
            lambda o: fusekit.silu_and_mul_quant_fp8(gate_up, format="e4m3fn", out=o[0],
                                                     scale=o[1]),
            [(4, N, fp8), (4,)]),
        "rms_norm_quant_fp8": (
            lambda o: fusekit.rms_norm_quant_fp8(x, w, format="e4m3fn", out=o[0], scale=o[1]),
            [(4, N, fp8), (4,)]),
        "rms_norm_quant_fp8_static": (
            lambda o: fusekit.rms_norm_quant_fp8_static(
                x, w, torch.tensor([0.05], device=device), format="e4m3fn", out=o[0]),
            [(4, N, fp8)]),
    }


@pytest.mark.parametrize("name", list(out_calls("cpu", torch.Generator())))
def test_out_arguments_are_marked_modified(device, gen, name):
    call, shapes = out_calls(device, gen)[name]
    outs = [torch.empty(s[:-1] if len(s) == 3 else s,
                        dtype=s[-1] if len(s) == 3 else F32, device=device) for s in shapes]
    versions = [o._version for o in outs]
    call(outs)
    assert all(o._version > v for o, v in zip(outs, versions)), name
    if outs[0].dtype == F32:  # a float32 output saved for a backward pass is now stale
        loss = saved_for_backward(outs[0])
        call(outs)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


@pytest.mark.parametrize("static", [False, True])
def test_fp8_fused_add_marks_residual_and_refuses_one_that_requires_grad(device, gen, static):
    x, r = randn((4, N), F32, device, gen), randn((4, N), F32, device, gen)
    w = randn((N,), F32, device, gen, mean=1.0)
    scale = torch.tensor([0.05], device=device)

    def call(residual):
        if static:
            return fusekit.fused_add_rms_norm_quant_fp8_static(x, residual, w, scale,
                                                               format="e4m3fn")
        return fusekit.fused_add_rms_norm_quant_fp8(x, residual, w, format="e4m3fn")

    version = r._version
    call(r)
    assert r._version > version
    leaf = r.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="residual: updated in place by this op"):
        call(leaf)
    with torch.no_grad():
        call(leaf)  # allowed, as PyTorch's in-place ops are under no_grad


def test_fp8_outputs_do_not_require_grad(device, gen):
    x = randn((4, N), F32, device, gen).requires_grad_()
    w = randn((N,), F32, device, gen, mean=1.0).requires_grad_()
    gate_up = randn((4, 2 * N), F32, device, gen).requires_grad_()
    scale = torch.tensor([0.05], device=device)
    outputs = [
        *fusekit.rms_norm_quant_fp8(x, w, format="e4m3fn"),
        fusekit.rms_norm_quant_fp8_static(x, w, scale, format="e4m3fnuz"),
        *fusekit.silu_and_mul_quant_fp8(gate_up, format="e4m3fn"),
        *fusekit.gelu_tanh_and_mul_quant_fp8(x, x, format="e4m3fnuz"),
        *fusekit.fused_add_rms_norm_quant_fp8(x, randn((4, N), F32, device, gen), w,
                                              format="e4m3fn"),
    ]
    assert not any(t.requires_grad for t in outputs)


@pytest.mark.parametrize("name", ["rms_norm", "layer_norm", "fused_add_rms_norm",
                                  "fused_add_layer_norm", "silu_and_mul", "gelu_and_mul split"])
def test_second_order_gradients_raise(device, gen, name):
    x = randn((3, N), F32, device, gen).requires_grad_()
    other = randn((3, N), F32, device, gen).requires_grad_()
    w = randn((N,), F32, device, gen, mean=1.0).requires_grad_()
    y = {
        "rms_norm": lambda: fusekit.rms_norm(x, w),
        "layer_norm": lambda: fusekit.layer_norm(x, w, None),
        "fused_add_rms_norm": lambda: fusekit.fused_add_rms_norm(x, other, w)[0],
        "fused_add_layer_norm": lambda: fusekit.fused_add_layer_norm(x, other, w)[0],
        "silu_and_mul": lambda: fusekit.silu_and_mul(torch.cat([x, other], -1)),
        "gelu_and_mul split": lambda: fusekit.gelu_and_mul(x, other),
    }[name]()
    # The incoming gradient requiring grad ((y ** 2).sum()) or not (a constant: y.sum()).
    for loss in ((y ** 2).sum(), (y * 3).sum()):
        (grad,) = torch.autograd.grad(loss, x, create_graph=True, retain_graph=True)
        assert grad.requires_grad
        with pytest.raises(RuntimeError, match="second-order gradients are not supported"):
            grad.pow(2).sum().backward(retain_graph=True)
    # Without create_graph, nothing changes: a first-order gradient of its own.
    (grad,) = torch.autograd.grad((y * 3).sum(), x)
    assert not grad.requires_grad


@pytest.mark.parametrize("call,message", [
    (lambda x, m: fusekit.rms_norm(x, m(torch.ones(N))), "weight: expected device"),
    (lambda x, m: torch.ops.fusekit.rms_norm(x, m(torch.ones(N)), 1e-6),
     "weight: expected device"),
    (lambda x, m: fusekit.layer_norm(x, None, m(torch.zeros(N))), "bias: expected device"),
    # The direct path allocates residual_out like residual: the operator names that first.
    (lambda x, m: fusekit.fused_add_rms_norm(x, m(torch.ones(4, N)), torch.ones(N)),
     "residual(_out)?: expected device"),
    (lambda x, m: fusekit.fused_add_layer_norm(x, m(torch.ones(4, N)), residual_dtype=F32),
     "residual(_out)?: expected device"),
    (lambda x, m: fusekit.silu_and_mul(x, m(torch.ones(4, N))), "up: expected device"),
    (lambda x, m: torch.ops.fusekit.silu_and_mul_split(x, m(torch.ones(4, N))),
     "up: expected device"),
    (lambda x, m: fusekit.rms_norm_quant_fp8(x, m(torch.ones(N)), format="e4m3fn"),
     "weight: expected device"),
])
def test_meta_tensors_beside_real_ones_are_refused(gen, call, message):
    x = randn((4, N), F32, "cpu", gen)
    with pytest.raises(ValueError, match=message):
        call(x, lambda t: t.to("meta"))
