"""RMSNorm with an fp8 output through PyTorch (fusekit.rms_norm_quant_fp8[_static],
fusekit.fused_add_rms_norm_quant_fp8[_static], torch.ops.fusekit.*): codes and scales against a
float64 reference written from include/fusekit/norm.h, on every device, for both formats, static
and dynamic scales, odd N, batches, strided rows and rank-3 inputs; the residual updated in place;
out= and scale=; GPU against CPU; bad arguments; the eager fallback bit for bit where the float32
y is exact, and the fallback path itself; and the compiled kernels really running."""

from __future__ import annotations

import pytest
import torch

import fusekit
import reference as ref
from conftest import FP8_NAN_CODE, OpRecorder, gpu_skip_reason, poisoned, randn
from fusekit import _eager, _loader

FORMATS = {"e4m3fn": (torch.float8_e4m3fn, 448.0), "e4m3fnuz": (torch.float8_e4m3fnuz, 240.0)}
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
SIZES = (1, 7, 769, 5125)
FLT_MAX = torch.finfo(torch.float32).max
# float32's error in y (row sums of squares, the reciprocal square root) relative to float64.
Y_REL = 1e-4


def reference_y(x, weight, eps, weight_offset=0.0, residual=None):
    """float64 y (and the rounded sum h when adding), y limited to float32's range."""
    h = x if residual is None else ref.fused_add(x, residual)
    y = ref.rms_norm(h, weight, eps, weight_offset)
    return y.clamp(-FLT_MAX, FLT_MAX), h


def expected_scales(y, fp8_max, bound=0.0):
    s = y.abs().amax(-1) / fp8_max
    if bound > 0:
        s = s.clamp_max(bound)
    return s.clamp_min(1 / (fp8_max * 512))


def assert_codes(q, y, scale, fp8_max):
    """Each decoded code within half an fp8 step (2^-4 relative) of y / scale, plus float32's
    error in y, saturating at +-fp8_max; scale broadcast over rows."""
    exact = (y.double().cpu() / scale.double().cpu()).clamp(-fp8_max, fp8_max)
    got = q.double().cpu()
    assert got.shape == exact.shape
    limit = exact.abs() * (2 ** -4 + 3 * Y_REL) + 2 ** -10
    bad = (got - exact).abs() > limit
    assert not bad.any(), (f"{int(bad.sum())} codes off; first at {bad.nonzero()[0].tolist()}: "
                           f"{got[bad][0].item()} vs {exact[bad][0].item()}")


