"""Every op against the float64 reference on each device: all dtype combinations, odd sizes
(N in 1, 7, 769, 5125; M in 0, 1, 3), strided views, out=, the in-place forms, residual_dtype,
Gemma's weight offset and the Hugging Face order; and proof (the dispatched operators) that the
compiled kernels, not the eager fallback, computed the results."""

from __future__ import annotations

import pytest
import torch

import fusekit
import reference as ref
from conftest import OpRecorder, randn

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
SIZES = [1, 7, 769, 5125]


def dtype_combinations(with_residual: bool):
    """(x, weight, residual) dtypes: weight and residual x's or float32."""
    out = []
    for x in (F32, F16, BF16):
        others = [x] if x == F32 else [x, F32]
        for w in others:
            for r in (others if with_residual else [None]):
                out.append(pytest.param(x, w, r, id=f"x{x}-w{w}-r{r}".replace("torch.", "")))
    return out


def rstd_reference(h, eps, layer=False):
    h = h.double()
    if layer:
        h = h - h.mean(-1, keepdim=True)
    return torch.rsqrt(h.pow(2).mean(-1) + eps).reshape(-1)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("x_dtype,w_dtype,r_dtype", dtype_combinations(False))
def test_rms_norm(device, gen, n, x_dtype, w_dtype, r_dtype):
    for m in (0, 1, 3):
        x = randn((m, n), x_dtype, device, gen)
        w = randn((n,), w_dtype, device, gen, scale=0.5, mean=1.0)
        with OpRecorder() as rec:
            y = fusekit.rms_norm(x, w, 1e-6)
            y2, rstd = torch.ops.fusekit.rms_norm_with_rstd(x, w, 1e-6)
        assert rec.ops == ["rms_norm_out", "rms_norm_with_rstd"]  # no grad: the out= form
        assert y.dtype == x_dtype and y.shape == x.shape and y.device == x.device
        ref.assert_close(y, ref.rms_norm(x, w, 1e-6))
        assert torch.equal(y, y2)
        ref.assert_close(rstd, rstd_reference(x, 1e-6), dtype=F32)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("x_dtype,w_dtype,r_dtype", dtype_combinations(True))
def test_fused_add_rms_norm(device, gen, n, x_dtype, w_dtype, r_dtype):
    x = randn((3, n), x_dtype, device, gen)
    r = randn((3, n), r_dtype, device, gen)
    w = randn((n,), w_dtype, device, gen, scale=0.5, mean=1.0)
    with OpRecorder() as rec:
        y, h = fusekit.fused_add_rms_norm(x, r, w, 1e-6)
    assert rec.ops == ["fused_add_rms_norm_out"]
    expected_h = ref.fused_add(x, r)
    assert h.dtype == r_dtype and torch.equal(h, expected_h)  # bit-exact: one rounding
    assert y.dtype == x_dtype
    ref.assert_close(y, ref.rms_norm(expected_h, w, 1e-6))
    # In place: the same values, written into x and residual.
    x2, r2 = x.clone(), r.clone()
    with OpRecorder() as rec:
        out = fusekit.fused_add_rms_norm_(x2, r2, w, 1e-6)
    assert rec.ops == ["fused_add_rms_norm_"]
    assert out[0] is x2 and out[1] is r2
    assert torch.equal(r2, h) and torch.equal(x2, y)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("x_dtype,w_dtype,r_dtype", dtype_combinations(False))
@pytest.mark.parametrize("affine", ["weight+bias", "weight", "bias", "none"])
def test_layer_norm(device, gen, n, x_dtype, w_dtype, r_dtype, affine):
    x = randn((3, n), x_dtype, device, gen, mean=0.5)
    w = randn((n,), w_dtype, device, gen, scale=0.5, mean=1.0) if "weight" in affine else None
    b = randn((n,), w_dtype, device, gen, scale=0.5) if "bias" in affine else None
    with OpRecorder() as rec:
        y = fusekit.layer_norm(x, w, b, 1e-5)
        _, mean, rstd = torch.ops.fusekit.layer_norm_with_stats(x, w, b, 1e-5)
    assert rec.ops == ["layer_norm_out", "layer_norm_with_stats"]
    assert y.dtype == x_dtype and y.shape == x.shape
    ref.assert_close(y, ref.layer_norm(x, w, b, 1e-5))
    ref.assert_close(mean, x.double().mean(-1), dtype=F32)
    ref.assert_close(rstd, rstd_reference(x, 1e-5, layer=True), dtype=F32)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("x_dtype,w_dtype,r_dtype", dtype_combinations(True))
