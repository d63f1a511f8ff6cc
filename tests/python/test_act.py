"""The gated activations through PyTorch (fusekit.silu_and_mul and friends, torch.ops.fusekit.*):
values against float64 references written from include/fusekit/activation.h, on every device,
over odd N, batches, the fused [..., 2N] input and strided gate / up views; the fp8 forms' codes
and scales; out=; autograd against float64 autograd; bad arguments; the eager fallback's fp8
quantization bit for bit against the compiled op; and the compiled kernels really running."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import fusekit
from conftest import OpRecorder, randn
from fusekit import _eager
from reference import assert_close

ACTS = ("silu", "gelu_tanh", "gelu")
FORMATS = {"e4m3fn": (torch.float8_e4m3fn, 448.0), "e4m3fnuz": (torch.float8_e4m3fnuz, 240.0)}
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
SIZES = (1, 7, 769, 5125, 14336)


def fn(act, quant=False):
    return getattr(fusekit, f"{act}_and_mul{'_quant_fp8' if quant else ''}")


def reference_act(act, g):
    """float64 definitions (not torch's activation kernels)."""
    g = g.double()
    if act == "silu":
        return g / (1 + torch.exp(-g))
    if act == "gelu_tanh":
        return 0.5 * g * (1 + torch.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g ** 3)))
    return 0.5 * g * (1 + torch.erf(g / math.sqrt(2)))


def reference(act, gate, up):
    return reference_act(act, gate) * up.double()


def split(x):
    n = x.shape[-1] // 2
    return x[..., :n], x[..., n:]


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", SIZES)
def test_fused_and_split_match_float64(device, gen, act, dtype, n):
    x = randn((3, 2 * n), dtype, device, gen, scale=2.0)
    expected = reference(act, *split(x))
    with OpRecorder() as rec:
        y = fn(act)(x)
        # Strided views: the two halves of x, and up from a padded buffer.
        gate, up = split(x)
        padded = randn((3, n + 5), dtype, device, gen)
        padded[:, 2:n + 2] = up
        y_split = fn(act)(gate, padded[:, 2:n + 2])
    assert rec.ops == [f"{act}_and_mul_out", f"{act}_and_mul_split"]  # views: checked path
    assert y.shape == (3, n) and y.dtype == dtype and y.device.type == device
    assert_close(y, expected)
    assert torch.equal(y, y_split)


@pytest.mark.parametrize("act", ACTS)
def test_batches_rank_and_out(device, gen, act):
    x = randn((2, 257, 2 * 769), torch.bfloat16, device, gen)
    expected = reference(act, *split(x))
    assert_close(fn(act)(x), expected)
    out = torch.full((2, 257, 769), float("nan"), dtype=torch.bfloat16, device=device)
    assert fn(act)(x, out=out) is out
    assert_close(out, expected)
    empty = fn(act)(x[:, :0])
    assert empty.shape == (2, 0, 769)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", (1, 7, 769, 14336))
def test_quant_fp8_matches_float64(device, gen, act, format, dtype, n):
    fp8, fp8_max = FORMATS[format]
    x = randn((4, 2 * n), dtype, device, gen, scale=3.0)
    q, scale = fn(act, True)(x, format=format)
    assert q.dtype == fp8 and q.shape == (4, n)
    assert scale.dtype == torch.float32 and scale.shape == (4,)
    y = reference(act, *split(x))
    expected_scale = (y.abs().amax(-1) / fp8_max).clamp_min(1 / (fp8_max * 512))
    # The fp8 forms' float32 math is within about 1e-5 of the float64 value (Fp8Ops in
    # src/core/act_math.h: 3 mantissa bits cannot see it), and so is the row's max.
    assert torch.allclose(scale.double().cpu(), expected_scale.cpu(), rtol=2e-5, atol=0)
    # Each code is y / scale rounded to fp8: within half an fp8 step (3 mantissa bits: 2^-4
    # relative) plus half the smallest subnormal step.
    exact = (y / scale.double()[:, None]).cpu()
    got = q.double().cpu()
    assert torch.all((got - exact).abs() <= exact.abs() * 2 ** -4 + 2 ** -10)
    assert got.abs().max() <= fp8_max
    q2, scale2 = fn(act, True)(x, format=format, scale_keepdim=True)
    assert scale2.shape == (4, 1) and torch.equal(scale2.view(-1), scale)
    assert torch.equal(q2.view(torch.uint8), q.view(torch.uint8))
    gate, up = split(x)
    q3, scale3 = fn(act, True)(gate, up, format=format)
    assert torch.equal(q3.view(torch.uint8), q.view(torch.uint8)) and torch.equal(scale3, scale)


