"""The ops the benchmark runs, and what fusekit is compared with on each.

Each op is an OpSpec: it makes the arguments of a call for a shape (make_args), knows the bytes
one call moves (bytes), says how fusekit's result is checked against eager's (compare), and
every implementation of it is called the same way, fn(*args), so one timing loop serves them all.
The ops come in families, one per section of shapes.json:

  norm         rms_norm, fused_add_rms_norm, layer_norm, fused_add_layer_norm [M, N]; args
               (x, [residual], weight, [bias], eps); and the RMSNorm ops' dynamic per-token fp8
               forms (rms_norm_quant_fp8, fused_add_rms_norm_quant_fp8, format "e4m3fn"), which
               run on the shapes of their plain op; the fused one updates residual in place,
               which is put back before each checked call
  act_and_mul  silu_and_mul, gelu_tanh_and_mul, gelu_and_mul: x [M, 2N] -> [M, N] (N is the
               output width), and their dynamic per-token fp8 forms (*_quant_fp8, format
               "e4m3fn"), which run on the shapes of their plain op; args (x,)

and each op is compared with:

  fusekit      fusekit's functional op (compiled kernels, or the package's eager fallback; each
               row says which ran, from fusekit's own fallback check)
  eager        the formula a model runs in plain PyTorch: Hugging Face's LlamaRMSNorm for
               rms_norm, torch.nn.functional.layer_norm for layer_norm, `h = x + residual` then
               the norm for the fused ops; act(x[..., :N]) * x[..., N:] with F.silu / F.gelu in
               x's dtype for the gated activations; for the fp8 forms y in float32 (the
               product; RMSNorm's y = x * rsqrt(mean(x^2) + eps) * weight, after
               `residual += x` for the fused one), scale = max(max|y| / 448, 1 / (448 * 512))
               per row, y * (1 / scale) clamped to +-448 and cast to torch.float8_e4m3fn
  compile      torch.compile of that eager code, default mode. With --compile per-n (the
               default) one compiled function per op and hidden size N, made afresh (the dynamo
               caches cleared) when N changes: from its second batch size on torch.compile
               recompiles with M dynamic and N still fixed, what a model of one hidden size gets
               over its token counts. With --compile shared one compiled function per op for all
               shapes, as bench/baselines.py does: torch.compile then recompiles with every size
               dynamic once N changes, and its kernels at the later N are the general ones (at
               N = 4096 on an H100, rms_norm [2048, 4096] 24% of copy against 79% with N fixed).
               With --compile per-shape a fresh compile with dynamic=False for each shape, a
               kernel specialised to that shape: what a caller with one fixed shape gets
  seed_triton  the seed documents' Triton kernels, when their directory is given (loaded from
               DIR/seed_triton.py as bench/baselines.py loads them; GPU only): rms_norm,
               fused_add_rms_norm, silu_and_mul and gelu_tanh_and_mul

Bytes moved = each input read once + each output written once (weights once; for the fp8 forms
one byte per output element plus a float32 scale per row).
"""

from __future__ import annotations

import abc
import functools
import importlib.util
import os
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

IMPLS = ("fusekit", "eager", "compile", "seed_triton")
FAMILIES = ("norm", "act_and_mul")  # the sections of shapes.json, in the order they are run
FAMILY_ALIASES = {"act": "act_and_mul"}
FP8_FORMAT = "e4m3fn"
FP8_MAX = 448.0  # largest finite torch.float8_e4m3fn


# ---- eager formulas ----------------------------------------------------------------------------

def hf_rms_norm(x, weight, eps=1e-6):
    """Hugging Face's LlamaRMSNorm.forward: normalize in float32, cast back, then the weight."""
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def eager_fused_add_rms_norm(x, residual, weight, eps=1e-6):
    h = x + residual
    return hf_rms_norm(h, weight, eps), h


def eager_layer_norm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def eager_fused_add_layer_norm(x, residual, weight, bias, eps=1e-5):
    h = x + residual
    return eager_layer_norm(h, weight, bias, eps), h


def eager_silu_and_mul(x):
    n = x.shape[-1] // 2
    return F.silu(x[..., :n]) * x[..., n:]


def eager_gelu_tanh_and_mul(x):
    n = x.shape[-1] // 2
    return F.gelu(x[..., :n], approximate="tanh") * x[..., n:]