def test_fused_add_layer_norm(device, gen, n, x_dtype, w_dtype, r_dtype):
    x = randn((3, n), x_dtype, device, gen, mean=0.5)
    r = randn((3, n), r_dtype, device, gen)
    w = randn((n,), w_dtype, device, gen, scale=0.5, mean=1.0)
    b = randn((n,), w_dtype, device, gen, scale=0.5)
    y, h = fusekit.fused_add_layer_norm(x, r, w, b, 1e-5)
    expected_h = ref.fused_add(x, r)
    assert torch.equal(h, expected_h)
    ref.assert_close(y, ref.layer_norm(expected_h, w, b, 1e-5))
    x2, r2 = x.clone(), r.clone()
    with OpRecorder() as rec:
        fusekit.fused_add_layer_norm_(x2, r2, w, b, 1e-5)
    assert rec.ops == ["fused_add_layer_norm_"]
    assert torch.equal(r2, h) and torch.equal(x2, y)


@pytest.mark.parametrize("m", [0, 1])
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=str)
def test_single_row_and_empty_batches(device, gen, m, dtype):
    """M = 1 (decode) and M = 0 (a no-op) for the ops whose tests above take M = 3 alone."""
    n = 769
    x = randn((m, n), dtype, device, gen, mean=0.5)
    r = randn((m, n), F32, device, gen)
    w = randn((n,), dtype, device, gen, scale=0.5, mean=1.0)
    b = randn((n,), dtype, device, gen, scale=0.5)
    ref.assert_close(fusekit.layer_norm(x, w, b), ref.layer_norm(x, w, b, 1e-5))
    for fused, norm in ((fusekit.fused_add_rms_norm, lambda h: ref.rms_norm(h, w, 1e-6)),
                        (fusekit.fused_add_layer_norm, lambda h: ref.layer_norm(h, w, b, 1e-5))):
        args = (w,) if fused is fusekit.fused_add_rms_norm else (w, b)
        y, h = fused(x, r, *args)
        assert y.shape == h.shape == (m, n) and h.dtype == F32
        assert torch.equal(h, ref.fused_add(x, r))
        ref.assert_close(y, norm(h))
        x2, r2 = x.clone(), r.clone()
        getattr(fusekit, fused.__name__ + "_")(x2, r2, *args)
        assert torch.equal(x2, y) and torch.equal(r2, h)
    gate, up = x.double(), r.double()
    ref.assert_close(fusekit.silu_and_mul(torch.cat([x, r.to(dtype)], -1)),
                     gate / (1 + torch.exp(-gate)) * up.to(dtype).double())


def test_residual_dtype_selects_the_sum_dtype(device, gen):
    # bf16 activations and residual, the sum kept in fp32: the same as passing an fp32 residual.
    x = randn((4, 769), BF16, device, gen)
    r = randn((4, 769), BF16, device, gen)
    w = randn((769,), BF16, device, gen, mean=1.0)
    for fn, args in ((fusekit.fused_add_rms_norm, (w,)),
                     (fusekit.fused_add_layer_norm, (w, None))):
        y, h = fn(x, r, *args, residual_dtype=F32)
        y_ref, h_ref = fn(x, r.float(), *args)
        assert h.dtype == F32 and torch.equal(h, h_ref) and torch.equal(y, y_ref)
        assert torch.equal(h, x.float() + r.float())
    y, h = torch.ops.fusekit.fused_add_rms_norm(x, r, w, 1e-6, 0.0, F32)
    assert h.dtype == F32


