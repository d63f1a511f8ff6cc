"""fusekit: fused normalization and gated-activation kernels for transformer models, as PyTorch
operators.

    import fusekit
    y = fusekit.rms_norm(x, weight, eps=1e-6)                      # [..., N] -> [..., N]
    y, residual = fusekit.fused_add_rms_norm(x, residual, weight)   # residual add + RMSNorm
    fusekit.fused_add_rms_norm_(x, residual, weight)                # in place (vLLM convention)
    norm = fusekit.RMSNorm(4096); norm.load_state_dict(hf_norm.state_dict())
    h = fusekit.silu_and_mul(gate_up)                               # [..., 2N] -> [..., N]
    q, scale = fusekit.silu_and_mul_quant_fp8(gate_up, format="e4m3fn")  # fp8 per token
    q, scale = fusekit.fused_add_rms_norm_quant_fp8(x, residual, weight, format="e4m3fn")

The compiled operators are also reachable as torch.ops.fusekit.* (schemas in torch/norm_ops.cc
and torch/act_ops.cc).
Importing never fails: without a usable compiled library, or for devices and dtypes it has no
kernels for, the functions run PyTorch eager code and warn once why; fusekit.build_info() says
what is in use.
"""

from __future__ import annotations

import torch

from . import _loader
from ._version import __version__
from .activation import (
    gelu_and_mul,
    gelu_and_mul_quant_fp8,
    gelu_tanh_and_mul,
    gelu_tanh_and_mul_quant_fp8,
    silu_and_mul,
    silu_and_mul_quant_fp8,
)
from .functional import (
    fused_add_layer_norm,
    fused_add_layer_norm_,
    fused_add_rms_norm,
    fused_add_rms_norm_,
    layer_norm,
    rms_norm,
)
from .modules import LayerNorm, RMSNorm
from .quant import (
    fused_add_rms_norm_quant_fp8,
    fused_add_rms_norm_quant_fp8_static,
    rms_norm_quant_fp8,
    rms_norm_quant_fp8_static,
)

if _loader.STATE.loaded:
    from . import _registration

    try:
        _registration.register()
    except Exception as error:  # an incompatible torch.library; the eager code still works
        _loader.STATE.loaded = False
        _loader.STATE.reason = (
            f"registering the operators' fake and autograd kernels failed: {error}")

from . import activation as _activation
from . import functional as _functional
from . import quant as _quant

__all__ = ["__version__", "build_info", *_functional.__all__, *_quant.__all__,
           *_activation.__all__, "RMSNorm", "LayerNorm"]


def build_info() -> dict:
    """What this fusekit is and what it runs on.

    Keys: version; torch (the running PyTorch, its CUDA and HIP versions); library (whether the
    compiled operators are loaded, from where, and if not, why); build (the library's own record:
    the PyTorch it was built against, GPU backend, compiler version, GPU architectures, or None);
    backends (the devices whose tensors use compiled kernels now); gpu_reason (why GPU tensors do
    not, if so); disabled and disabled_ops (from FUSEKIT_DISABLE / FUSEKIT_DISABLE_OPS).
    """
    state = _loader.STATE
    backends = []
    if state.loaded and not state.disabled:
        backends.append("cpu")
        if state.gpu_reason is None and (state.build or {}).get("torch_gpu_kernels"):
            backends.append("cuda" if (state.build or {}).get("gpu_backend") == "cuda" else "hip")
    build = dict(state.build) if state.build else None
    return {
        "version": __version__,
        "torch": {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "hip": getattr(torch.version, "hip", None),
        },
        "library": {"loaded": state.loaded, "path": state.path, "reason": state.reason},
        "build": build,
        "backends": backends,
        "gpu_archs": list((build or {}).get("gpu_archs", [])),
        "gpu_reason": state.gpu_reason,
        "disabled": state.disabled,
        "disabled_ops": sorted(state.disabled_ops),
    }