# An empty batch (M = 0) must give empty codes and scales of the right shapes and dtypes
# (scale_keepdim's [..., 1] too) and a single row (decode) the reference's, from the fused input
# and from split gate / up views alike: the batch sizes a launch shape or an empty-input shortcut
# can get wrong.
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("lead", ((0,), (1,), (3, 0)), ids=("M0", "M1", "3x0"))
def test_quant_fp8_empty_and_single_row(device, gen, act, lead):
    n = 769
    m = torch.Size(lead).numel()
    x = randn(lead + (2 * n,), torch.bfloat16, device, gen, scale=3.0)
    y = reference(act, *split(x))
    for format, (fp8, fp8_max) in FORMATS.items():
        expected_scale = (y.abs().amax(-1) / fp8_max).clamp_min(1 / (fp8_max * 512))
        for keepdim in (False, True):
            with OpRecorder() as rec:
                fused = fn(act, True)(x, format=format, scale_keepdim=keepdim)
                separate = fn(act, True)(*split(x), format=format, scale_keepdim=keepdim)
            assert rec.ops == [f"{act}_and_mul_quant_fp8", f"{act}_and_mul_split_quant_fp8"]
            for q, scale in (fused, separate):
                assert q.dtype == fp8 and q.shape == lead + (n,) and q.device.type == device
                assert scale.dtype == torch.float32 and scale.device.type == device
                assert scale.shape == (lead + (1,) if keepdim else (m,))
                scale = scale.reshape(lead + (1,))
                # As in test_quant_fp8_matches_float64: float32 math within 2e-5 of float64, each
                # code within half an fp8 step of y / scale.
                assert torch.allclose(scale.double().cpu()[..., 0], expected_scale.cpu(),
                                      rtol=2e-5, atol=0)
                exact = (y / scale.double()).cpu()
                got = q.double().cpu()
                assert torch.all((got - exact).abs() <= exact.abs() * 2 ** -4 + 2 ** -10)


@pytest.mark.parametrize("format", FORMATS)
def test_quant_fp8_bound_and_out(device, gen, format):
    fp8, fp8_max = FORMATS[format]
    x = randn((5, 2 * 64), torch.float32, device, gen, scale=4.0)
    bound = 1e-3
    q, scale = fusekit.silu_and_mul_quant_fp8(x, format=format, scale_upper_bound=bound)
    # Every row's max|y| / fp8_max is far above the bound: the scale is the bound itself (<= would
    # pass a bound applied wrongly, e.g. halved).
    assert torch.all(scale == torch.tensor(bound, dtype=torch.float32))
    assert q.float().abs().max() == fp8_max  # values beyond the bound saturate
    out = torch.empty((5, 64), dtype=fp8, device=device)
    s = torch.full((5, 1), float("nan"), device=device)
    r = fusekit.silu_and_mul_quant_fp8(x, format=format, scale_upper_bound=bound, out=out,
                                       scale=s)
    assert r[0] is out and r[1] is s
    assert torch.equal(out.view(torch.uint8), q.view(torch.uint8))
    assert torch.equal(s.view(-1), scale)


# float16 as bfloat16: float32 math rounded once to the gradient's dtype, so assert_close's
# table (one ulp of the dtype: 2^-10 relative for float16's 11 significant bits, 1e-4 absolute
# for its subnormals) plus the float32 sums' term below; |gradients| here stay below ~10, far
# from float16's largest value (65504).
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float16), ids=str)
def test_autograd_matches_float64(device, gen, act, dtype):
    x = randn((6, 2 * 769), dtype, device, gen).requires_grad_()
    grad = randn((6, 769), dtype, device, gen)
    with OpRecorder() as rec:
        fn(act)(x).backward(grad)
    assert rec.ops == [f"{act}_and_mul", f"{act}_and_mul_backward"]
    x64 = x.detach().double().requires_grad_()
    reference(act, *split(x64)).backward(grad.double())
    # Float32 sums of terms up to |grad| (1 + |gate|) (|up| + 1) in size, then one rounding.
    gate64, up64 = split(x64.detach())
    terms = grad.double().abs() * (1 + gate64.abs()) * (1 + up64.abs())
    assert_close(x.grad, x64.grad, scale=torch.cat([terms, terms], dim=-1))

    gate = x.detach()[:, :769].clone().requires_grad_()
    up = x.detach()[:, 769:].clone().requires_grad_()
    fn(act)(gate, up).backward(grad)
    assert torch.equal(gate.grad, x.grad[:, :769]) and torch.equal(up.grad, x.grad[:, 769:])
    # Only up needs a gradient: gate gets none.
    gate.grad = up.grad = None
    up2 = up.detach().requires_grad_()
    fn(act)(gate.detach(), up2).backward(grad)
    assert torch.equal(up2.grad, x.grad[:, 769:])


