"""Bad arguments: the Python functions raise TypeError for non-tensors and ValueError naming the
argument, the expected and the actual value; the operators (torch.ops.fusekit.*) raise the C++
library's Status as ValueError with its message; and a failed call writes nothing."""

from __future__ import annotations

import math
import re

import pytest
import torch

import fusekit
from conftest import poisoned, randn

ops = torch.ops.fusekit
BF16 = torch.bfloat16


@pytest.fixture
def t(device, gen):
    """Valid operands: x, residual [4, 64] bf16, weight and bias [64] bf16."""
    return {
        "x": randn((4, 64), BF16, device, gen),
        "r": randn((4, 64), BF16, device, gen),
        "w": randn((64,), BF16, device, gen, mean=1.0),
        "b": randn((64,), BF16, device, gen),
    }


@pytest.mark.parametrize("call,error,message", [
    (lambda t: fusekit.rms_norm([1.0], t["w"]), TypeError,
     "rms_norm: x: expected a torch.Tensor but got list"),
    (lambda t: fusekit.rms_norm(t["x"], None), TypeError,
     "rms_norm: weight: expected a torch.Tensor but got NoneType"),
    (lambda t: fusekit.layer_norm(t["x"], t["w"], 0.5), TypeError,
     "layer_norm: bias: expected a torch.Tensor but got float"),
    (lambda t: fusekit.rms_norm(t["x"], t["w"][:63]), ValueError,
     "rms_norm: weight: expected shape [64] but got [63]"),
    (lambda t: fusekit.rms_norm(t["x"][0, 0], t["w"]), ValueError,
     "rms_norm: x: expected rank 1"),
    (lambda t: fusekit.layer_norm(t["x"], t["w"], t["b"].reshape(8, 8)), ValueError,
     "layer_norm: bias: expected shape [64] but got [8, 8]"),
    (lambda t: fusekit.fused_add_rms_norm(t["x"], None, t["w"]), TypeError,
     "fused_add_rms_norm: residual: expected a torch.Tensor but got NoneType"),
    (lambda t: fusekit.fused_add_layer_norm_(t["x"], None), TypeError,
     "fused_add_layer_norm_: residual: expected a torch.Tensor but got NoneType"),
    (lambda t: fusekit.fused_add_rms_norm_quant_fp8(t["x"], None, t["w"], format="e4m3fn"),
     TypeError, "fused_add_rms_norm_quant_fp8: residual: expected a torch.Tensor but got NoneType"),
    (lambda t: fusekit.fused_add_rms_norm(t["x"], t["r"][:3], t["w"]), ValueError,
     "fused_add_rms_norm: residual: expected shape [4, 64] (x's shape) but got [3, 64]"),
    (lambda t: fusekit.fused_add_layer_norm_(t["x"], t["r"], t["w"], t["b"], 0.0), ValueError,
     "fused_add_layer_norm_: eps: expected a finite value > 0 but got 0.0"),
    (lambda t: fusekit.rms_norm(t["x"], t["w"], math.nan), ValueError,
     "rms_norm: eps: expected a finite value > 0 but got nan"),
    (lambda t: fusekit.rms_norm(t["x"], t["w"], 1e-6, math.inf), ValueError,
     "rms_norm: weight_offset: expected a finite value but got inf"),
    (lambda t: fusekit.rms_norm(t["x"], t["w"], out=torch.empty_like(t["x"][:2])), ValueError,
     "rms_norm: out: expected shape [4, 64] but got [2, 64]"),
    (lambda t: fusekit.layer_norm(t["x"], out=t["x"].float()), ValueError,
     "layer_norm: out: expected dtype torch.bfloat16 but got torch.float32"),
    (lambda t: fusekit.fused_add_rms_norm(t["x"], t["r"], t["w"], residual_dtype=torch.float32,
                                          residual_out=torch.empty_like(t["r"])), ValueError,
     "fused_add_rms_norm: residual_out: expected dtype torch.float32 but got torch.bfloat16"),
    (lambda t: fusekit.rms_norm(t["x"].requires_grad_(), t["w"], out=torch.empty_like(t["x"])),
     RuntimeError, "rms_norm: out= arguments don't support automatic differentiation"),
    # [1, N] is not [N], whether the call takes the direct path (contiguous, no gradient) or not;
    # torch.nn.functional.rms_norm refuses it too.
    (lambda t: fusekit.rms_norm(t["x"], t["w"].reshape(1, 64)), ValueError,
     "rms_norm: weight: expected shape [64] but got [1, 64]"),
    (lambda t: fusekit.rms_norm(t["x"].float().requires_grad_(), t["w"].float().reshape(1, 64)),
     ValueError, "rms_norm: weight: expected shape [64] but got [1, 64]"),
    (lambda t: fusekit.layer_norm(t["x"], t["w"], t["b"].reshape(1, 64)), ValueError,
     "layer_norm: bias: expected shape [64] but got [1, 64]"),
    # Scalars other than int and float are refused on the direct path (contiguous, no gradient)
    # as on the checked one, where the operator itself would take a bool or a tensor.
    (lambda t: fusekit.rms_norm(t["x"], t["w"], True), ValueError,
     "rms_norm: eps: expected a finite value > 0 but got True"),
    (lambda t: fusekit.layer_norm(t["x"], t["w"], t["b"], None), ValueError,
     "layer_norm: eps: expected a finite value > 0 but got None"),
    (lambda t: fusekit.fused_add_rms_norm(t["x"], t["r"], t["w"], 1e-6, torch.tensor(1.0)),
     ValueError, "fused_add_rms_norm: weight_offset: expected a finite value but got tensor(1.)"),
    (lambda t: fusekit.fused_add_layer_norm(t["x"], t["r"], t["w"], t["b"], "1e-5"), ValueError,
     "fused_add_layer_norm: eps: expected a finite value > 0 but got '1e-5'"),
    # Integer, bool and complex tensors are refused, not run eagerly into meaningless numbers;
    # float64 runs eagerly (test_fallback.py).
    (lambda t: fusekit.rms_norm(t["x"].to(torch.int32), t["w"]), ValueError,
     "rms_norm: x: expected a floating-point dtype but got torch.int32"),
    (lambda t: fusekit.rms_norm(t["x"] > 0, t["w"]), ValueError,
     "rms_norm: x: expected a floating-point dtype but got torch.bool"),
    (lambda t: fusekit.layer_norm(t["x"].to(torch.complex64), t["w"], t["b"]), ValueError,
     "layer_norm: x: expected a floating-point dtype but got torch.complex64"),
    (lambda t: fusekit.rms_norm(t["x"], t["w"].to(torch.int64)), ValueError,
     "rms_norm: weight: expected a floating-point dtype but got torch.int64"),
    (lambda t: fusekit.layer_norm(t["x"], t["w"], t["b"].to(torch.int8)), ValueError,
     "layer_norm: bias: expected a floating-point dtype but got torch.int8"),
    (lambda t: fusekit.fused_add_rms_norm(t["x"], t["r"].to(torch.int16), t["w"]), ValueError,
     "fused_add_rms_norm: residual: expected a floating-point dtype but got torch.int16"),
    (lambda t: fusekit.fused_add_layer_norm(t["x"], t["r"], t["w"], t["b"],
                                            residual_dtype=torch.int32), ValueError,
     "fused_add_layer_norm: residual_dtype: expected a floating-point dtype but got torch.int32"),
    (lambda t: fusekit.fused_add_rms_norm_(t["x"], t["r"].to(torch.int32), t["w"]), ValueError,
     "fused_add_rms_norm_: residual: expected a floating-point dtype but got torch.int32"),
    (lambda t: fusekit.RMSNorm(64).to(t["x"].device)(t["x"].to(torch.int32)), ValueError,
     "rms_norm: x: expected a floating-point dtype but got torch.int32"),
    (lambda t: fusekit.silu_and_mul(t["x"].to(torch.int32)), ValueError,
     "silu_and_mul: x: expected a floating-point dtype but got torch.int32"),
    (lambda t: fusekit.gelu_and_mul(t["x"].to(torch.int64), t["r"].to(torch.int64)), ValueError,
     "gelu_and_mul: gate: expected a floating-point dtype but got torch.int64"),
    (lambda t: fusekit.silu_and_mul_quant_fp8(t["x"].to(torch.int32), format="e4m3fn"),
     ValueError, "silu_and_mul_quant_fp8: x: expected a floating-point dtype but got torch.int32"),
    (lambda t: fusekit.rms_norm_quant_fp8(t["x"].to(torch.int32), t["w"], format="e4m3fn"),
     ValueError, "rms_norm_quant_fp8: x: expected a floating-point dtype but got torch.int32"),
])
def test_functions(t, call, error, message):
    with pytest.raises(error) as info:
        call(t)
    assert message in str(info.value)


