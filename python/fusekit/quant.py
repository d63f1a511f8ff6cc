"""RMSNorm with its output quantized to fp8 in the same pass (the input of an fp8 GEMM), with a
dynamic per-token scale or a static one, alone or fused with the residual add before it.

    q, scale = fusekit.rms_norm_quant_fp8(x, weight, format="e4m3fn")           # per token
    static = torch.tensor([0.05], device=x.device)  # a calibrated scale, float32 [1] or []
    q = fusekit.rms_norm_quant_fp8_static(x, weight, static, format="e4m3fn")   # static scale
    q, scale = fusekit.fused_add_rms_norm_quant_fp8(x, residual, weight, format="e4m3fn")
    # ... residual now holds x + residual (updated in place, the vLLM convention)

y is the float32 value rms_norm would round to x's dtype (the weight applied in float32); then,
as fusekit's fp8 activations do,
    dynamic: scale = max(min(max|y| / fp8_max, scale_upper_bound), 1 / (fp8_max * 512)) per row
    static:  scale = the given one-element float32 tensor, read by the kernel when it runs (so a
             CUDA graph replays with its current value)
    out = fp8(y * (1 / scale))   (round to nearest even, saturating at +-fp8_max)
format: "e4m3fn" (fp8_max 448, torch.float8_e4m3fn; NVIDIA) or "e4m3fnuz" (fp8_max 240,
torch.float8_e4m3fnuz; AMD MI300), always explicit. Dequantize with out.float() * scale.

Each function checks its arguments (TypeError for a non-tensor, ValueError naming the argument,
the expected and the actual value), then calls the compiled operator when the tensors' device
and dtypes have kernels, or else the eager implementation, warning once why. Not
differentiable (inference ops).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _eager, _loader
from .activation import _check_bound, _check_scale, fp8_dtype
from .functional import (_check_args, _check_out, _is_rows, _mutated, _needs_grad, _not_recorded,
                         _param, _require_tensor, _rows)

__all__ = [
    "rms_norm_quant_fp8",
    "rms_norm_quant_fp8_static",
    "fused_add_rms_norm_quant_fp8",
    "fused_add_rms_norm_quant_fp8_static",
]

_OPS = torch.ops.fusekit


def _check_static_scale(op: str, scale, device) -> None:
    _require_tensor(op, "scale", scale)
    if tuple(scale.shape) not in ((), (1,)):
        raise ValueError(f"{op}: scale: expected shape [] or [1] (one element) but got "
                         f"{list(scale.shape)}")
    if scale.dtype != torch.float32:
        raise ValueError(f"{op}: scale: expected dtype torch.float32 but got {scale.dtype}")
    if scale.device != device:
        raise ValueError(f"{op}: scale: expected device {device} but got {scale.device}")


def _check_residual_updatable(op: str, residual: Tensor) -> None:
    """The fused-add forms update residual in place and are not differentiable: a residual that
    requires grad would lose its history (a leaf's in-place update is refused by PyTorch too)."""
    if _needs_grad(residual):
        raise RuntimeError(f"{op}: residual: updated in place by this op, which is not "
                           f"differentiable, so it must not require grad (or call it under "
                           f"torch.no_grad())")


def _writable_rows(residual: Tensor) -> Tensor:
    """residual itself when the kernels can update it in place, else a contiguous copy (the
    caller hands it to _residual_updated)."""
    return residual if _is_rows(residual) else residual.contiguous()


def _residual_updated(rows: Tensor, residual: Tensor) -> None:
    """After a kernel updated `rows` (_writable_rows(residual)): the copy's values back into
    residual, or residual's version counter bumped where the kernel wrote it in place."""
    if rows is not residual:
        residual.copy_(rows)
    else:
        _mutated(residual)


def rms_norm_quant_fp8(x: Tensor, weight: Tensor, eps: float = 1e-6, weight_offset: float = 0.0,
                       *, format: str, scale_upper_bound: float = 0.0,
                       scale_keepdim: bool = False, out: Tensor | None = None,
                       scale: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """rms_norm(x, weight, eps, weight_offset) quantized to fp8 with a dynamic per-row scale.

    x: [..., N] float32, float16 or bfloat16; weight: [N], x's dtype or float32. Returns (out of
    x's shape in the format's dtype, scale float32 [M], or [..., 1] with scale_keepdim), or the
    given `out` and `scale` filled with them. scale_upper_bound: 0 for none.
    """
    op = "rms_norm_quant_fp8"
    dtype = fp8_dtype(op, format)
    _check_args(op, x, {"weight": (weight, False)}, eps=eps, weight_offset=weight_offset)
    _check_bound(op, scale_upper_bound)
    _check_out(op, "out", out, x.shape, dtype, x.device)
    _check_scale(op, scale, tuple(x.shape), x.device)
    bound = float(scale_upper_bound)
    if _loader.use_kernels(op, x, (weight,)):
        xr, w = _rows(x), _param(weight)
        if out is not None and scale is not None and _is_rows(out):
            _OPS.rms_norm_quant_fp8_out(out, scale, xr, w, eps, format, weight_offset, bound)
            _mutated(out, scale)
            return out, scale
        with _not_recorded(x, weight):
            q, s = _OPS.rms_norm_quant_fp8(xr, w, eps, format, weight_offset, bound,
                                           scale_keepdim)
    else:
        with torch.no_grad():
            q, s = _eager.rms_norm_quant_fp8(x, weight, eps, dtype, weight_offset, bound,
                                             scale_keepdim)
    if scale is not None:
        s = scale.copy_(s.reshape(scale.shape))
    return (q if out is None else out.copy_(q)), s


def rms_norm_quant_fp8_static(x: Tensor, weight: Tensor, scale: Tensor, eps: float = 1e-6,
                              weight_offset: float = 0.0, *, format: str,
                              out: Tensor | None = None) -> Tensor:
    """rms_norm(x, weight, eps, weight_offset) quantized to fp8 with a static scale.

    scale: float32 tensor of one element (shape [] or [1]) on x's device. Returns out (x's shape,
    the format's dtype), or the given `out` filled with it.
    """
    op = "rms_norm_quant_fp8_static"
    dtype = fp8_dtype(op, format)
    _check_args(op, x, {"weight": (weight, False)}, eps=eps, weight_offset=weight_offset)
    _check_static_scale(op, scale, x.device)
    _check_out(op, "out", out, x.shape, dtype, x.device)
    if _loader.use_kernels("rms_norm_quant_fp8", x, (weight,)):
        xr, w = _rows(x), _param(weight)
        if out is not None and _is_rows(out):
            _OPS.rms_norm_quant_fp8_static_out(out, xr, w, scale, eps, format, weight_offset)
            _mutated(out)
            return out
        with _not_recorded(x, weight, scale):
            q = _OPS.rms_norm_quant_fp8_static(xr, w, scale, eps, format, weight_offset)
    else:
        with torch.no_grad():
            q = _eager.rms_norm_quant_fp8_static(x, weight, scale, eps, dtype, weight_offset)
    return q if out is None else out.copy_(q)


def fused_add_rms_norm_quant_fp8(x: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6,
                                 weight_offset: float = 0.0, *, format: str,
                                 scale_upper_bound: float = 0.0, scale_keepdim: bool = False,
                                 out: Tensor | None = None,
                                 scale: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The residual add before a block's RMSNorm, fused with it and with dynamic per-row fp8
    quantization of its output.

    residual <- round_to(residual.dtype, x + residual)   (in place, summed in float32)
    (out, scale) = rms_norm_quant_fp8(residual, weight, eps, weight_offset, ...)

    residual: x's shape, x's dtype or float32. Returns (out, scale) as rms_norm_quant_fp8 does.
    """
    op = "fused_add_rms_norm_quant_fp8"
    dtype = fp8_dtype(op, format)
    _check_args(op, x, {"weight": (weight, False)}, residual, eps, weight_offset)
    _check_residual_updatable(op, residual)
    _check_bound(op, scale_upper_bound)
    _check_out(op, "out", out, x.shape, dtype, x.device)
    _check_scale(op, scale, tuple(x.shape), x.device)
    bound = float(scale_upper_bound)
    if _loader.use_kernels(op, x, (weight,), residual.dtype):
        xr, w, rr = _rows(x), _param(weight), _writable_rows(residual)
        if out is not None and scale is not None and _is_rows(out):
            _OPS.fused_add_rms_norm_quant_fp8_out(out, scale, xr, rr, w, eps, format,
                                                  weight_offset, bound)
            q, s = out, scale
            _mutated(out, scale)
        else:
            with _not_recorded(x, weight):
                q, s = _OPS.fused_add_rms_norm_quant_fp8(xr, rr, w, eps, format, weight_offset,
                                                         bound, scale_keepdim)
        _residual_updated(rr, residual)
    else:
        with torch.no_grad():
            h = _eager.add(x, residual)
            q, s = _eager.rms_norm_quant_fp8(h, weight, eps, dtype, weight_offset, bound,
                                             scale_keepdim)
            residual.copy_(h)
    if scale is not None and s is not scale:
        s = scale.copy_(s.reshape(scale.shape))
    return (q if out is None or q is out else out.copy_(q)), s


def fused_add_rms_norm_quant_fp8_static(x: Tensor, residual: Tensor, weight: Tensor,
                                        scale: Tensor, eps: float = 1e-6,
                                        weight_offset: float = 0.0, *, format: str,
                                        out: Tensor | None = None) -> Tensor:
    """fused_add_rms_norm_quant_fp8 with a static scale (a one-element float32 tensor).

    residual <- round_to(residual.dtype, x + residual)   (in place)
    out = rms_norm_quant_fp8_static(residual, weight, scale, eps, weight_offset, ...)
    """
    op = "fused_add_rms_norm_quant_fp8_static"
    dtype = fp8_dtype(op, format)
    _check_args(op, x, {"weight": (weight, False)}, residual, eps, weight_offset)
    _check_residual_updatable(op, residual)
    _check_static_scale(op, scale, x.device)
    _check_out(op, "out", out, x.shape, dtype, x.device)
    if _loader.use_kernels("fused_add_rms_norm_quant_fp8", x, (weight,), residual.dtype):
        xr, w, rr = _rows(x), _param(weight), _writable_rows(residual)
        if out is not None and _is_rows(out):
            _OPS.fused_add_rms_norm_quant_fp8_static_out(out, xr, rr, w, scale, eps, format,
                                                         weight_offset)
            q = out
            _mutated(out)
        else:
            with _not_recorded(x, weight, scale):
                q = _OPS.fused_add_rms_norm_quant_fp8_static(xr, rr, w, scale, eps, format,
                                                             weight_offset)
        _residual_updated(rr, residual)
    else:
        with torch.no_grad():
            h = _eager.add(x, residual)
            q = _eager.rms_norm_quant_fp8_static(h, weight, scale, eps, dtype, weight_offset)
            residual.copy_(h)
    return q if out is None or q is out else out.copy_(q)
