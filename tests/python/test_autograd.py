"""Gradients against float64 autograd: each differentiable op (through fusekit's functions, which
save the forward statistics, and through torch.ops directly, which recompute them), every input's
gradient, in float32, bfloat16 and float16, fp32 residual streams with bf16 and fp16 activations,
Gemma's offset, LayerNorm without weight or bias, the modules; and bitwise reproducible weight
gradients."""

from __future__ import annotations

import pytest
import torch

import fusekit
import reference as ref
from conftest import OpRecorder, randn

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


def leaf(t):
    return t.detach().clone().requires_grad_(True)


def float64_grads(fn, inputs, grads):
    """Gradients of sum(fn(*inputs) * grads) in float64 (None for inputs that are None)."""
    leaves = [None if t is None else t.detach().double().requires_grad_(True) for t in inputs]
    outs = fn(*leaves)
    outs = outs if isinstance(outs, tuple) else (outs,)
    total = sum((o * g.double()).sum() for o, g in zip(outs, grads) if g is not None)
    total.backward()
    return [None if t is None else t.grad for t in leaves]


def rounded_sum(x, r, dtype):
    """x + r with the value of the fused add's rounded sum and the gradient of the identity."""
    exact = x + r
    return exact + (ref.fused_add(x.detach(), r.detach(), dtype).double() - exact).detach()


def check_grads(actual, expected, inputs):
    for i, (a, e, t) in enumerate(zip(actual, expected, inputs)):
        if t is None:
            continue
        assert a is not None, f"input {i}: no gradient"
        assert a.dtype == t.dtype, f"input {i}: gradient dtype {a.dtype}, input {t.dtype}"
        # The absolute part scales with the largest gradient element: the values are differences
        # and sums of float32 terms of about that size.
        # float16 gradients get the table's float16 row, as bfloat16 ones get theirs: the backward
        # kernels accumulate in float32 and round each gradient to the input's dtype once, so
        # one float16 ulp (2^-10 relative; 11 significant bits against bfloat16's 8) bounds the
        # rounding, 1e-4 absolute covers float16's subnormals (below 6.1e-5, where the relative
        # bound is meaningless), and 1e-5 * max|gradient| the float32 sums. These inputs give
        # gradients of at most a few tens, far from float16's largest value, 65504.
        ref.assert_close(a, e, dtype=t.dtype, scale=e.abs().max() * torch.ones_like(e))


def run(fn, inputs, grads):
    leaves = [None if t is None else leaf(t) for t in inputs]
    outs = fn(*leaves)
    outs = outs if isinstance(outs, tuple) else (outs,)
    torch.autograd.backward([o for o, g in zip(outs, grads) if g is not None],
                            [g for g in grads if g is not None])
    return [None if t is None else t.grad for t in leaves]


@pytest.mark.parametrize("x_dtype,w_dtype", [(F32, F32), (BF16, BF16), (BF16, F32), (F16, F16)])
@pytest.mark.parametrize("offset", [0.0, 1.0])
@pytest.mark.parametrize("direct", [False, True], ids=["functional", "torch.ops"])
def test_rms_norm(device, gen, x_dtype, w_dtype, offset, direct):
    n = 769
    x = randn((33, n), x_dtype, device, gen)
    w = randn((n,), w_dtype, device, gen, scale=0.5, mean=0.0 if offset else 1.0)
    g = randn((33, n), x_dtype, device, gen)
    fn = ((lambda x, w: torch.ops.fusekit.rms_norm(x, w, 1e-6, offset)) if direct
          else (lambda x, w: fusekit.rms_norm(x, w, 1e-6, offset)))
    with OpRecorder() as rec:
        actual = run(fn, [x, w], [g])
    assert "rms_norm_backward" in rec.ops
    expected = float64_grads(lambda x, w: ref.rms_norm(x, w, 1e-6, offset), [x, w], [g])
    check_grads(actual, expected, [x, w])


@pytest.mark.parametrize("x_dtype,r_dtype",
                         [(F32, F32), (BF16, F32), (BF16, BF16), (F16, F32), (F16, F16)])