def ordinals(q):
    """fp8 codes in value order (+0 and -0 alike), for within-one-step comparisons."""
    bits = q.view(torch.uint8).int()
    return torch.where(bits >= 128, -(bits - 128), bits)


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", SIZES)
def test_dynamic_matches_float64(device, gen, format, dtype, n):
    fp8, fp8_max = FORMATS[format]
    x = randn((5, n), dtype, device, gen)
    w = randn((n,), dtype, device, gen, mean=1.0)
    with OpRecorder() as rec:
        q, s = fusekit.rms_norm_quant_fp8(x, w, 1e-6, format=format)
    assert rec.ops == ["rms_norm_quant_fp8"]
    assert q.dtype == fp8 and q.shape == x.shape and q.device.type == device
    assert s.dtype == torch.float32 and s.shape == (5,)
    y, _ = reference_y(x, w, 1e-6)
    torch.testing.assert_close(s.double().cpu(), expected_scales(y, fp8_max).cpu(), rtol=Y_REL,
                               atol=0)
    assert_codes(q, y, s[:, None], fp8_max)
    # Each row's largest |y| maps to +-fp8_max unless the floor raised the scale.
    unscaled = (y.abs().amax(-1) / fp8_max > 1 / (fp8_max * 512)).cpu()
    assert q.double().abs().amax(-1).cpu()[unscaled].eq(fp8_max).all()


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", SIZES)
def test_fused_add_dynamic_updates_residual(device, gen, format, dtype, n):
    fp8, fp8_max = FORMATS[format]
    x = randn((3, n), dtype, device, gen)
    for residual_dtype in {dtype, torch.float32}:
        r = randn((3, n), residual_dtype, device, gen)
        w = randn((n,), torch.float32, device, gen, mean=1.0)
        r_before = r.clone()
        q, s = fusekit.fused_add_rms_norm_quant_fp8(x, r, w, 1e-5, 1.0, format=format,
                                                    scale_keepdim=True)
        y, h = reference_y(x, w, 1e-5, 1.0, residual=r_before)
        assert torch.equal(r, h), "residual was not updated to x + residual"
        assert q.dtype == fp8 and s.shape == (3, 1)
        torch.testing.assert_close(s.double().cpu().view(-1), expected_scales(y, fp8_max).cpu(),
                                   rtol=Y_REL, atol=0)
        assert_codes(q, y, s, fp8_max)


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("add", (False, True), ids=("rms", "add"))
@pytest.mark.parametrize("shape", ((), (1,)), ids=("scalar", "one"))
def test_static_matches_float64(device, gen, format, add, shape):
    fp8, fp8_max = FORMATS[format]
    n = 769
    x = randn((4, n), torch.bfloat16, device, gen)
    w = randn((n,), torch.bfloat16, device, gen, mean=1.0)
    scale = torch.full(shape, 0.02, dtype=torch.float32, device=device)
    if add:
        r = randn((4, n), torch.bfloat16, device, gen)
        r_before = r.clone()
        with OpRecorder() as rec:
            q = fusekit.fused_add_rms_norm_quant_fp8_static(x, r, w, scale, format=format)
        assert rec.ops == ["fused_add_rms_norm_quant_fp8_static"]
        y, h = reference_y(x, w, 1e-6, residual=r_before)
        assert torch.equal(r, h)
    else:
        with OpRecorder() as rec:
            q = fusekit.rms_norm_quant_fp8_static(x, w, scale, format=format)
        assert rec.ops == ["rms_norm_quant_fp8_static"]
        y, _ = reference_y(x, w, 1e-6)
    assert q.dtype == fp8 and q.shape == x.shape
    assert_codes(q, y, torch.tensor(0.02), fp8_max)
    # A scale small enough that most values saturate, never beyond +-fp8_max.
    q_small = fusekit.rms_norm_quant_fp8_static(x, w, scale / 50, format=format)
    assert q_small.float().abs().max() == fp8_max
    assert (q_small.float().abs() == fp8_max).float().mean() > 0.3


# An empty batch (M = 0) must give empty outputs of the right shapes and dtypes (scale_keepdim's
# [..., 1] scale too) and a single row (decode) the reference's codes and scale, in every form:
# the batch sizes a kernel launch shape or an empty-input shortcut can get wrong.
@pytest.mark.parametrize("lead", ((0,), (1,), (3, 0)), ids=("M0", "M1", "3x0"))
@pytest.mark.parametrize("keepdim", (False, True), ids=("flat", "keepdim"))
def test_empty_and_single_row(device, gen, lead, keepdim):
    n = 769
    m = torch.Size(lead).numel()
    shape = lead + (n,)
    scale_shape = lead + (1,) if keepdim else (m,)
    x = randn(shape, torch.bfloat16, device, gen)
    w = randn((n,), torch.bfloat16, device, gen, mean=1.0)
    r = randn(shape, torch.float32, device, gen)
    static = torch.tensor([0.02], device=device)
    y, _ = reference_y(x, w, 1e-6)
    y_add, h = reference_y(x, w, 1e-6, residual=r)
    for format, (fp8, fp8_max) in FORMATS.items():
        r_dyn, r_static = r.clone(), r.clone()
        with OpRecorder() as rec:
            dynamic = fusekit.rms_norm_quant_fp8(x, w, format=format, scale_keepdim=keepdim)
            add = fusekit.fused_add_rms_norm_quant_fp8(x, r_dyn, w, format=format,
                                                       scale_keepdim=keepdim)
            q_static = fusekit.rms_norm_quant_fp8_static(x, w, static, format=format)
            q_add_static = fusekit.fused_add_rms_norm_quant_fp8_static(x, r_static, w, static,
                                                                       format=format)
        assert rec.ops == ["rms_norm_quant_fp8", "fused_add_rms_norm_quant_fp8",
                           "rms_norm_quant_fp8_static", "fused_add_rms_norm_quant_fp8_static"]
        for (q, s), yy in ((dynamic, y), (add, y_add)):
            assert s.dtype == torch.float32 and s.shape == scale_shape
            assert s.device.type == device
            torch.testing.assert_close(s.double().cpu().reshape(-1),
                                       expected_scales(yy, fp8_max).cpu().reshape(-1),
                                       rtol=Y_REL, atol=0)
            assert_codes(q, yy, s.reshape(lead + (1,)), fp8_max)
        for q, yy in ((q_static, y), (q_add_static, y_add)):
            assert_codes(q, yy, torch.tensor(0.02), fp8_max)
        for q in (dynamic[0], add[0], q_static, q_add_static):
            assert q.dtype == fp8 and q.shape == shape and q.device.type == device
        assert torch.equal(r_dyn, h) and torch.equal(r_static, h)


