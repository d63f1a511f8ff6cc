"""The ops the benchmark runs, and what fusekit is compared with on each.

Each op is an OpSpec: it makes the arguments of a call for a shape (make_args: x, [residual],
weight, [bias], eps for the norms), knows the bytes one call moves (bytes), says how an output is
checked against eager's (compare), and every implementation of it is called the same way,
fn(*args), so one timing loop serves them all:

  fusekit      fusekit's functional op (compiled kernels, or the package's eager fallback; each
               row says which ran, from fusekit's own fallback check)
  eager        the formula a model runs in plain PyTorch: Hugging Face's LlamaRMSNorm for
               rms_norm, torch.nn.functional.layer_norm for layer_norm, and `h = x + residual`
               then the norm for the fused ops
  compile      torch.compile of that eager code (default mode, one compiled function per op for
               all shapes, as bench/baselines.py does)
  seed_triton  the seed documents' Triton kernels, when their directory is given (loaded from
               DIR/seed_triton.py as bench/baselines.py loads them; rms_norm ops only, GPU only)

Bytes moved = each input read once + each output written once (weights once).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

IMPLS = ("fusekit", "eager", "compile", "seed_triton")


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


# ---- the op specs ------------------------------------------------------------------------------

def _outputs(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


@dataclass(frozen=True)
class OpSpec:
    """One op: its name (fusekit's functional name), the eager formula, and the function of
    seed_triton.py that computes it, if the seeds have one. Subclasses are the families."""

    name: str
    eager: Callable
    seed_name: str | None

    def make_args(self, m: int, n: int, dtype: torch.dtype, device: str) -> tuple:
        raise NotImplementedError

    def bytes(self, m: int, n: int, dtype: torch.dtype) -> int:
        raise NotImplementedError

    def kernel_args(self, args: tuple) -> tuple:
        """(x, params, residual dtype): what fusekit's fallback check looks at."""
        raise NotImplementedError

    def fusekit_fn(self) -> Callable:
        import fusekit

        return getattr(fusekit, self.name)

    def reference(self, out, rows: int) -> tuple:
        """The first `rows` rows of each output of a call (a copy: the full output may go)."""
        return tuple(t[:rows].clone() for t in _outputs(out))

    def compare(self, got, want: tuple) -> dict:
        """Fields of a result saying how an implementation's output differs from eager's
        reference (its first rows): the largest |difference|, in float32."""
        got = _outputs(got)
        if len(got) != len(want):
            raise ValueError(f"expected {len(want)} outputs but got {len(got)}")
        diff = max((g[:w.shape[0]].float() - w.float()).abs().max().item()
                   for g, w in zip(got, want))
        return {"max_abs_diff_vs_eager": diff}


@dataclass(frozen=True)
class NormSpec(OpSpec):
    residual: bool  # takes a residual and returns x + residual as a second output
    params: int     # [N] vectors: weight, or weight and bias
    eps: float

    def make_args(self, m, n, dtype, device):
        def rand(*shape):
            return torch.randn(*shape, device=device, dtype=dtype)

        rows = (rand(m, n), rand(m, n)) if self.residual else (rand(m, n),)
        return rows + tuple(rand(n) for _ in range(self.params)) + (self.eps,)

    def bytes(self, m, n, dtype):
        row_tensors = 4 if self.residual else 2  # x and y, plus residual and residual_out
        return _itemsize(dtype) * (row_tensors * m * n + self.params * n)

    def kernel_args(self, args):
        tensors = args[:-1]  # the last argument is eps
        params = tensors[2:] if self.residual else tensors[1:]
        return tensors[0], tuple(params), tensors[1].dtype if self.residual else None


OPS = {spec.name: spec for spec in (
    NormSpec("rms_norm", hf_rms_norm, "rms_norm_triton", False, 1, 1e-6),
    NormSpec("fused_add_rms_norm", eager_fused_add_rms_norm, "fused_add_rms_norm_triton", True,
             1, 1e-6),
    NormSpec("layer_norm", eager_layer_norm, None, False, 2, 1e-5),
    NormSpec("fused_add_layer_norm", eager_fused_add_layer_norm, None, True, 2, 1e-5),
)}


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

def load_seed(seed_dir: str):
    """DIR/seed_triton.py as a module (the seed kernels are not part of this repository)."""
    path = os.path.join(seed_dir, "seed_triton.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--seed-dir: expected {path} to exist")
    spec = importlib.util.spec_from_file_location("seed_triton", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Implementations:
    """Callables per op and implementation; compiled functions and the seed module made once."""

    def __init__(self, device: str, wanted: tuple, seed_dir: str | None):
        self.device = device
        self.wanted = tuple(name for name in IMPLS if name in wanted)
        self.seed, self.seed_error = None, None
        if "seed_triton" in self.wanted:
            if not seed_dir:
                self.wanted = tuple(name for name in self.wanted if name != "seed_triton")
            elif device != "cuda":
                self.seed_error = "the seed Triton kernels need a GPU"
            else:
                try:
                    self.seed = load_seed(seed_dir)
                except Exception as error:  # reported in each row; the other impls still run
                    self.seed_error = f"loading the seed kernels failed: {error}"
        self._compiled: dict = {}
        self._failed: dict = {}

    def failed(self, spec: OpSpec, name: str, error: str) -> None:
        """Not to try `name` on this op again (a torch.compile that failed once, fails again,
        slowly)."""
        self._failed[(spec.name, name)] = f"failed on an earlier shape: {error}"

    def for_op(self, spec: OpSpec) -> dict:
        """name -> callable(*args), or name -> str (why it is not run)."""
        table = {}
        for name in self.wanted:
            if (spec.name, name) in self._failed:
                table[name] = self._failed[(spec.name, name)]
            elif name == "fusekit":
                table[name] = spec.fusekit_fn()
            elif name == "eager":
                table[name] = spec.eager
            elif name == "compile":
                if spec.name not in self._compiled:
                    self._compiled[spec.name] = torch.compile(spec.eager)
                table[name] = self._compiled[spec.name]
            elif spec.seed_name is None:
                continue  # the seeds have no such op: no row entry at all
            elif self.seed_error:
                table[name] = self.seed_error
            else:
                table[name] = getattr(self.seed, spec.seed_name)
        return table