@pytest.mark.parametrize("call,message", [
    (lambda t: ops.rms_norm(t["x"], t["w"][:63], 1e-6),
     "invalid argument: rms_norm: weight: expected shape [64] but got [63]"),
    (lambda t: ops.rms_norm(t["x"].double(), t["w"], 1e-6),
     "unsupported: rms_norm: x: expected dtype float32 or float16 or bfloat16 but got float64"),
    (lambda t: ops.rms_norm(t["x"], t["w"].half(), 1e-6),
     "unsupported: rms_norm: weight: expected dtype bfloat16 or float32 but got float16"),
    (lambda t: ops.rms_norm(t["x"].to(torch.complex64), t["w"], 1e-6),
     "unsupported: rms_norm: x: expected dtype float32 or float16 or bfloat16 but got "
     "ComplexFloat"),
    (lambda t: ops.rms_norm(t["x"], t["w"], 0.0),
     "invalid argument: rms_norm: eps: expected a finite value > 0 but got 0"),
    (lambda t: ops.rms_norm(t["x"][:, ::2], t["w"][:32], 1e-6),
     "rms_norm: x: expected a contiguous last dimension (stride 1) but got stride 2"),
    (lambda t: ops.fused_add_rms_norm(t["x"], t["r"].half(), t["w"], 1e-6),
     "fused_add_rms_norm: residual: expected dtype bfloat16 or float32 but got float16"),
    (lambda t: ops.fused_add_rms_norm_(t["x"], t["x"], t["w"], 1e-6),
     "fused_add_rms_norm_inplace: out: expected memory disjoint from residual"),
    (lambda t: ops.layer_norm(t["x"], t["w"].float(), t["b"], 1e-5),
     "layer_norm: bias: expected weight's dtype float32 but got bfloat16"),
    (lambda t: ops.rms_norm_out(t["x"][1:], t["x"][:3], t["w"], 1e-6),
     "rms_norm: out: expected memory disjoint from x or identical to it (in place) but the two "
     "overlap"),
    (lambda t: ops.rms_norm_out(torch.empty_like(t["x"]), t["x"], t["w"], 1e-6,
                                rstd=torch.empty(3, device=t["x"].device)),
     "rms_norm: rstd: expected shape [4] but got [3]"),
    (lambda t: ops.layer_norm_out(torch.empty_like(t["x"]), t["x"], None, None, 1e-5,
                                  torch.empty(4, device=t["x"].device, dtype=BF16)),
     "layer_norm: mean: expected dtype float32 but got bfloat16"),
    (lambda t: ops.rms_norm_backward(t["x"][:3], t["x"], torch.ones(4, device=t["x"].device),
                                     t["w"]),
     "rms_norm_backward: x: expected shape [3, 64] (grad_out's shape) but got [4, 64]"),
    (lambda t: ops.layer_norm_backward(t["x"], t["x"], torch.ones(4, device=t["x"].device),
                                       torch.ones(3, device=t["x"].device), t["w"], t["b"]),
     "layer_norm_backward: rstd: expected shape [4] but got [3]"),
])
def test_operators(t, call, message):
    with pytest.raises(ValueError) as info:
        call(t)
    assert message in str(info.value)


