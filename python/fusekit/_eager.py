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


def rms_norm(x: Tensor, weight: Tensor, eps: float, weight_offset: float = 0.0,
             weight_after_cast: bool = False, out_dtype: torch.dtype | None = None) -> Tensor:
    out_dtype = out_dtype or x.dtype
    acc = _compute_dtype(x)
    h = x.to(acc)
    normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    if weight_after_cast:
        normed = normed.to(out_dtype).to(acc)
    return (normed * (weight.to(acc) + weight_offset)).to(out_dtype)


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


def act_and_mul_quant_fp8(act: str, gate: Tensor, up: Tensor, fp8_dtype: torch.dtype,
                          scale_upper_bound: float = 0.0,
                          scale_keepdim: bool = False) -> tuple[Tensor, Tensor]:
    """Dynamic per-row fp8 quantization of act(gate) * up: (codes of fp8_dtype, float32 scales)."""
    fp8_max = torch.tensor(FP8_MAX[fp8_dtype], dtype=torch.float32, device=gate.device)
    largest = torch.finfo(torch.float32).max
    y = _product(act, gate, up).to(torch.float32).clamp(-largest, largest)
    scale = y.abs().amax(dim=-1, keepdim=True) / fp8_max  # NaN when the row holds one
    if scale_upper_bound > 0:
        scale = torch.minimum(scale, torch.tensor(scale_upper_bound, dtype=torch.float32,
                                                  device=y.device))
    scale = torch.maximum(scale, 1.0 / (fp8_max * 512.0))
    scale = torch.where(scale.isnan(), torch.full_like(scale, float("nan")), scale)
    q = (y * (1.0 / scale)).clamp(-fp8_max, fp8_max)
    codes = q.to(fp8_dtype)
    nan = q.isnan()
    if bool(nan.any()):
        bits = codes.view(torch.uint8)
        bits = torch.where(nan, torch.full_like(bits, FP8_NAN_CODE[fp8_dtype]), bits)
        codes = bits.view(fp8_dtype)
    return codes, scale if scale_keepdim else scale.reshape(-1)
