"""fusekit's ops as functions on torch tensors: RMSNorm and LayerNorm over the last dimension,
alone or fused with the residual add before them.

Each function checks its arguments (TypeError for a non-tensor, ValueError naming the argument,
the expected and the actual value), then calls the compiled operator (torch.ops.fusekit.*) when
the tensors' device and dtypes have kernels, or else fusekit's eager implementation, warning once
why (see fusekit.build_info()). Inputs may be strided views; those whose rows the kernels cannot
address directly are copied first. `out=` and the in-place forms write into the given tensors.
Gradients flow through every function except the in-place ones' outputs (which are written with
copy_ when an input requires grad, as PyTorch's own in-place ops are). Every tensor a function
writes into (out=, the in-place forms' x and residual) is marked modified, as PyTorch's in-place
ops mark theirs: a backward pass that needs its old value then fails instead of using the new.

Numerics: statistics and products in float32, one rounding to x's dtype at the end; the fused
add is computed in float32 and rounded to the residual's dtype, and that rounded sum is what gets
normalized (as in a model that adds in its residual dtype).
"""

from __future__ import annotations

import contextlib
import math
import numbers

import torch
from torch import Tensor
from torch.autograd.graph import increment_version

from . import _eager, _loader

__all__ = [
    "rms_norm",
    "fused_add_rms_norm",
    "fused_add_rms_norm_",
    "layer_norm",
    "fused_add_layer_norm",
    "fused_add_layer_norm_",
]

_NO_OUT_GRAD = (
    "{}: out= arguments don't support automatic differentiation, but one of the arguments "
    "requires grad"
)


# ---- argument checks ---------------------------------------------------------------------------

def _require_tensor(op: str, name: str, t, optional: bool = False) -> None:
    if t is None and optional:
        return
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name}: expected a torch.Tensor but got {type(t).__name__}")


def _require_floating(op: str, name: str, dtype) -> None:
    """Integer, bool and complex tensors have no normalization or activation: refused here, not
    handed to the eager implementation (which would return numbers that mean nothing)."""
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise ValueError(f"{op}: {name}: expected a floating-point dtype but got {dtype}")


def _is_real(v) -> bool:
    """A real number other than a bool: Python's int and float, and numpy's scalars."""
    t = type(v)
    return t is float or t is int or (isinstance(v, numbers.Real) and not isinstance(v, bool))


_NO_RESIDUAL = object()


def _check_args(op: str, x, params: dict, residual=_NO_RESIDUAL, eps=1e-6,
                weight_offset=0.0, residual_dtype=None) -> None:
    _require_tensor(op, "x", x)
    if x.dim() < 1:
        raise ValueError(f"{op}: x: expected rank 1 or more but got rank 0")
    _require_floating(op, "x", x.dtype)
    n = x.shape[-1]
    for name, (p, optional) in params.items():
        _require_tensor(op, name, p, optional)
        if p is not None and tuple(p.shape) != (n,):
            raise ValueError(f"{op}: {name}: expected shape [{n}] but got {list(p.shape)}")
        if p is not None:
            _require_floating(op, name, p.dtype)
    if residual is not _NO_RESIDUAL:  # the fused adds: a tensor is required
        _require_tensor(op, "residual", residual)
        if residual.shape != x.shape:
            raise ValueError(f"{op}: residual: expected shape {list(x.shape)} (x's shape) but got "
                             f"{list(residual.shape)}")
        _require_floating(op, "residual", residual.dtype)
    if residual_dtype is not None:
        _require_floating(op, "residual_dtype", residual_dtype)
    if not (_is_real(eps) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"{op}: eps: expected a finite value > 0 but got {eps!r}")
    if not (_is_real(weight_offset) and math.isfinite(weight_offset)):
        raise ValueError(f"{op}: weight_offset: expected a finite value but got {weight_offset!r}")


def _check_out(op: str, name: str, t, shape, dtype: torch.dtype, device) -> None:
    if t is None:
        return
    _require_tensor(op, name, t)
    if t.shape != shape:
        raise ValueError(f"{op}: {name}: expected shape {list(shape)} but got {list(t.shape)}")
    if t.dtype != dtype:
        raise ValueError(f"{op}: {name}: expected dtype {dtype} but got {t.dtype}")
    if t.device != device:
        raise ValueError(f"{op}: {name}: expected device {device} but got {t.device}")