def eager_gelu_and_mul(x):
    n = x.shape[-1] // 2
    return F.gelu(x[..., :n]) * x[..., n:]


def quant_fp8_per_row(y):
    """Dynamic per-row e4m3fn quantization of float32 y: (codes, float32 scale per row)."""
    scale = (y.abs().amax(-1, keepdim=True) / FP8_MAX).clamp(min=1.0 / (FP8_MAX * 512.0))
    q = (y * (1.0 / scale)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale.reshape(-1)


def eager_rms_norm_quant_fp8(x, weight, eps=1e-6):
    """RMSNorm with y left in float32 (fusekit quantizes the float32 y, not y rounded to x's
    dtype), then the per-row quantization."""
    h = x.to(torch.float32)
    y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight.to(torch.float32)
    return quant_fp8_per_row(y)


def eager_fused_add_rms_norm_quant_fp8(x, residual, weight, eps=1e-6):
    """residual += x in place (in residual's dtype), then rms_norm_quant_fp8 of it."""
    residual.add_(x)
    return eager_rms_norm_quant_fp8(residual, weight, eps)


def eager_silu_and_mul_quant_fp8(x):
    n = x.shape[-1] // 2
    return quant_fp8_per_row(F.silu(x[..., :n].float()) * x[..., n:].float())


def eager_gelu_tanh_and_mul_quant_fp8(x):
    n = x.shape[-1] // 2
    return quant_fp8_per_row(F.gelu(x[..., :n].float(), approximate="tanh") * x[..., n:].float())


def eager_gelu_and_mul_quant_fp8(x):
    n = x.shape[-1] // 2
    return quant_fp8_per_row(F.gelu(x[..., :n].float()) * x[..., n:].float())


# ---- the op specs ------------------------------------------------------------------------------

def _outputs(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _check_outputs(got: tuple, want: tuple) -> None:
    """Raises unless `got` has eager's outputs in eager's dtypes: an implementation writing fewer
    outputs, or narrower ones (the seed kernels store bfloat16 whatever x's dtype), does less
    work than the bytes its row is credited with."""
    if len(got) != len(want):
        raise ValueError(f"expected {len(want)} outputs but got {len(got)}")
    for i, (g, w) in enumerate(zip(got, want)):
        if not isinstance(g, torch.Tensor) or g.dtype != w.dtype:
            what = g.dtype if isinstance(g, torch.Tensor) else type(g).__name__
            raise ValueError(f"output {i}: expected dtype {w.dtype} (eager's) but got {what}")


def compare_fp8(got, want: tuple, max_steps: float = 2.0, scale_rtol: float = 1e-3) -> dict:
    """How fp8 codes and per-row scales (got: (codes, scale)) differ from eager's: the decoded
    values (codes * scale) are compared, and each code is measured in steps of the e4m3fn grid at
    eager's scale: within tolerance when no value is more than max_steps steps from eager's and
    the scales agree to scale_rtol. By default two steps and 1e-3. One step: a y an ulp or two
    apart can round to the next code. The second: PyTorch's gelu(approximate="tanh") computes
    1 + tanh(z), which cancels for gates below about -3, so eager's own value is a few percent off
    there and can land a code further away."""
    _check_outputs(_outputs(got), want)
    q, scale = _outputs(got)
    q_want, scale_want = want
    rows = q_want.shape[0]
    s = scale.reshape(-1)[:rows].float().unsqueeze(-1)
    s_want = scale_want.reshape(-1).float().unsqueeze(-1)
    decoded, decoded_want = q[:rows].float() * s, q_want.float() * s_want
    codes, codes_want = q[:rows].float() * (s / s_want), q_want.float()  # at eager's scale
    # e4m3fn: 3 mantissa bits, so a step of 2^(e - 3) at 2^e, and 2^-9 below 2^-6.
    smaller = torch.minimum(codes.abs(), codes_want.abs()).clamp(min=2.0 ** -6)
    step = torch.exp2(torch.floor(torch.log2(smaller)) - 3)
    steps = ((codes - codes_want).abs() / step).max().item()
    scale_diff = ((s - s_want).abs() / s_want).max().item()
    return {"max_abs_diff_vs_eager": (decoded - decoded_want).abs().max().item(),
            "fp8_max_steps_vs_eager": steps,
            "scale_max_rel_diff_vs_eager": scale_diff,
            "within_tolerance": bool(steps <= max_steps + 1e-3 and scale_diff <= scale_rtol)}


@dataclass(frozen=True)
class OpSpec(abc.ABC):
    """One op: its name (fusekit's functional name), the eager formula, and the function of
    seed_triton.py that computes it, if the seeds have one. Subclasses are the families."""

    name: str
    eager: Callable
    seed_name: str | None

    family = ""

    @property
    def shapes_name(self) -> str:
        """The name under which the family's section of shapes.json lists the op."""
        return self.name

    @abc.abstractmethod
    def make_args(self, m: int, n: int, dtype: torch.dtype, device: str) -> tuple:
        """Defined by each family."""

    @abc.abstractmethod
    def bytes(self, m: int, n: int, dtype: torch.dtype) -> int:
        """Defined by each family."""

    @abc.abstractmethod
    def kernel_args(self, args: tuple) -> tuple:
        """(x, params, residual dtype): what fusekit's fallback check looks at."""

    def fusekit_fn(self) -> Callable:
        import fusekit

        return getattr(fusekit, self.name)

    def inputs_snapshot(self, args: tuple):
        """A copy of the inputs a call updates in place, for restore_inputs; None when a call
        updates none (every op but the in-place fused fp8 form)."""
        return None

    def restore_inputs(self, args: tuple, snapshot) -> None:
        """Puts back the inputs inputs_snapshot copied, so that each implementation's checked
        call sees the inputs eager's reference saw."""

    def reference(self, out, rows: int) -> tuple:
        """The first `rows` rows of each output of a call (a copy: the full output may go)."""
        return tuple(t[:rows].clone() for t in _outputs(out))

    def compare(self, got, want: tuple) -> dict:
        """Fields of a result saying how an implementation's output differs from eager's
        reference (its first rows): the largest |difference|, in float32."""
        got = _outputs(got)
        _check_outputs(got, want)
        diff = max((g[:w.shape[0]].float() - w.float()).abs().max().item()
                   for g, w in zip(got, want))
        return {"max_abs_diff_vs_eager": diff}


@dataclass(frozen=True)
class NormSpec(OpSpec):
    residual: bool  # takes a residual: returns x + residual as a second output, or (fp8) updates it
    params: int     # [N] vectors: weight, or weight and bias
    eps: float
    fp8: bool = False  # the dynamic per-token fp8 form (e4m3fn codes and a float32 scale per row)

    family = "norm"

    @property
    def shapes_name(self):
        return self.name.removesuffix("_quant_fp8")  # the fp8 forms run on their plain op's shapes

    def make_args(self, m, n, dtype, device):
        def rand(*shape):
            return torch.randn(*shape, device=device, dtype=dtype)

        rows = (rand(m, n), rand(m, n)) if self.residual else (rand(m, n),)
        return rows + tuple(rand(n) for _ in range(self.params)) + (self.eps,)

    def bytes(self, m, n, dtype):
        params = _itemsize(dtype) * self.params * n
        if self.fp8:  # x (plus the residual read and written back); codes and a scale per row
            return _itemsize(dtype) * (3 if self.residual else 1) * m * n + params + m * n + 4 * m
        row_tensors = 4 if self.residual else 2  # x and y, plus residual and residual_out
        return _itemsize(dtype) * row_tensors * m * n + params

    def kernel_args(self, args):
        tensors = args[:-1]  # the last argument is eps
        params = tensors[2:] if self.residual else tensors[1:]
        return tensors[0], tuple(params), tensors[1].dtype if self.residual else None

    def fusekit_fn(self):
        fn = super().fusekit_fn()
        return functools.partial(fn, format=FP8_FORMAT) if self.fp8 else fn

    def compare(self, got, want):
        """The fp8 forms: compare_fp8; the fused one allows y one rounding of x's dtype apart
        (scales within 2^-7, codes within three steps): torch.compile's kernel normalizes
        x + residual before rounding it to residual's dtype (Inductor drops the round trip that
        eager and fusekit make), which moves y and max|y| by up to 2^-8 in bfloat16."""
        if not self.fp8:
            return super().compare(got, want)
        if self.residual:
            return compare_fp8(got, want, max_steps=3.0, scale_rtol=2.0 ** -7)
        return compare_fp8(got, want)

    def inputs_snapshot(self, args):
        return args[1].clone() if self.fp8 and self.residual else None

    def restore_inputs(self, args, snapshot):
        if snapshot is not None:
            args[1].copy_(snapshot)


@dataclass(frozen=True)
class ActSpec(OpSpec):
    act: str    # silu, gelu_tanh or gelu
    fp8: bool   # the dynamic per-token fp8 form (e4m3fn codes and a float32 scale per row)

    family = "act_and_mul"

    @property
    def shapes_name(self):
        return f"{self.act}_and_mul"  # the fp8 forms run on the shapes of their plain op

    def make_args(self, m, n, dtype, device):
        return (torch.randn(m, 2 * n, device=device, dtype=dtype),)

    def bytes(self, m, n, dtype):
        read = 2 * m * n * _itemsize(dtype)
        return read + (m * n + 4 * m if self.fp8 else m * n * _itemsize(dtype))

    def kernel_args(self, args):
        return args[0], (), None

    def fusekit_fn(self):
        fn = super().fusekit_fn()
        return functools.partial(fn, format=FP8_FORMAT) if self.fp8 else fn

    def compare(self, got, want):
        """The fp8 forms: compare_fp8."""
        return compare_fp8(got, want) if self.fp8 else super().compare(got, want)


OPS = {spec.name: spec for spec in (
    NormSpec("rms_norm", hf_rms_norm, "rms_norm_triton", False, 1, 1e-6),
    NormSpec("fused_add_rms_norm", eager_fused_add_rms_norm, "fused_add_rms_norm_triton", True,
             1, 1e-6),
    NormSpec("layer_norm", eager_layer_norm, None, False, 2, 1e-5),
    NormSpec("fused_add_layer_norm", eager_fused_add_layer_norm, None, True, 2, 1e-5),
    NormSpec("rms_norm_quant_fp8", eager_rms_norm_quant_fp8, None, False, 1, 1e-6, True),
    NormSpec("fused_add_rms_norm_quant_fp8", eager_fused_add_rms_norm_quant_fp8, None, True, 1,
             1e-6, True),
    ActSpec("silu_and_mul", eager_silu_and_mul, "silu_and_mul_triton", "silu", False),
    ActSpec("gelu_tanh_and_mul", eager_gelu_tanh_and_mul, "gelu_tanh_and_mul_triton",
            "gelu_tanh", False),
    ActSpec("gelu_and_mul", eager_gelu_and_mul, None, "gelu", False),
    ActSpec("silu_and_mul_quant_fp8", eager_silu_and_mul_quant_fp8, None, "silu", True),
    ActSpec("gelu_tanh_and_mul_quant_fp8", eager_gelu_tanh_and_mul_quant_fp8, None, "gelu_tanh",
            True),
    ActSpec("gelu_and_mul_quant_fp8", eager_gelu_and_mul_quant_fp8, None, "gelu", True),
)}


def family_ops(family: str) -> list:
    return [spec for spec in OPS.values() if spec.family == family]


def fusekit_backend(spec: OpSpec, args: tuple) -> str:
    """Whether fusekit runs its compiled kernels on these tensors ("compiled") or its eager
    fallback ("fallback: <why>"), as the package itself decides."""
    from fusekit import _loader  # the package's own check (what fusekit.build_info reports)

    check = getattr(_loader, "fallback_reason", None)
    if check is None:
        return "unknown"
    x, params, residual_dtype = spec.kernel_args(args)
    reason = check(spec.name, x, params, residual_dtype)
    return "compiled" if reason is None else f"fallback: {reason}"


# ---- the implementations -----------------------------------------------------------------------

@dataclass(frozen=True)
class NotRun:
    """Why an implementation has no measurement: kind "error" (it was tried and failed, or cannot
    be loaded) or "skipped" (it cannot run here: the seed kernels on the CPU or without Triton)."""

    kind: str
    why: str

    def result(self) -> dict:
        return {self.kind: self.why}


def load_seed(seed_dir: str):
    """DIR/seed_triton.py as a module (the seed kernels are not part of this repository)."""
    path = os.path.join(seed_dir, "seed_triton.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--seed-dir: expected {path} to exist")
    spec = importlib.util.spec_from_file_location("seed_triton", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# How each --compile mode compiles, as a run's header states it (report.summary).
COMPILE_MODE_NOTES = {
    "per-n": "compiled afresh per op and hidden size N, dynamic in M from its second batch size",
    "shared": "one compiled function per op for every shape (every size dynamic once N changes)",
    "per-shape": "compiled afresh per shape with dynamic=False",
}
COMPILE_MODES = tuple(COMPILE_MODE_NOTES)


class Implementations:
    """Callables per op and implementation; compiled functions (per op, or per op and shape: see
    COMPILE_MODES) and the seed module made once."""

    def __init__(self, device: str, wanted: tuple, seed_dir: str | None,
                 compile_mode: str = "per-n"):
        if compile_mode not in COMPILE_MODES:
            raise ValueError(f"compile_mode: expected one of {COMPILE_MODES}, got {compile_mode!r}")
        self.device = device
        self.compile_mode = compile_mode
        self.wanted = tuple(name for name in IMPLS if name in wanted)
        self.seed, self.seed_not_run = None, None
        if "seed_triton" in self.wanted:
            if not seed_dir:
                self.wanted = tuple(name for name in self.wanted if name != "seed_triton")
            elif device != "cuda":
                self.seed_not_run = NotRun("skipped", "the seed Triton kernels need a GPU "
                                                      f"(this run is on the {device})")
            else:
                try:
                    self.seed = load_seed(seed_dir)
                except Exception as error:  # reported in each row; the other impls still run
                    missing = getattr(error, "name", None) or ""
                    if isinstance(error, ModuleNotFoundError) and missing.split(".")[0] == "triton":
                        self.seed_not_run = NotRun("skipped", "triton is not installed, so the "
                                                              "seed kernels cannot run")
                    else:
                        self.seed_not_run = NotRun("error",
                                                   f"loading the seed kernels failed: {error}")
        self._compiled: dict = {}
        self._failed: dict = {}

    def _compiled_fn(self, spec: OpSpec, shape: tuple | None):
        if self.compile_mode == "shared":
            key = spec.name
        elif shape is None:
            return spec.eager  # a placeholder: the table's order only, never called
        elif self.compile_mode == "per-n":
            key = (spec.name, shape[1])
        else:
            key = (spec.name, shape)
        if key not in self._compiled:
            if self.compile_mode != "shared":
                # One compile at a time: dynamo's caches and its record of which sizes changed
                # are per code object, so spec.eager's would otherwise fill up with the earlier
                # keys' entries (and then run eager), and a new N would be compiled as a dynamic
                # size.
                self._compiled.clear()
                torch._dynamo.reset()
            dynamic = False if self.compile_mode == "per-shape" else None
            self._compiled[key] = torch.compile(spec.eager, dynamic=dynamic)
        return self._compiled[key]

    def failed(self, spec: OpSpec, name: str, error: str) -> None:
        """Not to try `name` on this op again (a torch.compile that failed once, fails again,
        slowly)."""
        self._failed[(spec.name, name)] = NotRun("error", f"failed on an earlier shape: {error}")

    def for_op(self, spec: OpSpec, shape: tuple | None = None) -> dict:
        """name -> callable(*args), or name -> NotRun (why it is not run). `shape` (M, N): the
        shape the callables will be timed on, which the per-n and per-shape compile modes key on
        (None: only the table's names and order are wanted)."""
        table = {}
        for name in self.wanted:
            if (spec.name, name) in self._failed:
                table[name] = self._failed[(spec.name, name)]
            elif name == "fusekit":
                table[name] = spec.fusekit_fn()
            elif name == "eager":
                table[name] = spec.eager
            elif name == "compile":
                table[name] = self._compiled_fn(spec, shape)
            elif spec.seed_name is None:
                continue  # the seeds have no such op: no row entry at all
            elif self.seed_not_run:
                table[name] = self.seed_not_run
            elif not hasattr(self.seed, spec.seed_name):
                table[name] = NotRun("error", f"seed_triton.py has no {spec.seed_name}")
            else:
                table[name] = getattr(self.seed, spec.seed_name)
        return table