def test_gemma_offset_and_weight_after_cast(device, gen):
    x = randn((5, 1000), BF16, device, gen)
    w = randn((1000,), BF16, device, gen, scale=0.1)
    ref.assert_close(fusekit.rms_norm(x, w, 1e-6, 1.0), ref.rms_norm(x, w, 1e-6, 1.0))
    module = fusekit.RMSNorm(1000, 1e-6, weight_offset=1.0, dtype=BF16, device=device)
    with torch.no_grad():
        module.weight.copy_(w)
    assert torch.equal(module(x), fusekit.rms_norm(x, w, 1e-6, 1.0))
    y = fusekit.rms_norm(x, w, 1e-6, weight_after_cast=True)
    # Round the normalized value to bf16, then multiply by the weight: two roundings.
    expected = ref.rms_norm(x, w, 1e-6, weight_after_cast_dtype=BF16)
    ref.assert_close(y, expected)


def strided_views(base):
    """Views of `base` ([8, 2N] or so) that are [4, N]-shaped but not contiguous."""
    n = base.shape[-1] // 2
    return {
        "padded rows": base[:4, :n],               # row stride 2N
        "every other row": base[::2, :n],           # row stride 4N
        "unaligned start": base[:4, 1:n + 1],       # base pointer one element in
        "strided last dim": base[:4, ::2],          # copied by the wrapper
        "transposed 3-D": base[:8].reshape(2, 4, 2 * n)[..., :n].transpose(0, 1),  # [4, 2, N]
    }


@pytest.mark.parametrize("view", ["padded rows", "every other row", "unaligned start",
                                  "strided last dim", "transposed 3-D"])
def test_strided_inputs_and_outputs(device, gen, view):
    n = 769
    x = strided_views(randn((8, 2 * n), BF16, device, gen))[view]
    r = strided_views(randn((8, 2 * n), F32, device, gen))[view]
    w = randn((n,), BF16, device, gen, mean=1.0)
    b = randn((n,), BF16, device, gen)
    ref.assert_close(fusekit.rms_norm(x, w), ref.rms_norm(x, w, 1e-6))
    ref.assert_close(fusekit.layer_norm(x, w, b), ref.layer_norm(x, w, b, 1e-5))
    y, h = fusekit.fused_add_rms_norm(x, r, w)
    assert torch.equal(h, ref.fused_add(x, r))
    ref.assert_close(y, ref.rms_norm(h, w, 1e-6))
    # out= into strided views, and the in-place form on strided views.
    out = strided_views(torch.full((8, 2 * n), float("nan"), dtype=BF16, device=device))[view]
    fusekit.rms_norm(x, w, out=out)
    assert torch.equal(out, fusekit.rms_norm(x, w))
    x2, r2 = x.clone(), r.clone()  # contiguous copies: the expected values
    fusekit.fused_add_rms_norm_(x2, r2, w)
    fusekit.fused_add_rms_norm_(x, r, w)
    assert torch.equal(x, x2) and torch.equal(r, r2)
    # Against the checked out-of-place results too: a no-op would leave both pairs equal.
    assert torch.equal(x, y) and torch.equal(r, h)