def test_eager_fallback_values(device, gen):
    x = randn((3, 2 * 769), torch.bfloat16, device, gen)
    for act in ACTS:
        assert_close(_eager.act_and_mul(act, *split(x)), reference(act, *split(x)))


# Gates >= 17 make every activation exactly g in float32 (sigmoid, tanh and erf round to 1), in
# fusekit's math and torch's alike, so y = g * up is the same float32 product on both sides and
# the eager fallback's quantization must give the compiled op's codes and scales bit for bit:
# ties, subnormal codes, saturation against a bound, zeros and NaN rows included.
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("format", FORMATS)
def test_eager_fp8_quantization_is_bit_exact(device, gen, act, format):
    fp8, _ = FORMATS[format]
    m, n = 6, 777
    gate = (torch.rand((m, n), generator=gen, dtype=torch.float64) * 1000 + 17).float()
    up = torch.randn((m, n), generator=gen, dtype=torch.float64).float()
    up[1] *= torch.logspace(-12, 0, n, dtype=torch.float32)  # subnormal fp8 codes
    up[2, :10] = 0.0
    up[2, 10:] = -0.0  # -0 products: fnuz has no -0
    up[3, 5] = float("nan")
    up[4, 7] = 3e38  # a product beyond float32's range
    gate, up = gate.to(device), up.to(device)
    for bound in (0.0, 0.5):
        q, s = fn(act, True)(gate, up, format=format, scale_upper_bound=bound)
        eq, es = _eager.act_and_mul_quant_fp8(act, gate, up, fp8, bound)
        assert torch.equal(q.view(torch.uint8), eq.view(torch.uint8)), (act, format, bound)
        assert torch.equal(s.view(torch.int32), es.view(torch.int32)), (act, format, bound)


def _fp8_steps(q):
    """The fp8 codes of q as signed step counts from zero (sign and magnitude bits), so that codes
    one step apart differ by one across zero too, and +0 and -0 are the same point."""
    c = q.view(torch.uint8).int()
    return torch.where(c >= 0x80, -(c & 0x7F), c)


def test_random_inputs_quantize_alike_in_eager_and_compiled(device, gen):
    # Ordinary gates: the activations agree within an ulp or two, so the codes within one step.
    # Where gelu underflows torch's CPU kernels may return 0 for a tiny value (seen with AVX2 at
    # g = -7.6, where gelu is -1.2e-13), so y is -0 there against fusekit's tiny positive y: the
    # same zero code with the other sign, which the step counts treat as equal.
    x = randn((8, 2 * 1024), torch.bfloat16, device, gen, scale=3.0)
    for act in ACTS:
        for format, (fp8, _) in FORMATS.items():
            q, s = fn(act, True)(x, format=format)
            eq, es = _eager.act_and_mul_quant_fp8(act, *split(x), fp8)
            assert torch.allclose(s, es, rtol=1e-6, atol=0)
            assert torch.equal(q.float().isnan(), eq.float().isnan())
            assert (_fp8_steps(q) - _fp8_steps(eq)).abs().max() <= 1


