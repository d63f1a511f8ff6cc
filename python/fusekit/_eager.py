"""PyTorch eager implementations of fusekit's ops: the fallback when the compiled kernels can't run.

They follow the definitions in include/fusekit/norm.h (statistics and products in float32, or in
x's dtype when that is wider; the fused add rounded to the residual dtype before it is
normalized; one rounding of the result, or two with weight_after_cast), so a fallback call gives
what the kernels give up to float32 summation order. They are ordinary differentiable PyTorch code.

The gated activations follow include/fusekit/activation.h: act(gate) * up in float32 (or wider),
rounded once. Their fp8 forms quantize exactly as the C++ reference does from the same float32
products: y beyond float32's range taken as +-FLT_MAX, scale = max|y| / fp8_max capped by
scale_upper_bound and floored at 1 / (fp8_max * 512) (NaN rows get the canonical NaN scale), then
y * (1 / scale) in float32, clamped to +-fp8_max (the C++ conversion saturates; torch's cast to
float8 rounds to nearest even but does not) and cast; NaN codes are the format's NaN. The
activation itself is torch's (F.silu, F.gelu), within an ulp or two of fusekit's, so codes agree
bit for bit wherever the float32 products do.

RMSNorm with an fp8 output quantizes the float32 y of rms_norm (before its rounding to x's
dtype) the same way: per row with a dynamic scale, or with a static scale tensor (y beyond
float32's range taken as +-FLT_MAX, y * (1 / scale) in float32, clamped and cast). The float32 y
agrees with the kernels' up to summation order, so codes agree within one step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e4m3fnuz: 240.0}
FP8_NAN_CODE = {torch.float8_e4m3fn: 0x7F, torch.float8_e4m3fnuz: 0x80}


def _compute_dtype(x: Tensor) -> torch.dtype:
    return torch.promote_types(x.dtype, torch.float32)


def add(x: Tensor, residual: Tensor) -> Tensor:
    """x + residual, summed in float32 (or wider) and rounded to residual's dtype."""
    acc = torch.promote_types(_compute_dtype(x), residual.dtype)
    return (x.to(acc) + residual.to(acc)).to(residual.dtype)


def _rms_normalized(x: Tensor, eps: float) -> Tensor:
    """x * rstd in the compute dtype (float32, or x's when wider)."""
    h = x.to(_compute_dtype(x))
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)


def rms_norm(x: Tensor, weight: Tensor, eps: float, weight_offset: float = 0.0,
             weight_after_cast: bool = False, out_dtype: torch.dtype | None = None) -> Tensor:
    out_dtype = out_dtype or x.dtype
    normed = _rms_normalized(x, eps)
    if weight_after_cast:
        normed = normed.to(out_dtype).to(normed.dtype)
    return (normed * (weight.to(normed.dtype) + weight_offset)).to(out_dtype)


def _rms_norm_y(x: Tensor, weight: Tensor, eps: float, weight_offset: float) -> Tensor:
    """The float32 y that rms_norm rounds to x's dtype (the weight applied before rounding)."""
    normed = _rms_normalized(x, eps)
    return (normed * (weight.to(normed.dtype) + weight_offset)).to(torch.float32)