def test_a_failed_call_writes_nothing(device, gen):
    x = randn((4, 64), BF16, device, gen)
    r = randn((4, 64), torch.float32, device, gen)
    w = randn((64,), BF16, device, gen)
    out = torch.full_like(x, float("nan"))
    r_out = torch.full_like(r, float("nan"))
    x_before, r_before = x.clone(), r.clone()
    # Each message checked: a call refused for some other reason would write nothing either.
    with pytest.raises(ValueError, match="fused_add_rms_norm: eps: expected a finite value > 0 "
                                         "but got nan"):
        ops.fused_add_rms_norm_out(out, r_out, x, r, w, math.nan)
    with pytest.raises(ValueError, match=re.escape("fused_add_rms_norm: rstd: expected shape [4] "
                                                   "but got [2]")):  # the last argument checked
        ops.fused_add_rms_norm_out(out, r_out, x, r, w, 1e-6, rstd=torch.empty(2, device=device))
    with pytest.raises(ValueError, match=re.escape("fused_add_rms_norm_inplace: weight: expected "
                                                   "shape [64] but got [60]")):
        ops.fused_add_rms_norm_(x, r, w[:60], 1e-6)
    assert out.isnan().all() and r_out.isnan().all()
    assert torch.equal(x, x_before) and torch.equal(r, r_before)


