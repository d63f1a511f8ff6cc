"""The benchmark command line, run as a user runs it (`python -m fusekit bench` in a subprocess):
it must finish on the CPU, and on the GPU when there is one, and leave a JSON document whose rows
hold a positive time for every implementation that ran, a table on stdout, and a PNG when
matplotlib is installed. Without matplotlib or tqdm it must still finish, and when fusekit's own
calls fail it must say so in its exit status."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

import fusekit

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(fusekit.__file__)))
REPO_SHAPES = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "shapes.json")
QUICK_M, QUICK_N = (1, 256, 2048), 4096
OPS = ("rms_norm", "fused_add_rms_norm", "layer_norm", "fused_add_layer_norm")
ROW_TENSORS = {"rms_norm": 2, "fused_add_rms_norm": 4, "layer_norm": 2, "fused_add_layer_norm": 4}
PARAMS = {"rms_norm": 1, "fused_add_rms_norm": 1, "layer_norm": 2, "fused_add_layer_norm": 2}
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


def check_row(row: dict, device: str) -> None:
    m, n = row["M"], row["N"]
    assert row["dtype"] == "bfloat16"
    assert row["bytes"] == 2 * (ROW_TENSORS[row["op"]] * m * n + PARAMS[row["op"]] * n)
    results = row["results"]
    assert {"fusekit", "eager", "compile"} <= set(results), sorted(results)
    ran = {name: r for name, r in results.items() if "error" not in r}
    # fusekit and eager must run; a baseline that cannot (torch.compile with no C++ compiler,
    # say) must give its reason.
    assert {"fusekit", "eager"} <= set(ran), results
    for name, result in results.items():
        if name not in ran:
            assert isinstance(result["error"], str) and result["error"], (name, result)
    method = "host" if device == "cpu" else ("graph" if m <= 256 else "cold")
    for name, result in ran.items():
        positive(result, "time_us", "call_us", "GBps", "pct_copy")
        assert result["method"] == method, (name, m, result)
        if device == "cuda":
            positive(result, "cold_us")
            if m <= 256:
                positive(result, "graph_us")
        assert result["max_abs_diff_vs_eager"] < 0.5, (name, result)
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


@pytest.mark.parametrize("device", DEVICES)
def test_quick_run_writes_table_json_and_plot(tmp_path, device):
    proc, out_json, out_png = run_bench(tmp_path, "--quick", "--device", device)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out_json.read_text())
    assert doc["schema"] == 1
    env = doc["env"]
    for key in ("date", "torch", "triton", "fusekit", "fusekit_build", "commit", "timing"):
        assert key in env, key
    assert env["device"] == device and env["torch"] == torch.__version__
    assert (env["gpu"] is None) == (device == "cpu")
    if device == "cuda":
        assert env["gpu"]["name"] == torch.cuda.get_device_name()
    assert doc["copy_GBps"] > 0
    shapes = sorted((row["op"], row["M"], row["N"]) for row in doc["rows"])
    assert shapes == sorted((op, m, QUICK_N) for op in OPS for m in QUICK_M)
    for row in doc["rows"]:
        check_row(row, device)
    for op in OPS:
        assert op in proc.stdout
    assert "copy bandwidth" in proc.stdout
    if device == "cpu":
        assert "CPU" in proc.stdout and "host" in proc.stdout
    if HAS_MATPLOTLIB:
        assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert not out_png.exists() and "matplotlib" in proc.stderr


def test_runs_without_matplotlib_and_tqdm(tmp_path):
    hide = "sys.modules['matplotlib'] = None\nsys.modules['tqdm'] = None"
    proc, out_json, out_png = run_bench(tmp_path, "--quick", "--device", "cpu", "--ops",
                                        "rms_norm", "--M", "1,8", "--impls", "fusekit,eager",
                                        prelude=hide)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not out_png.exists()
    assert "matplotlib is not installed" in proc.stderr
    assert "[5/5] rms_norm 8x4096 eager" in proc.stderr  # the plain progress counter
    rows = json.loads(out_json.read_text())["rows"]
    assert [(r["M"], sorted(r["results"])) for r in rows] == [(1, ["eager", "fusekit"]),
                                                              (8, ["eager", "fusekit"])]


def test_failing_fusekit_call_fails_the_run(tmp_path):
    # fusekit.rms_norm broken in the child: the row records the error and the exit status is 1.
    breaker = ("import fusekit\n"
               "def broken(*args, **kwargs):\n"
               "    raise RuntimeError('kernel exploded')\n"
               "fusekit.rms_norm = broken")
    proc, out_json, _ = run_bench(tmp_path, "--quick", "--device", "cpu", "--ops", "rms_norm",
                                  "--M", "4", "--impls", "fusekit,eager", prelude=breaker)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    row = json.loads(out_json.read_text())["rows"][0]
    assert "kernel exploded" in row["results"]["fusekit"]["error"]
    positive(row["results"]["eager"], "time_us")
    assert "kernel exploded" in proc.stdout  # the table's note


def test_bad_arguments_exit_2(tmp_path):
    proc, out_json, _ = run_bench(tmp_path, "--ops", "no_such_op")
    assert proc.returncode == 2 and "no_such_op" in proc.stderr
    assert not out_json.exists()


def test_packaged_shapes_match_the_repository():
    packaged = os.path.join(os.path.dirname(fusekit.__file__), "bench", "shapes.json")
    with open(packaged, encoding="utf-8") as f:
        ours = json.load(f)["norm"]
    assert set(ours["ops"]) <= set(OPS)
    if not os.path.exists(REPO_SHAPES):
        pytest.skip("not running from a source checkout")
    with open(REPO_SHAPES, encoding="utf-8") as f:
        assert ours == json.load(f)["norm"], "python/fusekit/bench/shapes.json is out of date"