def layer_norm(x: Tensor, weight: Tensor | None, bias: Tensor | None, eps: float,
               out_dtype: torch.dtype | None = None) -> Tensor:
    out_dtype = out_dtype or x.dtype
    acc = _compute_dtype(x)
    h = x.to(acc)
    centered = h - h.mean(-1, keepdim=True)
    y = centered * torch.rsqrt(centered.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.to(acc)
    if bias is not None:
        y = y + bias.to(acc)
    return y.to(out_dtype)


def activation(act: str, g: Tensor) -> Tensor:
    """silu, gelu_tanh or gelu of g (in g's dtype)."""
    if act == "silu":
        return F.silu(g)
    if act == "gelu_tanh":
        return F.gelu(g, approximate="tanh")
    return F.gelu(g)


def _product(act: str, gate: Tensor, up: Tensor) -> Tensor:
    acc = _compute_dtype(gate)
    return activation(act, gate.to(acc)) * up.to(acc)


def act_and_mul(act: str, gate: Tensor, up: Tensor) -> Tensor:
    """act(gate) * up, computed in float32 (or wider) and rounded once to gate's dtype."""
    return _product(act, gate, up).to(gate.dtype)


def _saturate(y: Tensor) -> Tensor:
    """float32 y with values beyond float32's range taken as +-FLT_MAX (NaN stays NaN)."""
    largest = torch.finfo(torch.float32).max
    return y.to(torch.float32).clamp(-largest, largest)


def _codes(y: Tensor, inverse: Tensor, fp8_dtype: torch.dtype) -> Tensor:
    """fp8 codes of y * inverse (float32), saturating at +-fp8_max, NaN as the format's NaN."""
    fp8_max = FP8_MAX[fp8_dtype]
    q = (y * inverse).clamp(-fp8_max, fp8_max)
    # NaN to the format's NaN code without asking whether there is one: a branch on the data
    # (bool(nan.any())) cannot be traced by torch.compile(fullgraph=True).
    bits = q.to(fp8_dtype).view(torch.uint8)
    bits = torch.where(q.isnan(), torch.full_like(bits, FP8_NAN_CODE[fp8_dtype]), bits)
    return bits.view(fp8_dtype)


def _quantize_rows(y: Tensor, fp8_dtype: torch.dtype, scale_upper_bound: float,
                   scale_keepdim: bool) -> tuple[Tensor, Tensor]:
    """Dynamic per-row quantization of float32 y: (codes of fp8_dtype, float32 scales)."""
    fp8_max = torch.tensor(FP8_MAX[fp8_dtype], dtype=torch.float32, device=y.device)
    y = _saturate(y)
    scale = y.abs().amax(dim=-1, keepdim=True) / fp8_max  # NaN when the row holds one
    if scale_upper_bound > 0:
        scale = torch.minimum(scale, torch.tensor(scale_upper_bound, dtype=torch.float32,
                                                  device=y.device))
    scale = torch.maximum(scale, 1.0 / (fp8_max * 512.0))
    scale = torch.where(scale.isnan(), torch.full_like(scale, float("nan")), scale)
    codes = _codes(y, 1.0 / scale, fp8_dtype)
    return codes, scale if scale_keepdim else scale.reshape(-1)


def act_and_mul_quant_fp8(act: str, gate: Tensor, up: Tensor, fp8_dtype: torch.dtype,
                          scale_upper_bound: float = 0.0,
                          scale_keepdim: bool = False) -> tuple[Tensor, Tensor]:
    """Dynamic per-row fp8 quantization of act(gate) * up: (codes of fp8_dtype, float32 scales)."""
    return _quantize_rows(_product(act, gate, up), fp8_dtype, scale_upper_bound, scale_keepdim)


def rms_norm_quant_fp8(x: Tensor, weight: Tensor, eps: float, fp8_dtype: torch.dtype,
                       weight_offset: float = 0.0, scale_upper_bound: float = 0.0,
                       scale_keepdim: bool = False) -> tuple[Tensor, Tensor]:
    """rms_norm with dynamic per-row fp8 quantization: (codes of fp8_dtype, float32 scales)."""
    return _quantize_rows(_rms_norm_y(x, weight, eps, weight_offset), fp8_dtype,
                          scale_upper_bound, scale_keepdim)


def rms_norm_quant_fp8_static(x: Tensor, weight: Tensor, scale: Tensor, eps: float,
                              fp8_dtype: torch.dtype, weight_offset: float = 0.0) -> Tensor:
    """rms_norm quantized with a static scale (a one-element float32 tensor): codes."""
    y = _saturate(_rms_norm_y(x, weight, eps, weight_offset))
    inverse = 1.0 / scale.to(device=y.device, dtype=torch.float32).reshape(())
    return _codes(y, inverse, fp8_dtype)
