"""nn.Modules over fusekit's ops, with the parameter and attribute names that PyTorch and Hugging
Face use, so that their state dicts load as they are.

RMSNorm: `weight` [N] (torch.nn.RMSNorm, Hugging Face's LlamaRMSNorm / MistralRMSNorm / ...;
Gemma's RMSNorm with weight_offset=1, whose weight is stored as w in (1 + w)); the epsilon is
`variance_epsilon` (Hugging Face) and `eps` (PyTorch), one value under two names.
LayerNorm: `weight` and `bias` [N] as torch.nn.LayerNorm, with its `normalized_shape`, `eps`,
`elementwise_affine` and `bias` arguments.

Both take an optional residual in forward: `norm(x)` returns the normalized x; `norm(x, residual)`
returns (normalized x + residual, x + residual), the fused add of a pre-norm transformer block.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor, nn

from . import functional as F


class RMSNorm(nn.Module):
    """RMSNorm over the last dimension: y = x / sqrt(mean(x**2) + eps) * (weight + weight_offset).

    Args:
        hidden_size: N, the size of the last dimension (an int, or a 1-element sequence as
            torch.nn.RMSNorm's normalized_shape).
        eps: added to the mean square (default 1e-6); None takes torch.nn.RMSNorm's default, the
            machine epsilon of x's dtype (torch.finfo(x.dtype).eps), at each call.
        weight_offset: 0 for Llama-style models; 1 for Gemma's (1 + weight), whose weight then
            starts at zero.
        weight_after_cast: round the normalized value to x's dtype before multiplying by the
            weight (Hugging Face Llama's order) instead of one rounding at the end.
    """

    def __init__(self, hidden_size: int | Sequence[int], eps: float | None = 1e-6, *,
                 weight_offset: float = 0.0, weight_after_cast: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__()
        if not isinstance(hidden_size, int):
            hidden_size = tuple(hidden_size)
            if len(hidden_size) != 1:
                raise ValueError(f"RMSNorm: hidden_size: expected one size (the last dimension) "
                                 f"but got {list(hidden_size)}")
            hidden_size = hidden_size[0]
        self.hidden_size = hidden_size
        self.variance_epsilon = eps
        self.weight_offset = weight_offset
        self.weight_after_cast = weight_after_cast
        init = torch.zeros if weight_offset else torch.ones
        self.weight = nn.Parameter(init(hidden_size, device=device, dtype=dtype))

    @property
    def eps(self) -> float | None:
        return self.variance_epsilon

    @eps.setter
    def eps(self, value: float | None) -> None:
        self.variance_epsilon = value

    def _eps_for(self, x) -> float | None:
        eps = self.variance_epsilon
        if eps is None and isinstance(x, Tensor) and x.dtype.is_floating_point:
            return torch.finfo(x.dtype).eps
        return eps  # for anything else than a float tensor, the function names what is wrong

    def forward(self, x: Tensor, residual: Tensor | None = None):
        eps = self._eps_for(x)
        if residual is None:
            return F.rms_norm(x, self.weight, eps, self.weight_offset,
                              weight_after_cast=self.weight_after_cast)
        return F.fused_add_rms_norm(x, residual, self.weight, eps, self.weight_offset,
                                    weight_after_cast=self.weight_after_cast)

    def extra_repr(self) -> str:
        extra = f"{self.hidden_size}, eps={self.variance_epsilon}"
        if self.weight_offset:
            extra += f", weight_offset={self.weight_offset}"
        if self.weight_after_cast:
            extra += ", weight_after_cast=True"
        return extra


class LayerNorm(nn.Module):
    """LayerNorm as torch.nn.LayerNorm: y = (x - mean) / sqrt(var + eps) * weight + bias over the
    trailing normalized_shape dimensions (flattened into one row of N elements for the kernels).
    """

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        factory = {"device": device, "dtype": dtype}
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape, **factory))
        else:
            self.register_parameter("weight", None)
        if elementwise_affine and bias:
            self.bias = nn.Parameter(torch.zeros(self.normalized_shape, **factory))
        else:
            self.register_parameter("bias", None)

    def _rows(self, t: Tensor) -> Tensor:
        k = len(self.normalized_shape)
        if tuple(t.shape[-k:]) != self.normalized_shape:
            raise ValueError(f"LayerNorm: x: expected trailing shape {list(self.normalized_shape)} "
                             f"but got {list(t.shape)}")
        return t.reshape(*t.shape[:-k], math.prod(self.normalized_shape))

    def _flat(self, p: Tensor | None) -> Tensor | None:
        return p if p is None or p.dim() == 1 else p.reshape(-1)

    def forward(self, x: Tensor, residual: Tensor | None = None):
        w, b = self._flat(self.weight), self._flat(self.bias)
        if len(self.normalized_shape) == 1:
            if residual is None:
                return F.layer_norm(x, w, b, self.eps)
            return F.fused_add_layer_norm(x, residual, w, b, self.eps)
        if residual is None:
            return F.layer_norm(self._rows(x), w, b, self.eps).view(x.shape)
        y, h = F.fused_add_layer_norm(self._rows(x), self._rows(residual), w, b, self.eps)
        return y.view(x.shape), h.view(x.shape)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")