@pytest.mark.parametrize("dtype", [BF16, F32])
def test_per_head_views_of_a_fused_projection(device, gen, dtype):
    """Per-head norms (Qwen3's and Gemma 3's q/k norms) on [T, H, D] views of a fused q/k/v
    projection's output: rows in runs (one run of H rows per token), which rms_norm's and
    layer_norm's kernels address as they are, with no copy; in place through out=, as attention
    layers call them. The fused adds and the fp8 forms take rows of one stride: such views are
    copied first, with the same results."""
    t, heads, kv_heads, d = 5, 4, 2, 128
    qkv = randn((t, (heads + 2 * kv_heads) * d), dtype, device, gen)
    q = qkv[:, :heads * d].view(t, heads, d)
    k = qkv[:, heads * d:(heads + kv_heads) * d].view(t, kv_heads, d)
    w = randn((d,), dtype, device, gen, mean=1.0)
    b = randn((d,), dtype, device, gen)
    r = randn((t, heads, d), F32, device, gen)
    scale = torch.tensor([0.05], device=device)
    with OpRecorder() as rec:
        yq = fusekit.rms_norm(q, w)
        yk = fusekit.layer_norm(k, w, b)
    assert rec.ops == ["rms_norm", "layer_norm"]
    copies = [op for op in rec.all_ops if "clone" in op or "copy" in op or "contiguous" in op]
    assert copies == []
    y_add, h_add = fusekit.fused_add_rms_norm(q, r, w)
    codes, scales = fusekit.rms_norm_quant_fp8(q, w, format="e4m3fn")
    codes_static = fusekit.rms_norm_quant_fp8_static(k, w, scale, format="e4m3fnuz")
    qc, kc = q.contiguous(), k.contiguous()
    assert torch.equal(yq, fusekit.rms_norm(qc, w))
    ref.assert_close(yq, ref.rms_norm(q, w, 1e-6))
    assert torch.equal(yk, fusekit.layer_norm(kc, w, b))
    y_ref, h_ref = fusekit.fused_add_rms_norm(qc, r, w)
    assert torch.equal(y_add, y_ref) and torch.equal(h_add, h_ref)
    codes_ref, scales_ref = fusekit.rms_norm_quant_fp8(qc, w, format="e4m3fn")
    assert torch.equal(codes.view(torch.uint8), codes_ref.view(torch.uint8))
    assert torch.equal(scales, scales_ref)
    assert torch.equal(codes_static.view(torch.uint8),
                       fusekit.rms_norm_quant_fp8_static(kc, w, scale, format="e4m3fnuz")
                       .view(torch.uint8))
    # In place: k <- rms_norm(k), and q, v untouched.
    before = qkv.clone()
    with OpRecorder() as rec:
        fusekit.rms_norm(k, w, out=k)
    assert rec.ops == ["rms_norm_out"]
    assert torch.equal(k, fusekit.rms_norm(kc, w))
    k_cols = slice(heads * d, (heads + kv_heads) * d)
    assert torch.equal(qkv[:, :k_cols.start], before[:, :k_cols.start])
    assert torch.equal(qkv[:, k_cols.stop:], before[:, k_cols.stop:])
    # layer_norm in place on q, through out=.
    expected_q = fusekit.layer_norm(q.contiguous(), w, b)
    with OpRecorder() as rec:
        fusekit.layer_norm(q, w, b, out=q)
    assert rec.ops == ["layer_norm_out"]
    assert torch.equal(q, expected_q)
    # The in-place fused add with x and residual both per-head views: through a copy, into place.
    other = randn(qkv.shape, dtype, device, gen)
    x2, r2 = qkv.clone()[:, :heads * d].view(t, heads, d), other[:, :heads * d].view(t, heads, d)
    expected_x, expected_r = x2.contiguous(), r2.contiguous()
    y_add2, h_add2 = fusekit.fused_add_rms_norm(expected_x, expected_r, w)
    fusekit.fused_add_rms_norm_(expected_x, expected_r, w)
    fusekit.fused_add_rms_norm_(x2, r2, w)
    assert torch.equal(x2, expected_x) and torch.equal(r2, expected_r)
    # A no-op on both would pass the line above: the out-of-place op's values, too.
    assert torch.equal(x2, y_add2) and torch.equal(r2, h_add2)


def test_per_head_views_differentiate(device, gen):
    """The forward operators take rows in runs; the gradients (whose kernels take rows of one
    stride) equal those of the same rows laid out contiguously."""
    t, heads, d = 3, 4, 64
    w = randn((d,), F32, device, gen, mean=1.0)
    grads = []
    for contiguous in (False, True):
        qkv = randn((t, 3 * heads * d), F32, device, torch.Generator().manual_seed(5))
        qkv.requires_grad_(True)
        wl = w.clone().requires_grad_(True)
        q = qkv[:, :heads * d].view(t, heads, d)
        if contiguous:
            q = q.contiguous()
        y = torch.ops.fusekit.rms_norm(q, wl, 1e-6, 0.0, False)
        (y * torch.arange(d, device=device)).sum().backward()
        grads.append((qkv.grad, wl.grad))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])