FN, FNUZ = torch.float8_e4m3fn, torch.float8_e4m3fnuz


# (call, message): call(t, p) makes a refused operator call, its outputs from p(shape, dtype)
# (NaN-poisoned); the in-place forms update t's tensors.
@pytest.mark.parametrize("call,message", [
    (lambda t, p: ops.layer_norm_out(p((4, 64), BF16), t["x"], t["w"], t["b"], math.nan,
                                     p((4,), torch.float32), p((4,), torch.float32)),
     "layer_norm: eps: expected a finite value > 0 but got nan"),
    (lambda t, p: ops.fused_add_layer_norm_(t["x"], t["r"], t["w"], t["b"][:60], 1e-5),
     "fused_add_layer_norm_inplace: bias: expected shape [64] but got [60]"),
    (lambda t, p: ops.silu_and_mul_out(p((4, 31), BF16), t["x"]),
     "silu_and_mul: out: expected shape [4, 32] (x's shape with last dimension N) but got "
     "[4, 31]"),
    (lambda t, p: ops.gelu_and_mul_split_quant_fp8_out(p((4, 64), FN), p((4,), BF16), t["x"],
                                                       t["r"], "e4m3fn"),
     "gelu_and_mul_quant_fp8: scale: expected dtype float32 but got bfloat16"),
    (lambda t, p: ops.silu_and_mul_quant_fp8_out(p((4, 32), FNUZ), p((4,), torch.float32),
                                                 t["x"], "e4m3fnuz", -1.0),
     "silu_and_mul_quant_fp8: scale_upper_bound: expected 0 (no bound) or a value > 0 but got -1"),
    (lambda t, p: ops.fused_add_rms_norm_quant_fp8(t["x"], t["r"], t["w"], math.nan, "e4m3fn"),
     "fused_add_rms_norm_quant_fp8: eps: expected a finite value > 0 but got nan"),
    (lambda t, p: ops.fused_add_rms_norm_quant_fp8_static_out(
        p((4, 64), FN), t["x"], t["r"], t["w"],
        torch.tensor([0.5], dtype=torch.float64, device=t["x"].device), 1e-6, "e4m3fn"),
     "fused_add_rms_norm_quant_fp8_static: scale: expected dtype float32 but got float64"),
    (lambda t, p: ops.rms_norm_quant_fp8_out(p((4, 64), FNUZ), p((4,), torch.float32), t["x"],
                                             t["w"], 1e-6, "e4m3fn"),
     "rms_norm_quant_fp8: out: expected dtype float8_e4m3fn (format e4m3fn) but got "
     "float8_e4m3fnuz"),
    (lambda t, p: ops.rms_norm_quant_fp8_out(p((4, 64), FN), p((3,), torch.float32), t["x"],
                                             t["w"], 1e-6, "e4m3fn"),
     "rms_norm_quant_fp8: scale: expected shape [4, 1] (one per row: [4] or out's shape with "
     "last dimension 1) but got [3]"),
])
def test_failed_operator_calls_write_nothing(t, call, message):
    """Every op family: a refused call names what is wrong and leaves its outputs (NaN-poisoned)
    and the inputs it would update in place as they were."""
    device = t["x"].device
    before = {k: v.clone() for k, v in t.items()}
    written = []

    def output(shape, dtype):
        written.append(poisoned(shape, dtype, device))
        return written[-1]

    with pytest.raises(ValueError, match=re.escape(message)):
        call(t, output)
    for out in written:
        assert torch.equal(out.view(torch.uint8), poisoned(out.shape, out.dtype, device)
                           .view(torch.uint8)), "an output of a refused call was written"
    for name, value in t.items():
        assert torch.equal(value, before[name]), f"{name} was written by a refused call"