@pytest.mark.parametrize("use_residual_out", [True, False])
def test_fused_add_rms_norm(device, gen, x_dtype, r_dtype, use_residual_out):
    n = 5125
    x = randn((9, n), x_dtype, device, gen)
    r = randn((9, n), r_dtype, device, gen)
    w = randn((n,), x_dtype, device, gen, mean=1.0)
    g = randn((9, n), x_dtype, device, gen)
    g_res = randn((9, n), r_dtype, device, gen) if use_residual_out else None
    actual = run(lambda x, r, w: fusekit.fused_add_rms_norm(x, r, w, 1e-6), [x, r, w], [g, g_res])
    # The reference normalizes the rounded sum and differentiates the rounding as the identity.
    h = lambda x, r: rounded_sum(x, r, r_dtype)  # noqa: E731
    expected = float64_grads(
        lambda x, r, w: (ref.rms_norm(h(x, r), w, 1e-6), h(x, r)), [x, r, w], [g, g_res])
    check_grads(actual, expected, [x, r, w])
    # Only residual_out used: the gradient passes straight through the add.
    actual = run(lambda x, r, w: fusekit.fused_add_rms_norm(x, r, w, 1e-6)[1], [x, r, w],
                 [randn((9, n), r_dtype, device, gen)])
    assert actual[2] is None or torch.count_nonzero(actual[2]) == 0


@pytest.mark.parametrize("dtype", [F32, BF16, F16])
@pytest.mark.parametrize("affine", ["weight+bias", "weight", "bias", "none"])
@pytest.mark.parametrize("direct", [False, True], ids=["functional", "torch.ops"])
def test_layer_norm(device, gen, dtype, affine, direct):
    n = 1000
    x = randn((17, n), dtype, device, gen, mean=0.5)
    w = randn((n,), dtype, device, gen, mean=1.0) if "weight" in affine else None
    b = randn((n,), dtype, device, gen) if "bias" in affine else None
    g = randn((17, n), dtype, device, gen)
    fn = ((lambda x, w, b: torch.ops.fusekit.layer_norm(x, w, b, 1e-5)) if direct
          else (lambda x, w, b: fusekit.layer_norm(x, w, b, 1e-5)))
    actual = run(fn, [x, w, b], [g])
    expected = float64_grads(lambda x, w, b: ref.layer_norm(x, w, b, 1e-5), [x, w, b], [g])
    check_grads(actual, expected, [x, w, b])


@pytest.mark.parametrize("dtype", [BF16, F16])
@pytest.mark.parametrize("residual_dtype", [None, F32])
def test_fused_add_layer_norm(device, gen, dtype, residual_dtype):
    n = 769
    x = randn((12, n), dtype, device, gen, mean=0.5)
    r = randn((12, n), dtype, device, gen)
    w = randn((n,), dtype, device, gen, mean=1.0)
    b = randn((n,), dtype, device, gen)
    g = randn((12, n), dtype, device, gen)
    g_res = randn((12, n), residual_dtype or dtype, device, gen)
    actual = run(lambda x, r, w, b: fusekit.fused_add_layer_norm(x, r, w, b, 1e-5,
                                                                 residual_dtype=residual_dtype),
                 [x, r, w, b], [g, g_res])
    h = lambda x, r: rounded_sum(x, r, residual_dtype or dtype)  # noqa: E731
    expected = float64_grads(lambda x, r, w, b: (ref.layer_norm(h(x, r), w, b, 1e-5), h(x, r)),
                             [x, r, w, b], [g, g_res])
    check_grads(actual, expected, [x, r, w, b])


def test_modules_train(device, gen):
    n = 256
    torch.manual_seed(0)
    norm = fusekit.RMSNorm(n, device=device)
    ln = fusekit.LayerNorm(n, device=device)
    x = randn((8, n), F32, device, gen, mean=0.2).requires_grad_(True)
    r = randn((8, n), F32, device, gen)
    y, h = norm(x, r)
    loss = (ln(y) * h).sum()
    loss.backward()
    for p in (norm.weight, ln.weight, ln.bias, x):
        assert p.grad is not None and p.grad.isfinite().all() and p.grad.abs().sum() > 0


def test_weight_gradient_is_reproducible(device, gen):
    x = randn((3000, 1024), BF16, device, gen)
    w = randn((1024,), F32, device, gen, mean=1.0)
    g = randn((3000, 1024), BF16, device, gen)
    first = run(lambda x, w: fusekit.rms_norm(x, w), [x, w], [g])
    second = run(lambda x, w: fusekit.rms_norm(x, w), [x, w], [g])
    assert torch.equal(first[1], second[1]) and torch.equal(first[0], second[0])


def test_expanded_gradients_are_accepted(device, gen):
    # y.sum().backward() hands back a stride-0 gradient.
    x = leaf(randn((4, 64), F32, device, gen))
    fusekit.layer_norm(x, None, None).pow(2).sum().backward()
    x2, w = leaf(x), torch.ones(64, device=device)
    y = fusekit.rms_norm(x2, w)
    y.sum().backward()
    # Taken, and right: a gradient read with the wrong strides would pass the lines above.
    ones = torch.ones((4, 64), device=device)
    expected = float64_grads(lambda x: ref.rms_norm(x, w, 1e-6), [x], [ones])
    check_grads([x2.grad], expected, [x])