def test_out_variants_and_their_statistics(device, gen):
    x = randn((6, 5125), F16, device, gen)
    r = randn((6, 5125), F32, device, gen)
    w = randn((5125,), F32, device, gen, mean=1.0)
    b = randn((5125,), F32, device, gen)
    out = torch.empty_like(x)
    r_out = torch.empty_like(r)
    rstd = torch.empty(6, device=device)
    mean = torch.empty(6, device=device)
    torch.ops.fusekit.fused_add_rms_norm_out(out, r_out, x, r, w, 1e-6, rstd=rstd)
    y, h, rstd_ref = torch.ops.fusekit.fused_add_rms_norm_with_rstd(x, r, w, 1e-6)
    assert torch.equal(out, y) and torch.equal(r_out, h) and torch.equal(rstd, rstd_ref)
    # r_out already holds this call's residual_out (the same sum): poisoned, as are the others,
    # so that each must be written again.
    for t in (out, r_out, mean, rstd):
        t.fill_(float("nan"))
    torch.ops.fusekit.fused_add_layer_norm_out(out, r_out, x, r, w, b, 1e-5, mean, rstd)
    y, h, mean_ref, rstd_ref = torch.ops.fusekit.fused_add_layer_norm_with_stats(x, r, w, b, 1e-5)
    assert torch.equal(out, y) and torch.equal(mean, mean_ref) and torch.equal(rstd, rstd_ref)
    assert torch.equal(r_out, h)
    y_out, h_out = fusekit.fused_add_layer_norm(x, r, w, b, out=torch.empty_like(x),
                                                residual_out=torch.empty_like(r))
    assert torch.equal(y_out, y) and torch.equal(h_out, h)


def test_rank_one_and_rank_three(device, gen):
    w = randn((64,), BF16, device, gen, mean=1.0)
    x1 = randn((64,), BF16, device, gen)
    ref.assert_close(fusekit.rms_norm(x1, w), ref.rms_norm(x1, w, 1e-6))
    x3 = randn((2, 3, 64), BF16, device, gen)
    y3 = fusekit.rms_norm(x3, w)
    assert y3.shape == (2, 3, 64)
    assert torch.equal(y3, fusekit.rms_norm(x3.reshape(6, 64), w).reshape(2, 3, 64))
    assert torch.ops.fusekit.rms_norm_with_rstd(x3, w)[1].shape == (6,)


def test_modules_match_torch_and_load_their_state_dicts(device, gen):
    n = 769
    x = randn((3, n), F32, device, gen, mean=0.3)
    torch_ln = torch.nn.LayerNorm(n, eps=1e-5, device=device)
    torch_rms = torch.nn.RMSNorm(n, eps=1e-6, device=device)
    with torch.no_grad():
        torch_ln.weight.normal_(1.0, 0.2, generator=None)
        torch_ln.bias.normal_(0.0, 0.2)
        torch_rms.weight.normal_(1.0, 0.2)
    ln = fusekit.LayerNorm(n, eps=1e-5, device=device)
    ln.load_state_dict(torch_ln.state_dict())
    rms = fusekit.RMSNorm(n, eps=1e-6, device=device)
    rms.load_state_dict(torch_rms.state_dict())
    ref.assert_close(ln(x), torch_ln(x).detach().double())
    ref.assert_close(rms(x), torch_rms(x).detach().double())
    assert rms.eps == rms.variance_epsilon == 1e-6
    no_bias = fusekit.LayerNorm(n, bias=False, device=device)
    assert set(no_bias.state_dict()) == {"weight"}
    no_affine = fusekit.LayerNorm(n, elementwise_affine=False, device=device)
    assert set(no_affine.state_dict()) == set()
    ref.assert_close(no_affine(x), ref.layer_norm(x, None, None, 1e-5))
    two_dims = fusekit.LayerNorm((4, 8), device=device)
    x2 = randn((3, 4, 8), F32, device, gen)
    ref.assert_close(two_dims(x2),
                     torch.nn.functional.layer_norm(x2, (4, 8), eps=1e-5).double())
    y, h = rms(x, x)
    assert torch.equal(h, x + x) and torch.equal(y, rms(x + x))