@pytest.mark.parametrize("call, error, message", [
    (lambda x, g, u: fusekit.silu_and_mul(x[:, :7]), ValueError,
     "silu_and_mul: x: expected an even last dimension (gate and up halves of 2N) but got 7"),
    (lambda x, g, u: fusekit.gelu_and_mul(g, u[:, :3]), ValueError,
     "gelu_and_mul: up: expected shape [4, 8] (gate's shape) but got [4, 3]"),
    (lambda x, g, u: fusekit.silu_and_mul(g, u.half()), ValueError,
     "up: expected dtype torch.float32 (gate's dtype) but got torch.float16"),
    (lambda x, g, u: fusekit.silu_and_mul(x, out=torch.empty(4, 8, dtype=torch.float16)),
     ValueError, "out: expected dtype torch.float32 but got torch.float16"),
    (lambda x, g, u: fusekit.silu_and_mul(x, out=torch.empty(4, 9)), ValueError,
     "out: expected shape [4, 8] but got [4, 9]"),
    (lambda x, g, u: fusekit.silu_and_mul("x"), TypeError,
     "silu_and_mul: x: expected a torch.Tensor but got str"),
    (lambda x, g, u: fusekit.silu_and_mul_quant_fp8(x, format="e5m2"), ValueError,
     'format: expected "e4m3fn" or "e4m3fnuz" but got \'e5m2\''),
    (lambda x, g, u: fusekit.silu_and_mul_quant_fp8(x, format=torch.float8_e4m3fn), ValueError,
     'format: expected "e4m3fn" or "e4m3fnuz"'),
    (lambda x, g, u: fusekit.silu_and_mul_quant_fp8(
        x, format="e4m3fn", out=torch.empty(4, 8, dtype=torch.float8_e4m3fnuz)), ValueError,
     "out: expected dtype torch.float8_e4m3fn but got torch.float8_e4m3fnuz"),
    (lambda x, g, u: fusekit.silu_and_mul_quant_fp8(x, format="e4m3fn", scale_upper_bound=-1.0),
     ValueError, "scale_upper_bound: expected 0 (no bound) or a value > 0 but got -1.0"),
    (lambda x, g, u: fusekit.silu_and_mul_quant_fp8(x, format="e4m3fn", scale=torch.empty(3)),
     ValueError, "scale: expected shape [4] or [4, 1] but got [3]"),
    (lambda x, g, u: fusekit.silu_and_mul_quant_fp8(
        x, format="e4m3fn", scale=torch.empty(4, dtype=torch.float16)), ValueError,
     "scale: expected dtype torch.float32 but got torch.float16"),
    # The operators themselves, past the Python checks: the C++ message.
    (lambda x, g, u: torch.ops.fusekit.silu_and_mul(x[:, :7]), ValueError,
     "silu_and_mul: x: expected an even last dimension"),
    (lambda x, g, u: torch.ops.fusekit.gelu_and_mul_quant_fp8_out(
        torch.empty(4, 8, dtype=torch.float8_e4m3fnuz), torch.empty(4), x, "e4m3fn"), ValueError,
     "gelu_and_mul_quant_fp8: out: expected dtype float8_e4m3fn (format e4m3fn) but got "
     "float8_e4m3fnuz"),
    (lambda x, g, u: torch.ops.fusekit.silu_and_mul_quant_fp8(x, "fp8"), ValueError,
     'silu_and_mul_quant_fp8: format: expected "e4m3fn" or "e4m3fnuz" but got "fp8"'),
    (lambda x, g, u: torch.ops.fusekit.silu_and_mul_split_out(g, g, u), ValueError,
     "out: expected memory disjoint from gate but the two overlap"),
    (lambda x, g, u: torch.ops.fusekit.silu_and_mul_split_backward(torch.empty(4, 8), g,
                                                                   u.double()), ValueError,
     "up: expected dtype float32 (gate's dtype) but got float64"),
])
def test_bad_arguments(call, error, message):
    x = torch.randn(4, 16)
    g, u = torch.randn(4, 8), torch.randn(4, 8)
    with pytest.raises(error) as info:
        call(x, g, u)
    assert message in str(info.value)


def test_out_with_grad_is_refused():
    x = torch.randn(2, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="out= arguments don't support automatic"):
        fusekit.silu_and_mul(x, out=torch.empty(2, 4))


def test_no_grad_contiguous_calls_take_the_direct_path(device, gen):
    x = randn((2, 64), torch.float16, device, gen)
    with torch.no_grad(), OpRecorder() as rec:
        fusekit.gelu_tanh_and_mul(x)
        fusekit.gelu_tanh_and_mul(*(h.contiguous() for h in split(x)))  # separate tensors
    assert rec.ops == ["gelu_tanh_and_mul_out", "gelu_tanh_and_mul_split_out"]


def test_float64_uses_the_eager_fallback():
    x = torch.randn(3, 10, dtype=torch.float64)
    with pytest.warns(RuntimeWarning, match="no fusekit kernels for x of dtype torch.float64"):
        y = fusekit.silu_and_mul(x)
    assert torch.allclose(y, F.silu(x[:, :5]) * x[:, 5:])
