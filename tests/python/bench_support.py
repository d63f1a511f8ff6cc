"""What the benchmark's tests share (test_bench_cli.py, test_bench_baselines.py): running
`python -m fusekit bench` as a user runs it, in a subprocess, and checking a row of its JSON
(bytes moved, each implementation's times, its result against eager's)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
import torch

import fusekit

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(fusekit.__file__)))
REPO_SHAPES = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "shapes.json")
QUICK_M, QUICK_N = (1, 256, 2048), 4096
OPS = ("rms_norm", "fused_add_rms_norm", "layer_norm", "fused_add_layer_norm",
       "rms_norm_quant_fp8", "fused_add_rms_norm_quant_fp8")
ACT_OPS = ("silu_and_mul", "gelu_tanh_and_mul", "gelu_and_mul", "silu_and_mul_quant_fp8",
           "gelu_tanh_and_mul_quant_fp8", "gelu_and_mul_quant_fp8")
SEEDED = ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "gelu_tanh_and_mul")
ROW_TENSORS = {"rms_norm": 2, "fused_add_rms_norm": 4, "layer_norm": 2, "fused_add_layer_norm": 4,
               "rms_norm_quant_fp8": 1, "fused_add_rms_norm_quant_fp8": 3}
PARAMS = {"rms_norm": 1, "fused_add_rms_norm": 1, "layer_norm": 2, "fused_add_layer_norm": 2,
          "rms_norm_quant_fp8": 1, "fused_add_rms_norm_quant_fp8": 1}
FAKE_SEED = """import torch

def silu_and_mul_triton(x):  # stands in for the seed kernel: these tests do not run Triton
    n = x.shape[-1] // 2
    return torch.nn.functional.silu(x[..., :n]) * x[..., n:]
"""
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def run_bench(tmp_path, *args, prelude: str = "") -> tuple:
    """Runs the command; `prelude` is Python run first in the child (to hide or break modules)."""
    out_json, out_png = tmp_path / "bench.json", tmp_path / "bench.png"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
    argv = ["bench", *args, "--json", str(out_json), "--plot", str(out_png)]
    code = (f"import sys, runpy\n{prelude}\n"
            f"sys.argv = ['fusekit'] + {argv!r}\n"
            "runpy.run_module('fusekit', run_name='__main__', alter_sys=True)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=1200)
    return proc, out_json, out_png


def positive(result: dict, *keys) -> None:
    for key in keys:
        assert isinstance(result.get(key), float) and result[key] > 0, (key, result)


def expected_bytes(op: str, m: int, n: int) -> int:
    if op in ACT_OPS:  # bf16 x [M, 2N] read; bf16 out, or fp8 out and a float32 scale per row
        return 2 * 2 * m * n + (m * n + 4 * m if op.endswith("_fp8") else 2 * m * n)
    # bf16 rows and weight; the fp8 forms also fp8 out and a float32 scale per row
    fp8 = m * n + 4 * m if op.endswith("_fp8") else 0
    return 2 * (ROW_TENSORS[op] * m * n + PARAMS[op] * n) + fp8


def check_row(row: dict, device: str, impls=("fusekit", "eager", "compile")) -> None:
    m, n = row["M"], row["N"]
    assert row["dtype"] == "bfloat16"
    assert row["family"] == ("act_and_mul" if row["op"] in ACT_OPS else "norm")
    assert row["bytes"] == expected_bytes(row["op"], m, n)
    results = row["results"]
    assert set(impls) <= set(results), sorted(results)
    ran = {name: r for name, r in results.items() if "error" not in r and "skipped" not in r}
    # fusekit and eager must run; a baseline that cannot (torch.compile with no C++ compiler,
    # say) must give its reason.
    assert {"fusekit", "eager"} <= set(ran), results
    for name, result in results.items():
        if name not in ran:
            why = result.get("error") or result.get("skipped")
            assert isinstance(why, str) and why, (name, result)
    method = "host" if device == "cpu" else ("graph" if m <= 256 else "cold")
    for name, result in ran.items():
        positive(result, "time_us", "call_us", "GBps", "pct_copy")
        assert result["method"] == method, (name, m, result)
        if device == "cuda":
            positive(result, "cold_us")
            if m <= 256:
                positive(result, "graph_us")
        if row["op"].endswith("_fp8"):  # decoded values: one fp8 step can exceed 0.5
            assert result["within_tolerance"] is True, (name, result)
            # The fused norm's: torch.compile normalizes x + residual unrounded (NormSpec.compare).
            steps = 3.001 if row["op"] == "fused_add_rms_norm_quant_fp8" else 2.001
            assert result["fp8_max_steps_vs_eager"] <= steps, (name, result)
        else:
            assert result["max_abs_diff_vs_eager"] < 0.5, (name, result)
            assert "within_tolerance" not in result, (name, result)
    ours = results["fusekit"]
    assert ours["backend"] == "compiled" or ours["backend"].startswith("fallback: ")
    baselines = set(ran) - {"fusekit"}
    assert set(ours["speedup"]) == baselines and set(ours["call_speedup"]) == baselines
    for name in baselines:
        expected = ran[name]["time_us"] / ours["time_us"]
        assert ours["speedup"][name] == pytest.approx(expected)
        assert ours["call_speedup"][name] > 0


DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(
        not torch.cuda.is_available(), reason="no GPU visible to torch")),
]
