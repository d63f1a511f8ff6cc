"""PyTorch eager implementations of fusekit's ops: the fallback when the compiled kernels can't run.

They follow the definitions in include/fusekit/norm.h (statistics and products in float32, or in
x's dtype when that is wider; the fused add rounded to the residual dtype before it is
normalized; one rounding of the result, or two with weight_after_cast), so a fallback call gives
what the kernels give up to float32 summation order. They are ordinary differentiable PyTorch code.
"""

from __future__ import annotations

import torch
from torch import Tensor


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