def _mutated(*tensors: Tensor) -> None:
    """Marks tensors that a compiled operator wrote into as modified (their version counters), as
    PyTorch's own in-place ops do, so that autograd refuses a backward pass through a value saved
    before the write instead of using what is there now. The operators do not do it themselves:
    a Python kernel at their ADInplaceOrView key would add ~4 us to every call (tensors made under
    torch.inference_mode have no version counter, and are skipped). Under torch.compile the traced
    graph records the mutation itself."""
    if not torch.compiler.is_compiling():
        increment_version(tensors)


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in tensors)


def _not_recorded(*tensors):
    """The context for an operator call that autograd must not record: the fp8 forms, whose
    outputs are not differentiable, so must not require grad when an input does (the operators
    have no autograd formula, and PyTorch's fallback for such ops would mark them as requiring
    it, with a backward that gives nothing)."""
    return torch.no_grad() if _needs_grad(*tensors) else contextlib.nullcontext()


# ---- layouts -------------------------------------------------------------------------------------

def _run_rows(t: Tensor) -> int | None:
    """How the kernels can address t: None when they cannot; 0 for rows of a contiguous last
    dimension whose leading dimensions flatten into one row stride >= N (fusekit::TensorView's
    rule); else the rows per run when they flatten into two strides: runs of such rows, each run
    ending before the next begins, such as q = qkv[..., :H * D].view(T, H, D), runs of H rows
    (core/validate.h, as_row_runs; rms_norm and layer_norm take them)."""
    if t.dim() == 0:
        return None
    n = t.shape[-1]
    if n > 1 and t.stride(-1) != 1:
        return None
    rows, row_stride, run_rows, run_stride = 1, None, 0, None
    for d in range(t.dim() - 2, -1, -1):
        size = t.shape[d]
        if size == 0:
            return 0
        if size == 1:
            continue
        if row_stride is None:
            row_stride = t.stride(d)
        elif run_rows == 0 and t.stride(d) != rows * row_stride:
            run_rows, run_stride = rows, t.stride(d)
        elif run_rows > 0 and t.stride(d) != rows // run_rows * run_stride:
            return None
        rows *= size
    if row_stride is not None and (run_rows or rows) > 1 and row_stride < n:
        return None
    # The C++ API's bounds on runs (core/validate.h, common_run_rows).
    if run_rows and (run_stride < (run_rows - 1) * row_stride + n or rows >= 2 ** 31
                     or abs(run_stride - run_rows * row_stride) >= 2 ** 31):
        return None
    return run_rows


def _is_rows(t: Tensor, runs: bool = False) -> bool:
    """Whether the kernels can address t directly: one row stride, or (`runs`) also runs of rows
    (_run_rows)."""
    r = _run_rows(t)
    return r is not None and (runs or r == 0)


def _same_runs(*tensors: Tensor) -> bool:
    """Whether tensors the kernels can address (_run_rows) may meet in one call: every one in
    runs has the same run length."""
    lengths = {_run_rows(t) for t in tensors} - {0}
    return len(lengths) <= 1 and None not in lengths


def _rows(t: Tensor | None, runs: bool = False) -> Tensor | None:
    if t is None or t.is_contiguous() or _is_rows(t, runs):
        return t
    return t.contiguous()


def _param(t: Tensor | None) -> Tensor | None:
    return t if t is None or t.is_contiguous() else t.contiguous()


# ---- the direct path -----------------------------------------------------------------------------
# Most inference calls pass contiguous tensors that need no gradient, of dtypes the kernels take,
# outside torch.compile tracing. Those go straight to the operator's out= form, into an output
# allocated here: the C++ operator checks every argument itself (same errors, ValueError naming
# the argument), so skipping the Python checks changes no result, and the out= forms carry no
# Python autograd kernel (the functional operators do, for callers of torch.ops.fusekit.*, and it
# costs more than the rest of the call together). Everything else takes the checked path below.

# (op, is_cuda, is_cpu, dtypes...) -> whether compiled kernels serve it. The device enters the key
# as those two flags rather than device.type, a new string each call whose making and hashing
# doubled the key's cost (0.94 -> 0.46 us on a 2-core host); other devices, (False, False), all
# fall back.
_direct_kernels: dict = {}


def _direct_entry(name: str):
    """The out= operator's C++ entry point (OpOverload._op, skipping OpOverload.__call__'s Python
    frame, where this torch has it); None when the library is not loaded (_direct() is then never
    true)."""
    try:
        overload = getattr(torch.ops.fusekit, name).default
    except AttributeError:
        return None
    return getattr(overload, "_op", overload)


_direct_rms_norm = _direct_entry("rms_norm_out")
_direct_fused_add_rms_norm = _direct_entry("fused_add_rms_norm_out")
_direct_layer_norm = _direct_entry("layer_norm_out")
_direct_fused_add_layer_norm = _direct_entry("fused_add_layer_norm_out")


