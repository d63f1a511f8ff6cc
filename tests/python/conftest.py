"""Shared fixtures of the Python tests: the devices to run on, and the guarantee that the tests of
compiled kernels really exercise them.

The suite needs the compiled operator library (scripts/build_python_ext.sh, `pip install .`, or
FUSEKIT_LIBRARY): without it every fusekit call would quietly run the eager fallback and the
kernel tests would test nothing, so a session without it fails at once (set
FUSEKIT_TEST_ALLOW_FALLBACK=1 to run the fallback-only subset). GPU cases run when torch sees a
GPU and the library has kernels for it; otherwise they are skipped with the reason.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))  # reference.py

import fusekit  # noqa: E402
from recorder import OpRecorder  # noqa: E402,F401  (re-exported for the tests)

INFO = fusekit.build_info()
ALLOW_FALLBACK = os.environ.get("FUSEKIT_TEST_ALLOW_FALLBACK", "") not in ("", "0")


def pytest_sessionstart(session):
    if not INFO["library"]["loaded"] and not ALLOW_FALLBACK:
        raise pytest.UsageError(
            "fusekit's compiled operator library is not loaded "
            f"({INFO['library']['reason']}); build it (scripts/build_python_ext.sh) or set "
            "FUSEKIT_TEST_ALLOW_FALLBACK=1")


def gpu_skip_reason() -> str | None:
    if not torch.cuda.is_available():
        return "no GPU visible to torch"
    if "cuda" not in INFO["backends"] and "hip" not in INFO["backends"]:
        return f"fusekit has no GPU kernels here: {INFO['gpu_reason'] or INFO['library']['reason']}"
    return None


def device_params():
    reason = gpu_skip_reason()
    return [
        pytest.param("cpu", id="cpu"),
        pytest.param("cuda", id="cuda",
                     marks=pytest.mark.skipif(reason is not None, reason=reason or "")),
    ]


requires_kernels = pytest.mark.skipif(not INFO["library"]["loaded"],
                                      reason="the compiled operator library is not loaded")


@pytest.fixture(params=device_params())
def device(request):
    return request.param


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


# A NaN code of each fp8 format (e4m3fn: 0x7F, one of its two; e4m3fnuz: 0x80, its only one).
FP8_NAN_CODE = {torch.float8_e4m3fn: 0x7F, torch.float8_e4m3fnuz: 0x80}


def poisoned(shape, dtype, device):
    """An output buffer full of NaN (the format's NaN code for fp8), which finite inputs never
    give: a write shows, and an operator that leaves it unwritten cannot pass, as torch.empty's
    leftover bytes could (they may even hold an earlier call's answer)."""
    if dtype in FP8_NAN_CODE:
        return torch.full(shape, FP8_NAN_CODE[dtype], dtype=torch.uint8, device=device).view(dtype)
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def randn(shape, dtype, device, gen, scale=1.0, mean=0.0):
    """Random normal values drawn on the CPU (the same on every device), never exactly zero."""
    t = torch.randn(shape, generator=gen, dtype=torch.float64) * scale + mean
    t = torch.where(t.abs() < 1e-3, torch.full_like(t, 1e-3), t)
    return t.to(dtype).to(device)