def test_scale_upper_bound_caps(device, gen):
    x = randn((6, 256), torch.float32, device, gen)
    w = randn((256,), torch.float32, device, gen, mean=1.0)
    for format, (_, fp8_max) in FORMATS.items():
        q, s = fusekit.rms_norm_quant_fp8(x, w, format=format, scale_upper_bound=1e-3)
        assert torch.all(s == torch.tensor(1e-3, dtype=torch.float32))
        assert q.float().abs().max() == fp8_max  # values beyond the bound saturate
        y, _ = reference_y(x, w, 1e-6)
        assert_codes(q, y, s[:, None], fp8_max)


def test_nan_and_zero_rows(device, gen):
    x = randn((4, 100), torch.bfloat16, device, gen)
    x[1, 17] = float("nan")
    x[2] = 0.0
    w = randn((100,), torch.bfloat16, device, gen, mean=1.0)
    for format, (_, fp8_max) in FORMATS.items():
        q, s = fusekit.rms_norm_quant_fp8(x, w, format=format)
        assert q[1].float().isnan().all() and s[1].isnan()
        assert (q[2].float() == 0).all() and s[2] == torch.tensor(1 / (fp8_max * 512))
        assert not q[[0, 3]].float().isnan().any()
        qs = fusekit.rms_norm_quant_fp8_static(x, w, torch.tensor(0.01, device=device),
                                               format=format)
        assert qs[1].float().isnan().all() and (qs[2].float() == 0).all()


def test_strided_rows_rank3_and_out(device, gen):
    n = 257
    buf = randn((6, n + 9), torch.bfloat16, device, gen)
    x = buf[:, 4:n + 4]  # strided rows
    w = randn((n,), torch.bfloat16, device, gen, mean=1.0)
    rbuf = randn((6, n + 3), torch.float32, device, gen)
    rbuf_before = rbuf.clone()
    r = rbuf[:, 1:n + 1]
    r_before = r.clone()
    # Strided out and a given scale: written in place.
    out_buf = torch.zeros((6, n + 5), dtype=torch.uint8, device=device).view(torch.float8_e4m3fn)
    out = out_buf[:, 5:]
    scale = torch.full((6, 1), float("nan"), device=device)
    q, s = fusekit.fused_add_rms_norm_quant_fp8(x, r, w, format="e4m3fn", out=out, scale=scale)
    assert q is out and s is scale
    y, h = reference_y(x, w, 1e-6, residual=r_before)
    assert torch.equal(rbuf[:, 1:n + 1], h)
    assert torch.equal(rbuf[:, 0], rbuf_before[:, 0])  # the residual's padding untouched
    assert torch.equal(rbuf[:, n + 1:], rbuf_before[:, n + 1:])
    assert_codes(out_buf[:, 5:], y, scale, 448.0)
    assert (out_buf[:, :5].view(torch.uint8) == 0).all()  # nothing written outside out
    # Rank 3, the same values.
    q3, s3 = fusekit.rms_norm_quant_fp8(h.reshape(2, 3, n), w.float(), format="e4m3fnuz",
                                        scale_keepdim=True)
    q2, s2 = fusekit.rms_norm_quant_fp8(h, w.float(), format="e4m3fnuz")
    assert q3.shape == (2, 3, n) and s3.shape == (2, 3, 1)
    assert torch.equal(q3.view(torch.uint8).reshape(6, n), q2.view(torch.uint8))
    assert torch.equal(s3.view(-1), s2)
    # A residual whose rows the kernels cannot address (a transposed view) is still updated.
    rt = torch.randn((n, 6), device=device).t()
    rt_before = rt.clone()
    fusekit.fused_add_rms_norm_quant_fp8_static(x, rt, w, torch.tensor([0.05], device=device),
                                                format="e4m3fn")
    assert torch.equal(rt, ref.fused_add(x, rt_before))


def poisoned_like(t):
    return poisoned(t.shape, t.dtype, t.device)