def _direct(op: str, x, weight, bias=None, residual=None, residual_dtype=None,
            scalars: tuple = ()) -> bool:
    """Whether this call may take the direct path (see above). `scalars` (eps, weight_offset)
    must be Python floats: the operator itself would also take a bool or a one-element tensor,
    which the checked path refuses, and would raise RuntimeError, not the checked path's
    ValueError, for None or a string."""
    # Under torch.compile the traced operators are the graph's: never the direct path. Asked first,
    # so that the trace does not read _direct_kernels, whose contents it would guard on (each new
    # key written by a call would then recompile the graph).
    if torch.compiler.is_compiling():
        return False
    for v in scalars:
        if type(v) is not float:
            return False
    try:
        if torch.is_grad_enabled() and (
                x.requires_grad or (weight is not None and weight.requires_grad)
                or (bias is not None and bias.requires_grad)
                or (residual is not None and residual.requires_grad)):
            return False
        if not (x.is_contiguous() and (weight is None or weight.is_contiguous())
                and (bias is None or bias.is_contiguous())
                and (residual is None or residual.is_contiguous())):
            return False
        if (weight is not None and weight.dim() != 1) or (bias is not None and bias.dim() != 1):
            return False  # the C++ API also takes [1, ..., 1, N]; these functions take [N] alone
        key = (op, x.is_cuda, x.is_cpu, x.dtype, None if weight is None else weight.dtype,
               None if bias is None else bias.dtype,
               None if residual is None else residual.dtype, residual_dtype)
    except AttributeError:  # not a tensor: the checked path says so
        return False
    if residual is not None and residual_dtype is not None and residual_dtype != residual.dtype:
        return False  # needs a converted copy of residual first
    ok = _direct_kernels.get(key)
    if ok is None:
        ok = _direct_kernels[key] = _loader.fallback_reason(
            op, x, (weight, bias), None if residual is None else residual.dtype) is None
    return ok


# ---- RMSNorm -------------------------------------------------------------------------------------

def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6, weight_offset: float = 0.0, *,
             weight_after_cast: bool = False, out: Tensor | None = None) -> Tensor:
    """RMSNorm over the last dimension of x.

    y = x / sqrt(mean(x**2, dim=-1) + eps) * (weight + weight_offset)

    weight_offset=1 gives Gemma's (1 + weight). With weight_after_cast, the normalized value is
    rounded to x's dtype before the multiplication (Hugging Face Llama's order); by default the
    product is formed in float32 and rounded once. x: [..., N] float32, float16 or bfloat16;
    weight: [N], x's dtype or float32. Returns y (x's dtype and shape), or `out` filled with it.
    """
    if out is None and weight is not None and _direct("rms_norm", x, weight,
                                                      scalars=(eps, weight_offset)):
        y = torch.empty_like(x)
        _direct_rms_norm(y, x, weight, eps, weight_offset, weight_after_cast)
        return y
    op = "rms_norm"
    _check_args(op, x, {"weight": (weight, False)}, eps=eps, weight_offset=weight_offset)
    _check_out(op, "out", out, x.shape, x.dtype, x.device)
    grad = _needs_grad(x, weight)
    if out is not None and grad:
        raise RuntimeError(_NO_OUT_GRAD.format(op))
    if _loader.use_kernels(op, x, (weight,)):
        xr, w = _rows(x, runs=not grad), _param(weight)
        if out is not None and _is_rows(out, runs=True) and _same_runs(xr, out):
            torch.ops.fusekit.rms_norm_out(out, xr, w, eps, weight_offset, weight_after_cast)
            _mutated(out)
            return out
        if grad:
            y = torch.ops.fusekit.rms_norm_with_rstd(xr, w, eps, weight_offset,
                                                     weight_after_cast)[0]
        else:
            y = torch.ops.fusekit.rms_norm(xr, w, eps, weight_offset, weight_after_cast)
    else:
        y = _eager.rms_norm(x, weight, eps, weight_offset, weight_after_cast)
    return y if out is None else out.copy_(y)


