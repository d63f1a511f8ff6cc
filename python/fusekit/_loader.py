"""Finding and loading the compiled operator library, and deciding per call whether to use it.

`import fusekit` must never fail. The library (libfusekit_torch.so, built from torch/) is looked
for at $FUSEKIT_LIBRARY when that is set (only there: a wrong path is a reason, not passed over
for another library), else beside this file; next to it, fusekit_build_info.json says what it
was built for. Before loading, that record is checked against the running PyTorch (a library built
for a newer torch, for a GPU build of torch when this one is CPU-only, or for another CUDA major
version is not loaded, or is not used for GPU tensors). Whatever goes wrong becomes a *reason*:
calls then run fusekit's PyTorch eager implementations, and the first call of each op that does
so warns once, naming the reason.

Environment, read once at import:
  FUSEKIT_DISABLE=1              never load the library: eager implementations everywhere
  FUSEKIT_DISABLE_OPS=a,b        eager implementations for these op families (rms_norm,
                                 fused_add_rms_norm, layer_norm, fused_add_layer_norm,
                                 silu_and_mul, gelu_tanh_and_mul, gelu_and_mul, and the fp8
                                 forms rms_norm_quant_fp8 and fused_add_rms_norm_quant_fp8
                                 (static scales too), silu_and_mul_quant_fp8, ...)
  FUSEKIT_LIBRARY=/path/lib.so   load this library instead of the packaged one
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field

import torch

LIBRARY_NAME = "libfusekit_torch.so"
BUILD_INFO_NAME = "fusekit_build_info.json"
OP_FAMILIES = ("rms_norm", "fused_add_rms_norm", "layer_norm", "fused_add_layer_norm",
               "rms_norm_quant_fp8", "fused_add_rms_norm_quant_fp8",
               "silu_and_mul", "gelu_tanh_and_mul", "gelu_and_mul", "silu_and_mul_quant_fp8",
               "gelu_tanh_and_mul_quant_fp8", "gelu_and_mul_quant_fp8")
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@dataclass
class LibraryState:
    loaded: bool = False
    path: str | None = None
    build: dict | None = None
    reason: str | None = None  # why the library is not in use at all
    gpu_reason: str | None = None  # why GPU tensors do not use it (when loaded)
    disabled: bool = False
    disabled_ops: frozenset = field(default_factory=frozenset)


def _version_tuple(text: str) -> tuple:
    parts = []
    for piece in text.split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _find_library() -> str | None:
    explicit = os.environ.get("FUSEKIT_LIBRARY")
    if explicit:
        return explicit
    packaged = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)
    return packaged if os.path.exists(packaged) else None


def _read_build_info(path: str) -> dict | None:
    info_path = os.path.join(os.path.dirname(path), BUILD_INFO_NAME)
    try:
        with open(info_path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _incompatibility(build: dict) -> tuple[str | None, str | None]:
    """(reason not to load at all, reason not to use it for GPU tensors)."""
    built_torch = build.get("torch_version", "")
    if built_torch and _version_tuple(torch.__version__) < _version_tuple(built_torch):
        return (
            f"the operator library was built against PyTorch {built_torch} and needs that or "
            f"a later release, but PyTorch {torch.__version__} is running",
            None,
        )
    runtime_cuda = torch.version.cuda or ""
    runtime_hip = getattr(torch.version, "hip", None) or ""
    if build.get("torch_gpu_kernels"):
        built_cuda, built_hip = build.get("torch_cuda", ""), build.get("torch_hip", "")
        if built_cuda and not runtime_cuda:
            return (
                f"the operator library was built for a CUDA {built_cuda} build of PyTorch, but "
                f"PyTorch {torch.__version__} has no CUDA support",
                None,
            )
        if built_hip and not runtime_hip:
            return (
                f"the operator library was built for a ROCm {built_hip} build of PyTorch, but "
                f"PyTorch {torch.__version__} has no ROCm support",
                None,
            )
        compiler = build.get("gpu_compiler_version", "")
        if built_cuda and compiler and compiler.split(".")[0] != runtime_cuda.split(".")[0]:
            # Its CUDA runtime (another soname) would be missing, or a second one beside torch's.
            return (
                f"the operator library was compiled with CUDA {compiler}, but PyTorch uses CUDA "
                f"{runtime_cuda} (another major version): rebuild it with a matching toolkit",
                None,
            )
        return None, None
    backend = build.get("gpu_backend", "none")
    if backend == "none":
        return None, ("the operator library was built without a GPU backend (FUSEKIT_GPU=OFF, "
                      "or no nvcc or hipcc where it was built)")
    return None, (
        f"the operator library has {backend} kernels but was built against a PyTorch without "
        f"matching GPU support, so none are registered for GPU tensors"
    )


def _load() -> LibraryState:
    disabled_ops = frozenset(
        name.strip() for name in os.environ.get("FUSEKIT_DISABLE_OPS", "").split(",")
        if name.strip()
    )
    unknown = sorted(disabled_ops - set(OP_FAMILIES))
    if unknown:
        warnings.warn(f"FUSEKIT_DISABLE_OPS: unknown op families {unknown} (known: "
                      f"{', '.join(OP_FAMILIES)}), ignored", RuntimeWarning, stacklevel=2)
    state = LibraryState(disabled_ops=disabled_ops & frozenset(OP_FAMILIES))
    if os.environ.get("FUSEKIT_DISABLE", "") not in ("", "0"):
        state.disabled = True
        state.reason = "FUSEKIT_DISABLE is set"
        return state
    path = _find_library()
    if path is None:
        state.reason = (
            f"the compiled operator library ({LIBRARY_NAME}) is not installed with the package "
            "(build it with `pip install .` or scripts/build_python_ext.sh, or point "
            "FUSEKIT_LIBRARY at it)"
        )
        return state
    state.path = path
    if not os.path.exists(path):
        state.reason = f"FUSEKIT_LIBRARY is {path}, which does not exist"
        return state
    state.build = _read_build_info(path)
    if state.build is None:
        state.reason = f"{BUILD_INFO_NAME} is missing beside {path}: rebuild the library"
        return state
    state.reason, state.gpu_reason = _incompatibility(state.build)
    if state.reason is not None:
        return state
    try:
        torch.ops.load_library(path)
    except Exception as error:  # an OSError from dlopen, or a registration error
        state.reason = f"loading {path} failed: {error}"
        return state
    if not hasattr(torch.ops.fusekit, "rms_norm"):
        state.reason = f"{path} loaded but registered no fusekit operators"
        return state
    state.loaded = True
    return state


STATE = _load()
_warned: set = set()


def _warn_once(family: str, reason: str) -> None:
    if torch.compiler.is_compiling():
        return
    key = (family, reason)
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(
        f"fusekit.{family}: using the PyTorch eager implementation: {reason}",
        RuntimeWarning,
        stacklevel=4,
    )


def fallback_reason(family: str, x: torch.Tensor, params: tuple,
                    residual_dtype: torch.dtype | None = None) -> str | None:
    """Why a call of `family` on these tensors cannot use the compiled kernels (None: it can).

    `params` are weight and bias (either may be None; none for the gated activations, whose up
    must have x's dtype, checked by the caller); `residual_dtype` is the dtype of the residual the
    call will pass (after any conversion). Mirrors the C++ API's dtype rules.
    """
    if STATE.disabled or family in STATE.disabled_ops:
        return "disabled by FUSEKIT_DISABLE / FUSEKIT_DISABLE_OPS"
    if not STATE.loaded:
        return STATE.reason
    device = x.device.type
    if device == "cuda":
        if STATE.gpu_reason is not None:
            return STATE.gpu_reason
    elif device != "cpu":
        return f"no fusekit kernels for {device} tensors"
    if x.dtype not in KERNEL_DTYPES:
        return f"no fusekit kernels for x of dtype {x.dtype}"
    present = [p for p in params if p is not None]
    for p in present:
        if p.dtype not in (x.dtype, torch.float32):
            return f"no fusekit kernels for {x.dtype} x with {p.dtype} weight or bias"
    if len(present) == 2 and present[0].dtype != present[1].dtype:
        return "no fusekit kernels for weight and bias of different dtypes"
    if residual_dtype is not None and residual_dtype not in (x.dtype, torch.float32):
        return f"no fusekit kernels for {x.dtype} x with a {residual_dtype} residual"
    return None


def use_kernels(family: str, x: torch.Tensor, params: tuple,
                residual_dtype: torch.dtype | None = None) -> bool:
    """Whether to call the compiled op; if not, warns once (per op family and reason) why."""
    reason = fallback_reason(family, x, params, residual_dtype)
    if reason is None:
        return True
    if not (STATE.disabled or family in STATE.disabled_ops):
        _warn_once(family, reason)
    return False
