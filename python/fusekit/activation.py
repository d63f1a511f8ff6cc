"""fusekit's gated activations as functions on torch tensors: out = act(gate) * up, the MLP
activation of Llama (silu), Gemma (gelu_tanh) and others, alone or fused with dynamic per-token
fp8 quantization.

Each function takes either the fused input x [..., 2N] (gate in x[..., :N], up in x[..., N:], the
output of a fused gate-up projection) or, with `up` given, gate and up [..., N] as separate
tensors or views (strided rows allowed, e.g. the two halves of a projection output). It checks
its arguments (TypeError for a non-tensor, ValueError naming the argument, the expected and the
actual value), then calls the compiled operator (torch.ops.fusekit.*) when the tensors' device
and dtype have kernels, or else fusekit's eager implementation, warning once why (see
fusekit.build_info()). Gradients flow through the plain forms (not the fp8 ones) by the C++
backward kernels. Numerics: act(gate) * up in float32, rounded once to the inputs' dtype.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from . import _eager, _loader
from .functional import (_NO_OUT_GRAD, _check_out, _direct_entry, _is_real, _is_rows, _mutated,
                         _needs_grad, _not_recorded, _require_floating, _require_tensor, _rows)

__all__ = [
    "silu_and_mul",
    "gelu_tanh_and_mul",
    "gelu_and_mul",
    "silu_and_mul_quant_fp8",
    "gelu_tanh_and_mul_quant_fp8",
    "gelu_and_mul_quant_fp8",
]

ACTIVATIONS = ("silu", "gelu_tanh", "gelu")
FP8_FORMATS = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}


def fp8_dtype(op: str, format) -> torch.dtype:
    """The torch dtype of an fp8 format name ("e4m3fn" or "e4m3fnuz"), else ValueError."""
    dtype = FP8_FORMATS.get(format) if isinstance(format, str) else None
    if dtype is None:
        raise ValueError(f'invalid argument: {op}: format: expected "e4m3fn" or "e4m3fnuz" but '
                         f'got {format!r}')
    return dtype


# ---- argument checks ---------------------------------------------------------------------------

def _check_inputs(op: str, x, up) -> tuple:
    """Checks x (or gate and up); returns out's shape."""
    _require_tensor(op, "x" if up is None else "gate", x)
    if x.dim() < 1:
        raise ValueError(f"{op}: x: expected rank 1 or more but got rank 0")
    _require_floating(op, "x" if up is None else "gate", x.dtype)
    if up is None:
        if x.shape[-1] % 2 != 0:
            raise ValueError(f"{op}: x: expected an even last dimension (gate and up halves of "
                             f"2N) but got {x.shape[-1]}")
        return tuple(x.shape[:-1]) + (x.shape[-1] // 2,)
    _require_tensor(op, "up", up)
    if up.shape != x.shape:
        raise ValueError(f"{op}: up: expected shape {list(x.shape)} (gate's shape) but got "
                         f"{list(up.shape)}")
    if up.dtype != x.dtype:
        raise ValueError(f"{op}: up: expected dtype {x.dtype} (gate's dtype) but got {up.dtype}")
    if up.device != x.device:
        raise ValueError(f"{op}: up: expected device {x.device} (gate's device) but got "
                         f"{up.device}")
    return tuple(x.shape)


def _gate_up(x: Tensor, up: Tensor | None) -> tuple[Tensor, Tensor]:
    if up is not None:
        return x, up
    n = x.shape[-1] // 2
    return x[..., :n], x[..., n:]


def _check_bound(op: str, bound) -> None:
    if not (_is_real(bound) and bound >= 0):  # NaN fails the comparison
        raise ValueError(f"{op}: scale_upper_bound: expected 0 (no bound) or a value > 0 but got "
                         f"{bound!r}")


def _check_scale(op: str, scale, out_shape, device) -> None:
    if scale is None:
        return
    _require_tensor(op, "scale", scale)
    rows = math.prod(out_shape[:-1])
    keepdim = tuple(out_shape[:-1]) + (1,)
    if tuple(scale.shape) not in ((rows,), keepdim):
        raise ValueError(f"{op}: scale: expected shape [{rows}] or {list(keepdim)} but got "
                         f"{list(scale.shape)}")
    if scale.dtype != torch.float32:
        raise ValueError(f"{op}: scale: expected dtype torch.float32 but got {scale.dtype}")
    if scale.device != device:
        raise ValueError(f"{op}: scale: expected device {device} but got {scale.device}")


# ---- the direct path (see fusekit.functional) --------------------------------------------------

_OPS = torch.ops.fusekit
_direct_entries = {
    (act, split): _direct_entry(f"{act}_and_mul{'_split' if split else ''}_out")
    for act in ACTIVATIONS for split in (False, True)
}
# (op, is_cuda, is_cpu, dtype, split) -> whether compiled kernels serve it (fusekit.functional says
# why the device enters as two flags).
_direct_kernels: dict = {}


def _direct(op: str, x, up) -> bool:
    if torch.compiler.is_compiling():  # first: see fusekit.functional._direct
        return False
    try:
        if torch.is_grad_enabled() and (x.requires_grad or (up is not None and up.requires_grad)):
            return False
        if not (x.is_contiguous() and (up is None or up.is_contiguous())):
            return False
        if up is not None and (up.dtype != x.dtype or up.shape != x.shape):
            return False  # the checked path names the mismatch
        key = (op, x.is_cuda, x.is_cpu, x.dtype, up is None)
    except AttributeError:  # not a tensor: the checked path says so
        return False
    ok = _direct_kernels.get(key)
    if ok is None:
        ok = _direct_kernels[key] = _loader.fallback_reason(op, x, ()) is None
    return ok


# ---- the shared implementations ----------------------------------------------------------------

def _act_and_mul(act: str, x: Tensor, up: Tensor | None, out: Tensor | None) -> Tensor:
    op = f"{act}_and_mul"
    if out is None and _direct(op, x, up) and x.dim() > 0:
        if up is None:
            y = x.new_empty(x.shape[:-1] + (x.shape[-1] // 2,))
            _direct_entries[act, False](y, x)
        else:
            y = torch.empty_like(x)
            _direct_entries[act, True](y, x, up)
        return y
    shape = _check_inputs(op, x, up)
    _check_out(op, "out", out, shape, x.dtype, x.device)
    grad = _needs_grad(x, up)
    if out is not None and grad:
        raise RuntimeError(_NO_OUT_GRAD.format(op))
    if _loader.use_kernels(op, x, ()):
        xr = _rows(x)
        if up is None:
            if out is not None and _is_rows(out):
                getattr(_OPS, f"{op}_out")(out, xr)
                _mutated(out)
                return out
            y = getattr(_OPS, op)(xr)
        else:
            ur = _rows(up)
            if out is not None and _is_rows(out):
                getattr(_OPS, f"{op}_split_out")(out, xr, ur)
                _mutated(out)
                return out
            y = getattr(_OPS, f"{op}_split")(xr, ur)
    else:
        y = _eager.act_and_mul(act, *_gate_up(x, up))
    return y if out is None else out.copy_(y)


def _act_and_mul_quant_fp8(act: str, x: Tensor, up: Tensor | None, format: str,
                           scale_upper_bound: float, scale_keepdim: bool, out: Tensor | None,
                           scale: Tensor | None) -> tuple[Tensor, Tensor]:
    op = f"{act}_and_mul_quant_fp8"
    dtype = fp8_dtype(op, format)
    shape = _check_inputs(op, x, up)
    _check_bound(op, scale_upper_bound)
    _check_out(op, "out", out, shape, dtype, x.device)
    _check_scale(op, scale, shape, x.device)
    bound = float(scale_upper_bound)
    split = "" if up is None else "_split"
    if _loader.use_kernels(op, x, ()):
        xr = _rows(x)
        inputs = (xr,) if up is None else (xr, _rows(up))
        if out is not None and scale is not None and _is_rows(out):
            getattr(_OPS, f"{act}_and_mul{split}_quant_fp8_out")(out, scale, *inputs, format,
                                                                 bound)
            _mutated(out, scale)
            return out, scale
        with _not_recorded(x, up):
            q, s = getattr(_OPS, f"{act}_and_mul{split}_quant_fp8")(*inputs, format, bound,
                                                                    scale_keepdim)
    else:
        with torch.no_grad():
            q, s = _eager.act_and_mul_quant_fp8(act, *_gate_up(x, up), dtype, bound,
                                                scale_keepdim)
    if scale is not None:
        s = scale.copy_(s.reshape(scale.shape))
    return (q if out is None else out.copy_(q)), s


# ---- the named functions -----------------------------------------------------------------------

def silu_and_mul(x: Tensor, up: Tensor | None = None, *, out: Tensor | None = None) -> Tensor:
    """SiLU-gated product (Llama, Mistral, Qwen MLPs).

    out = silu(gate) * up,   silu(g) = g * sigmoid(g)

    x: [..., 2N] with gate = x[..., :N], up = x[..., N:]; or, with `up` given, x is gate and both
    are [..., N]. float32, float16 or bfloat16 (gate and up alike). Returns out [..., N] in that
    dtype, or `out` filled with it.
    """
    return _act_and_mul("silu", x, up, out)


def gelu_tanh_and_mul(x: Tensor, up: Tensor | None = None, *,
                      out: Tensor | None = None) -> Tensor:
    """GELU(tanh approximation)-gated product (Gemma's GeGLU).

    out = gelu_tanh(gate) * up,
    gelu_tanh(g) = 0.5 * g * (1 + tanh(sqrt(2 / pi) * (g + 0.044715 * g**3)))

    Arguments and result as in silu_and_mul.
    """
    return _act_and_mul("gelu_tanh", x, up, out)


def gelu_and_mul(x: Tensor, up: Tensor | None = None, *, out: Tensor | None = None) -> Tensor:
    """Exact-GELU-gated product (GeGLU).

    out = gelu(gate) * up,   gelu(g) = 0.5 * g * (1 + erf(g / sqrt(2)))

    Arguments and result as in silu_and_mul.
    """
    return _act_and_mul("gelu", x, up, out)


_QUANT_DOC = """{title}

    y = {formula}   (float32)
    scale = max(min(max|y| / fp8_max, scale_upper_bound), 1 / (fp8_max * 512))   per row
    out = fp8(y / scale)   (round to nearest even, saturating at +-fp8_max)

    format: "e4m3fn" (fp8_max 448, torch.float8_e4m3fn; NVIDIA) or "e4m3fnuz" (fp8_max 240,
    torch.float8_e4m3fnuz; AMD MI300): always explicit, the encodings are not interchangeable.
    scale_upper_bound: 0 for none. x / up as in {plain}. Returns (out [..., N] of the format's
    dtype, scale float32 [M], or [..., 1] with scale_keepdim), or the given `out` and `scale`
    filled with them. Dequantize with out.float() * scale. Not differentiable.
    """


def silu_and_mul_quant_fp8(x: Tensor, up: Tensor | None = None, *, format: str,
                           scale_upper_bound: float = 0.0, scale_keepdim: bool = False,
                           out: Tensor | None = None,
                           scale: Tensor | None = None) -> tuple[Tensor, Tensor]:
    return _act_and_mul_quant_fp8("silu", x, up, format, scale_upper_bound, scale_keepdim, out,
                                  scale)


def gelu_tanh_and_mul_quant_fp8(x: Tensor, up: Tensor | None = None, *, format: str,
                                scale_upper_bound: float = 0.0, scale_keepdim: bool = False,
                                out: Tensor | None = None,
                                scale: Tensor | None = None) -> tuple[Tensor, Tensor]:
    return _act_and_mul_quant_fp8("gelu_tanh", x, up, format, scale_upper_bound, scale_keepdim,
                                  out, scale)


def gelu_and_mul_quant_fp8(x: Tensor, up: Tensor | None = None, *, format: str,
                           scale_upper_bound: float = 0.0, scale_keepdim: bool = False,
                           out: Tensor | None = None,
                           scale: Tensor | None = None) -> tuple[Tensor, Tensor]:
    return _act_and_mul_quant_fp8("gelu", x, up, format, scale_upper_bound, scale_keepdim, out,
                                  scale)


silu_and_mul_quant_fp8.__doc__ = _QUANT_DOC.format(
    title="silu_and_mul with dynamic per-token fp8 quantization of its output.",
    formula="silu(gate) * up", plain="silu_and_mul")
gelu_tanh_and_mul_quant_fp8.__doc__ = _QUANT_DOC.format(
    title="gelu_tanh_and_mul with dynamic per-token fp8 quantization of its output.",
    formula="gelu_tanh(gate) * up", plain="gelu_tanh_and_mul")
gelu_and_mul_quant_fp8.__doc__ = _QUANT_DOC.format(
    title="gelu_and_mul with dynamic per-token fp8 quantization of its output.",
    formula="gelu(gate) * up", plain="gelu_and_mul")