def assert_written(out, expected):
    """out holds expected's bits, and every code or value that is not NaN in expected was
    overwritten: the poison is not left behind."""
    answer = ~expected.float().isnan()
    assert answer.all(), "the reference itself has NaN: choose inputs without"
    assert not out.float().isnan()[answer].any(), "out= left (partly) unwritten"
    if out.dtype in FP8_NAN_CODE:
        assert torch.equal(out.view(torch.uint8), expected.view(torch.uint8))
    else:
        assert torch.equal(out, expected)


def test_ops_out_forms(device, gen):
    ops = torch.ops.fusekit
    x = randn((3, 64), torch.bfloat16, device, gen)
    w = randn((64,), torch.bfloat16, device, gen, mean=1.0)
    r = randn((3, 64), torch.bfloat16, device, gen)
    one = torch.tensor([0.03], device=device)
    q, s = ops.rms_norm_quant_fp8(x, w, 1e-6, "e4m3fn")
    out, scale = poisoned_like(q), poisoned_like(s)
    ops.rms_norm_quant_fp8_out(out, scale, x, w, 1e-6, "e4m3fn")
    assert_written(out, q)
    assert_written(scale, s)
    qs = ops.rms_norm_quant_fp8_static(x, w, one, 1e-6, "e4m3fnuz")
    out = poisoned_like(qs)
    ops.rms_norm_quant_fp8_static_out(out, x, w, one, 1e-6, "e4m3fnuz")
    assert_written(out, qs)
    r1, r2 = r.clone(), r.clone()
    q, s = ops.fused_add_rms_norm_quant_fp8(x, r1, w, 1e-6, "e4m3fn", 0.0, 0.0, True)
    out, scale = poisoned_like(q), poisoned_like(s)
    ops.fused_add_rms_norm_quant_fp8_out(out, scale, x, r2, w, 1e-6, "e4m3fn")
    assert_written(out, q)
    assert_written(scale, s)
    assert torch.equal(r1, r2) and torch.equal(r1, ref.fused_add(x, r))
    r1, r2 = r.clone(), r.clone()
    qs = ops.fused_add_rms_norm_quant_fp8_static(x, r1, w, one, 1e-6, "e4m3fn")
    out = poisoned_like(qs)
    ops.fused_add_rms_norm_quant_fp8_static_out(out, x, r2, w, one, 1e-6, "e4m3fn")
    assert_written(out, qs)
    assert torch.equal(r1, r2)


@pytest.mark.skipif(gpu_skip_reason() is not None, reason=gpu_skip_reason() or "")
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gpu_agrees_with_cpu(gen, format, dtype):
    # The backends' row sums and reciprocal square roots round differently: residual_out bit for
    # bit, codes within one step with NaN alike, scales within float32's error.
    n = 5125
    x = randn((33, n), dtype, "cpu", gen)
    x[3, 5] = float("nan")
    r = randn((33, n), torch.float32, "cpu", gen)
    w = randn((n,), dtype, "cpu", gen, mean=1.0)
    results = {}
    for device in ("cpu", "cuda"):
        rd = r.clone().to(device)  # updated in place: each backend gets its own copy
        q, s = fusekit.fused_add_rms_norm_quant_fp8(x.to(device), rd, w.to(device),
                                                    format=format)
        qs = fusekit.rms_norm_quant_fp8_static(x.to(device), w.to(device),
                                               torch.tensor(0.01, device=device), format=format)
        results[device] = [t.cpu() for t in (q, s, rd, qs)]
    (q_c, s_c, r_c, qs_c), (q_g, s_g, r_g, qs_g) = results["cpu"], results["cuda"]
    torch.testing.assert_close(r_g, r_c, rtol=0, atol=0, equal_nan=True)  # NaN payloads may differ
    torch.testing.assert_close(s_g, s_c, rtol=2 * Y_REL, atol=0, equal_nan=True)
    for a, b in ((q_g, q_c), (qs_g, qs_c)):
        assert torch.equal(a.float().isnan(), b.float().isnan())
        ok = ~a.float().isnan()
        assert (ordinals(a)[ok] - ordinals(b)[ok]).abs().max() <= 1