def fused_add_rms_norm(x: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6,
                       weight_offset: float = 0.0, *, residual_dtype: torch.dtype | None = None,
                       weight_after_cast: bool = False, out: Tensor | None = None,
                       residual_out: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The residual add before a transformer block's RMSNorm, fused with it.

    residual_out = round_to(residual_dtype, x + residual.to(residual_dtype))   (summed in float32)
    y = rms_norm(residual_out, weight, eps, weight_offset)   (see rms_norm; y has x's dtype)

    residual_dtype defaults to residual's dtype; float32 keeps an fp32 residual stream beside
    bf16 or fp16 activations; one narrower than residual's rounds residual to it before the add
    (as a model that casts its residual stream first). Returns (y, residual_out), or the given
    `out` / `residual_out` filled with them.
    """
    if out is None and residual_out is None and weight is not None and residual is not None and _direct(
            "fused_add_rms_norm", x, weight, residual=residual, residual_dtype=residual_dtype,
            scalars=(eps, weight_offset)):
        y, h = torch.empty_like(x), torch.empty_like(residual)
        _direct_fused_add_rms_norm(y, h, x, residual, weight, eps, weight_offset,
                                   weight_after_cast)
        return y, h
    op = "fused_add_rms_norm"
    _check_args(op, x, {"weight": (weight, False)}, residual, eps, weight_offset, residual_dtype)
    r_dtype = residual_dtype or residual.dtype
    _check_out(op, "out", out, x.shape, x.dtype, x.device)
    _check_out(op, "residual_out", residual_out, x.shape, r_dtype, x.device)
    grad = _needs_grad(x, residual, weight)
    if (out is not None or residual_out is not None) and grad:
        raise RuntimeError(_NO_OUT_GRAD.format(op))
    if _loader.use_kernels(op, x, (weight,), r_dtype):
        xr, rr, w = _rows(x), _rows(residual), _param(weight)
        if (out is not None and residual_out is not None and _is_rows(out)
                and _is_rows(residual_out)):
            torch.ops.fusekit.fused_add_rms_norm_out(out, residual_out, xr, rr.to(r_dtype), w, eps,
                                                     weight_offset, weight_after_cast)
            _mutated(out, residual_out)
            return out, residual_out
        if grad:
            y, h, _ = torch.ops.fusekit.fused_add_rms_norm_with_rstd(
                xr, rr, w, eps, weight_offset, r_dtype, weight_after_cast)
        else:
            y, h = torch.ops.fusekit.fused_add_rms_norm(xr, rr, w, eps, weight_offset, r_dtype,
                                                        weight_after_cast)
    else:
        h = _eager.add(x, residual.to(r_dtype))
        y = _eager.rms_norm(h, weight, eps, weight_offset, weight_after_cast, out_dtype=x.dtype)
    return (y if out is None else out.copy_(y),
            h if residual_out is None else residual_out.copy_(h))


def fused_add_rms_norm_(x: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6,
                        weight_offset: float = 0.0, *,
                        weight_after_cast: bool = False) -> tuple[Tensor, Tensor]:
    """In-place fused_add_rms_norm (the vLLM / FlashInfer convention).

    residual <- x + residual   (in residual's dtype)
    x        <- rms_norm(residual, weight, eps, weight_offset)

    Returns (x, residual).
    """
    op = "fused_add_rms_norm"
    _check_args(op + "_", x, {"weight": (weight, False)}, residual, eps, weight_offset)
    if not _needs_grad(x, residual, weight) and _loader.use_kernels(op, x, (weight,),
                                                                    residual.dtype):
        if _is_rows(x) and _is_rows(residual):
            torch.ops.fusekit.fused_add_rms_norm_(x, residual, _param(weight), eps, weight_offset,
                                                  weight_after_cast)
            _mutated(x, residual)
            return x, residual
    # Through the functional op (rows it cannot address are copied), then into place.
    y, h = fused_add_rms_norm(x, residual, weight, eps, weight_offset,
                              weight_after_cast=weight_after_cast)
    residual.copy_(h)
    x.copy_(y)
    return x, residual


# ---- LayerNorm ----------------------------------------------------------------------------------

def layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5, *, out: Tensor | None = None) -> Tensor:
    """LayerNorm over the last dimension of x.

    y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias   (biased variance, over dim=-1)

    weight and bias are each optional (1 and 0). x: [..., N] float32, float16 or bfloat16;
    weight and bias: [N], x's dtype or float32 (the same for both). Returns y (x's dtype and
    shape), or `out` filled with it.
    """
    if out is None and _direct("layer_norm", x, weight, bias, scalars=(eps,)):
        y = torch.empty_like(x)
        _direct_layer_norm(y, x, weight, bias, eps)
        return y
    op = "layer_norm"
    _check_args(op, x, {"weight": (weight, True), "bias": (bias, True)}, eps=eps)
    _check_out(op, "out", out, x.shape, x.dtype, x.device)
    grad = _needs_grad(x, weight, bias)
    if out is not None and grad:
        raise RuntimeError(_NO_OUT_GRAD.format(op))
    if _loader.use_kernels(op, x, (weight, bias)):
        xr, w, b = _rows(x, runs=not grad), _param(weight), _param(bias)
        if out is not None and _is_rows(out, runs=True) and _same_runs(xr, out):
            torch.ops.fusekit.layer_norm_out(out, xr, w, b, eps)
            _mutated(out)
            return out
        if grad:
            y = torch.ops.fusekit.layer_norm_with_stats(xr, w, b, eps)[0]
        else:
            y = torch.ops.fusekit.layer_norm(xr, w, b, eps)
    else:
        y = _eager.layer_norm(x, weight, bias, eps)
    return y if out is None else out.copy_(y)


def fused_add_layer_norm(x: Tensor, residual: Tensor, weight: Tensor | None = None,
                         bias: Tensor | None = None, eps: float = 1e-5, *,
                         residual_dtype: torch.dtype | None = None, out: Tensor | None = None,
                         residual_out: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The residual add before a LayerNorm, fused with it.

    residual_out = round_to(residual_dtype, x + residual.to(residual_dtype))   (summed in float32)
    y = layer_norm(residual_out, weight, bias, eps)          (see layer_norm; y has x's dtype)

    residual_dtype defaults to residual's dtype; one narrower than residual's rounds residual to
    it before the add. Returns (y, residual_out), or the given `out` / `residual_out` filled with
    them.
    """
    if out is None and residual_out is None and residual is not None and _direct(
            "fused_add_layer_norm", x, weight, bias, residual, residual_dtype, scalars=(eps,)):
        y, h = torch.empty_like(x), torch.empty_like(residual)
        _direct_fused_add_layer_norm(y, h, x, residual, weight, bias, eps)
        return y, h
    op = "fused_add_layer_norm"
    _check_args(op, x, {"weight": (weight, True), "bias": (bias, True)}, residual, eps,
                residual_dtype=residual_dtype)
    r_dtype = residual_dtype or residual.dtype
    _check_out(op, "out", out, x.shape, x.dtype, x.device)
    _check_out(op, "residual_out", residual_out, x.shape, r_dtype, x.device)
    grad = _needs_grad(x, residual, weight, bias)
    if (out is not None or residual_out is not None) and grad:
        raise RuntimeError(_NO_OUT_GRAD.format(op))
    if _loader.use_kernels(op, x, (weight, bias), r_dtype):
        xr, rr, w, b = _rows(x), _rows(residual), _param(weight), _param(bias)
        if (out is not None and residual_out is not None and _is_rows(out)
                and _is_rows(residual_out)):
            torch.ops.fusekit.fused_add_layer_norm_out(out, residual_out, xr, rr.to(r_dtype), w,
                                                       b, eps)
            _mutated(out, residual_out)
            return out, residual_out
        if grad:
            y, h, _, _ = torch.ops.fusekit.fused_add_layer_norm_with_stats(xr, rr, w, b, eps,
                                                                           r_dtype)
        else:
            y, h = torch.ops.fusekit.fused_add_layer_norm(xr, rr, w, b, eps, r_dtype)
    else:
        h = _eager.add(x, residual.to(r_dtype))
        y = _eager.layer_norm(h, weight, bias, eps, out_dtype=x.dtype)
    return (y if out is None else out.copy_(y),
            h if residual_out is None else residual_out.copy_(h))


def fused_add_layer_norm_(x: Tensor, residual: Tensor, weight: Tensor | None = None,
                          bias: Tensor | None = None,
                          eps: float = 1e-5) -> tuple[Tensor, Tensor]:
    """In-place fused_add_layer_norm.

    residual <- x + residual   (in residual's dtype)
    x        <- layer_norm(residual, weight, bias, eps)

    Returns (x, residual).
    """
    op = "fused_add_layer_norm"
    _check_args(op + "_", x, {"weight": (weight, True), "bias": (bias, True)}, residual, eps)
    if not _needs_grad(x, residual, weight, bias) and _loader.use_kernels(
            op, x, (weight, bias), residual.dtype):
        if _is_rows(x) and _is_rows(residual):
            torch.ops.fusekit.fused_add_layer_norm_(x, residual, _param(weight), _param(bias), eps)
            _mutated(x, residual)
            return x, residual
    # Through the functional op (rows it cannot address are copied), then into place.
    y, h = fused_add_layer_norm(x, residual, weight, bias, eps)
    residual.copy_(h)
    x.copy_(y)
    return x, residual
