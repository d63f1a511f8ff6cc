"""float64 references for the Python tests, written from the definitions in include/fusekit/norm.h
(not from fusekit's own eager fallbacks, which they also check), and the tolerance table."""

from __future__ import annotations

import torch

# An output of dtype d may differ from the correctly rounded float64 value by one unit in the
# last place of d (the kernels round a float32 value once; it can sit on the other side of a
# rounding boundary): 2^-7 relative for bfloat16 (8 significant bits), 2^-10 for float16. float32
# outputs carry the float32 error of row sums (~1e-6 relative for N in the thousands). The
# absolute term covers values near zero (LayerNorm's centered rows).
TOLERANCE = {
    torch.bfloat16: (2.0 ** -7, 1e-4),
    torch.float16: (2.0 ** -10, 1e-4),
    torch.float32: (2e-5, 1e-6),
    torch.float64: (1e-12, 1e-12),
}


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype=None, scale=None) -> None:
    """|actual - expected| <= rel * |expected| + abs (+ 1e-5 * scale, the size of the terms a
    difference was formed from, for gradients), element by element, and no NaN on either side."""
    dtype = dtype or actual.dtype
    rel, abs_ = TOLERANCE[dtype]
    a, e = actual.detach().double().cpu(), expected.detach().double().cpu()
    assert a.shape == e.shape, f"shape {tuple(a.shape)} != {tuple(e.shape)}"
    assert not torch.isnan(a).any(), "NaN in the result"
    limit = rel * e.abs() + abs_
    if scale is not None:
        limit = limit + 1e-5 * scale.detach().double().cpu()
    # Written so that a NaN in the reference fails too (NaN > limit is False).
    bad = ~((a - e).abs() <= limit)
    if bad.any():
        i = tuple(bad.nonzero()[0].tolist())
        raise AssertionError(f"{int(bad.sum())} of {bad.numel()} elements out of tolerance; first "
                             f"at {i}: got {a[i].item()}, expected {e[i].item()} "
                             f"(limit {limit[i].item()})")


def fused_add(x: torch.Tensor, residual: torch.Tensor, residual_dtype=None) -> torch.Tensor:
    """The fused add's residual_out: summed in float32, rounded to the residual dtype."""
    dtype = residual_dtype or residual.dtype
    return (x.float() + residual.float()).to(dtype)


def rms_norm(h: torch.Tensor, weight: torch.Tensor, eps: float, weight_offset: float = 0.0,
             weight_after_cast_dtype=None) -> torch.Tensor:
    """float64 RMSNorm of h (the rows normalized); with weight_after_cast_dtype, the normalized
    value is rounded to that dtype before the weight, as NormOptions::weight_after_cast does."""
    h = h.double()
    normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    if weight_after_cast_dtype is not None:
        normed = normed.to(weight_after_cast_dtype).double()
    return normed * (weight.double() + weight_offset)


def layer_norm(h: torch.Tensor, weight, bias, eps: float) -> torch.Tensor:
    h = h.double()
    centered = h - h.mean(-1, keepdim=True)
    y = centered * torch.rsqrt(centered.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.double()
    if bias is not None:
        y = y + bias.double()
    return y