# Rows of +-2^k (N = 64, so mean(h^2) = 4^k exactly), eps below float32's resolution there and
# arbitrary weights: rstd is exact and y = h * rstd * w one exact product in both fusekit and
# torch, so the eager fallback's quantization must give the compiled op's codes and scales bit
# for bit: ties, subnormal codes, saturation against a bound, zeros and NaN rows included.
@pytest.mark.parametrize("format", FORMATS)
def test_eager_fp8_quantization_is_bit_exact(device, gen, format):
    fp8, _ = FORMATS[format]
    m, n = 6, 64
    signs = torch.where(torch.rand((m, n), generator=gen) < 0.5, -1.0, 1.0)
    powers = torch.tensor([1.0, 2.0, 0.25, 8.0, 1.0, 0.5])[:, None]
    x = (signs * powers).to(device)
    x[4] = 0.0
    x[5, 9] = float("nan")
    w = (torch.randn(n, generator=gen, dtype=torch.float64) *
         torch.logspace(-12, 2, n, dtype=torch.float64)).float().to(device)
    eps = 1e-12
    for bound in (0.0, 0.5):
        q, s = fusekit.rms_norm_quant_fp8(x, w, eps, format=format, scale_upper_bound=bound)
        eq, es = _eager.rms_norm_quant_fp8(x, w, eps, fp8, 0.0, bound)
        assert torch.equal(q.view(torch.uint8), eq.view(torch.uint8)), (format, bound)
        assert torch.equal(s.view(torch.int32), es.view(torch.int32)), (format, bound)
    one = torch.tensor([0.0137], device=device)
    q = fusekit.rms_norm_quant_fp8_static(x, w, one, eps, format=format)
    eq = _eager.rms_norm_quant_fp8_static(x, w, one, eps, fp8)
    assert torch.equal(q.view(torch.uint8), eq.view(torch.uint8))


def test_fallback_path(device, gen, monkeypatch):
    # With the families disabled the wrappers run the eager code (no fusekit operator), update the
    # residual in place likewise, and agree with the kernels within one code step.
    x = randn((5, 300), torch.bfloat16, device, gen)
    w = randn((300,), torch.bfloat16, device, gen, mean=1.0)
    r = randn((5, 300), torch.float32, device, gen)
    one = torch.tensor(0.02, device=device)
    r_k = r.clone()
    kernels = [fusekit.fused_add_rms_norm_quant_fp8(x, r_k, w, format="e4m3fnuz"),
               fusekit.rms_norm_quant_fp8_static(x, w, one, format="e4m3fn")]
    monkeypatch.setattr(_loader.STATE, "disabled_ops",
                        frozenset({"rms_norm_quant_fp8", "fused_add_rms_norm_quant_fp8"}))
    r_e = r.clone()
    with OpRecorder() as rec:
        eager = [fusekit.fused_add_rms_norm_quant_fp8(x, r_e, w, format="e4m3fnuz"),
                 fusekit.rms_norm_quant_fp8_static(x, w, one, format="e4m3fn")]
    assert rec.ops == []
    assert torch.equal(r_e, r_k)
    (q_k, s_k), qs_k = kernels
    (q_e, s_e), qs_e = eager
    torch.testing.assert_close(s_e, s_k, rtol=2 * Y_REL, atol=0)
    for a, b in ((q_e, q_k), (qs_e, qs_k)):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert (ordinals(a) - ordinals(b)).abs().max() <= 1


def test_float64_uses_the_eager_fallback():
    x = torch.randn(3, 10, dtype=torch.float64)
    w = torch.randn(10, dtype=torch.float64)
    with pytest.warns(RuntimeWarning, match="no fusekit kernels for x of dtype torch.float64"):
        q, s = fusekit.rms_norm_quant_fp8(x, w, format="e4m3fn")
    y, _ = reference_y(x, w, 1e-6)
    assert_codes(q, y, s[:, None], 448.0)