def test_mixed_devices_are_refused(gen):
    if not torch.cuda.is_available() or "cuda" not in fusekit.build_info()["backends"]:
        pytest.skip("needs a GPU with fusekit kernels")
    x = randn((4, 64), BF16, "cuda", gen)
    w = randn((64,), BF16, "cpu", gen)
    with pytest.raises(ValueError, match="rms_norm: weight: expected device gpu:0 .x's device. "
                                         "but got cpu"):
        ops.rms_norm(x, w, 1e-6)


def test_numpy_scalars_are_taken_as_numbers(device, gen):
    np = pytest.importorskip("numpy")
    x = randn((4, 64), torch.float32, device, gen)
    w = randn((64,), torch.float32, device, gen, mean=1.0)
    for eps in (np.float32(1e-5), np.float64(1e-5), np.int64(1)):
        assert torch.equal(fusekit.rms_norm(x, w, eps, np.float32(0.5)),
                           fusekit.rms_norm(x, w, float(eps), 0.5))
        assert torch.equal(fusekit.layer_norm(x, w, None, eps),
                           fusekit.layer_norm(x, w, None, float(eps)))
    q, s = fusekit.silu_and_mul_quant_fp8(x, format="e4m3fn", scale_upper_bound=np.float32(0.1))
    q_ref, s_ref = fusekit.silu_and_mul_quant_fp8(x, format="e4m3fn",
                                                  scale_upper_bound=float(np.float32(0.1)))
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(s, s_ref)
    with pytest.raises(ValueError, match="eps: expected a finite value > 0 but got"):
        fusekit.rms_norm(x, w, np.bool_(True))


def test_empty_strided_views_are_no_ops(device, gen):
    """M = 0 is a no-op whatever the view's strides: an empty slice of a strided view keeps them
    (x[:0, ::2]), and PyTorch's own ops take such views."""
    base = randn((3, 256), torch.float32, device, gen)
    x = base[:0, ::2]  # [0, 128], last stride 2
    w = torch.ones(128, device=device)
    assert fusekit.rms_norm(x, w).shape == (0, 128)
    assert fusekit.layer_norm(x, w, w).shape == (0, 128)
    y, h = fusekit.fused_add_rms_norm(x, base[:0, 1::2], w)
    assert y.shape == h.shape == (0, 128)
    assert fusekit.silu_and_mul(x).shape == (0, 64)
    assert fusekit.gelu_and_mul(x, base[:0, 1::2]).shape == (0, 128)
    q, s = fusekit.rms_norm_quant_fp8(x, w, format="e4m3fn")
    assert q.shape == (0, 128) and s.shape == (0,)
    assert fusekit.silu_and_mul_quant_fp8(base.view(3, 2, 128)[:, :0, ::2],
                                          format="e4m3fn")[0].shape == (3, 0, 32)
    assert ops.rms_norm(x, w, 1e-6).shape == (0, 128)


def test_rms_norm_module_without_eps_takes_torchs_default(device, gen):
    """eps=None is torch.nn.RMSNorm's default (the machine epsilon of x's dtype at each call),
    so fusekit.RMSNorm(n, eps=m.eps) copies any torch module."""
    ours = fusekit.RMSNorm(64, eps=None).to(device)
    theirs = torch.nn.RMSNorm(64, eps=None).to(device)
    x = randn((4, 64), torch.float32, device, gen, scale=1e-4)  # eps matters at this scale
    torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-6)
    assert ours.eps is None
    assert not torch.allclose(ours(x), fusekit.rms_norm(x, ours.weight, 1e-6))