@pytest.mark.parametrize("call, error, message", [
    (lambda x, w, r, s: fusekit.rms_norm_quant_fp8(x, w, format="e5m2"), ValueError,
     "rms_norm_quant_fp8: format: expected \"e4m3fn\" or \"e4m3fnuz\" but got 'e5m2'"),
    (lambda x, w, r, s: fusekit.rms_norm_quant_fp8_static(x, w, s, format=None), ValueError,
     "rms_norm_quant_fp8_static: format: expected \"e4m3fn\" or \"e4m3fnuz\" but got None"),
    (lambda x, w, r, s: fusekit.rms_norm_quant_fp8(x, w[:5], format="e4m3fn"), ValueError,
     "rms_norm_quant_fp8: weight: expected shape [8] but got [5]"),
    (lambda x, w, r, s: fusekit.rms_norm_quant_fp8(x, w, 0.0, format="e4m3fn"), ValueError,
     "eps: expected a finite value > 0 but got 0.0"),
    (lambda x, w, r, s: fusekit.rms_norm_quant_fp8(x, w, format="e4m3fn",
                                                   scale_upper_bound=-1.0), ValueError,
     "scale_upper_bound: expected 0 (no bound) or a value > 0 but got -1.0"),
    (lambda x, w, r, s: fusekit.rms_norm_quant_fp8(
        x, w, format="e4m3fn", out=torch.empty(4, 8, dtype=torch.float8_e4m3fnuz)), ValueError,
     "out: expected dtype torch.float8_e4m3fn but got torch.float8_e4m3fnuz"),
    (lambda x, w, r, s: fusekit.fused_add_rms_norm_quant_fp8(x, r, w, format="e4m3fn",
                                                             scale=torch.empty(3)), ValueError,
     "scale: expected shape [4] or [4, 1] but got [3]"),
    (lambda x, w, r, s: fusekit.fused_add_rms_norm_quant_fp8(x, r[:2], w, format="e4m3fn"),
     ValueError, "residual: expected shape [4, 8] (x's shape) but got [2, 8]"),
    (lambda x, w, r, s: fusekit.rms_norm_quant_fp8_static(x, w, s.expand(2), format="e4m3fn"),
     ValueError, "rms_norm_quant_fp8_static: scale: expected shape [] or [1] (one element) but "
     "got [2]"),
    (lambda x, w, r, s: fusekit.fused_add_rms_norm_quant_fp8_static(x, r, w, s.double(),
                                                                    format="e4m3fn"),
     ValueError, "scale: expected dtype torch.float32 but got torch.float64"),
    (lambda x, w, r, s: fusekit.rms_norm_quant_fp8_static(x, w, 0.5, format="e4m3fn"),
     TypeError, "rms_norm_quant_fp8_static: scale: expected a torch.Tensor but got float"),
    # The operators themselves, past the Python checks: the C++ message.
    (lambda x, w, r, s: torch.ops.fusekit.rms_norm_quant_fp8_out(
        torch.empty(4, 8, dtype=torch.float8_e4m3fnuz), torch.empty(4), x, w, 1e-6, "e4m3fn"),
     ValueError, "rms_norm_quant_fp8: out: expected dtype float8_e4m3fn (format e4m3fn) but got "
     "float8_e4m3fnuz"),
    (lambda x, w, r, s: torch.ops.fusekit.rms_norm_quant_fp8(x, w, 1e-6, "fp8"), ValueError,
     'rms_norm_quant_fp8: format: expected "e4m3fn" or "e4m3fnuz" but got "fp8"'),
    (lambda x, w, r, s: torch.ops.fusekit.rms_norm_quant_fp8_static(x, w, torch.ones(2), 1e-6,
                                                                    "e4m3fn"), ValueError,
     "rms_norm_quant_fp8_static: scale: expected shape [] or [1] (one element) but got [2]"),
    (lambda x, w, r, s: torch.ops.fusekit.rms_norm_quant_fp8(x, w, 1e-6, "e4m3fn", 0.0,
                                                             float("nan")), ValueError,
     "rms_norm_quant_fp8: scale_upper_bound: expected 0 (no bound) or a value > 0 but got nan"),
    (lambda x, w, r, s: torch.ops.fusekit.fused_add_rms_norm_quant_fp8(x, x, w, 1e-6, "e4m3fn"),
     ValueError, "residual_out: expected memory disjoint from x but the two overlap"),
    (lambda x, w, r, s: torch.ops.fusekit.fused_add_rms_norm_quant_fp8_static_out(
        torch.empty(4, 8, dtype=torch.float8_e4m3fn), x, r, w, r.view(-1)[:1], 1e-6, "e4m3fn"),
     ValueError, "residual_out: expected memory disjoint from scale but the two overlap"),
    (lambda x, w, r, s: torch.ops.fusekit.rms_norm_quant_fp8_out(
        torch.empty(4, 8, dtype=torch.float8_e4m3fn), x.view(-1)[:4], x, w, 1e-6, "e4m3fn"),
     ValueError, "scale: expected memory disjoint from x but the two overlap"),
])
def test_bad_arguments(call, error, message):
    x = torch.randn(4, 8)
    w = torch.randn(8)
    r = torch.randn(4, 8)
    s = torch.tensor([0.5])
    r_before = r.clone()
    with pytest.raises(error) as info:
        call(x, w, r, s)
    assert message in str(info.value)
    assert torch.equal(r, r_before)  # nothing written
