"""`import fusekit` never fails, and without usable kernels every call runs the eager
implementation, right to tolerance, warning once with the reason. Each case runs in a fresh
interpreter (the library is loaded, or not, at import): FUSEKIT_DISABLE=1, FUSEKIT_DISABLE_OPS, a
missing library, a library built for another PyTorch, a broken library file; plus unsupported
dtypes in this process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import fusekit
import reference as ref
from conftest import INFO, OpRecorder, randn

PYTHON_DIR = os.path.dirname(os.path.dirname(fusekit.__file__))
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

# Runs every op on small CPU inputs with warnings recorded, checks the values against the float64
# reference, and prints a JSON summary: build_info, the fusekit operators dispatched, warnings.
PROBE = textwrap.dedent("""
    import json, sys, warnings
    import torch
    sys.path.insert(0, {tests!r})
    import reference as ref
    from recorder import OpRecorder
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import fusekit
        g = torch.Generator().manual_seed(0)
        x = torch.randn(3, 77, generator=g).bfloat16()
        r = torch.randn(3, 77, generator=g)
        w = torch.randn(77, generator=g).bfloat16() + 1
        b = torch.randn(77, generator=g).bfloat16()
        with OpRecorder() as rec:
            for _ in range(2):  # a second call must not warn again
                ref.assert_close(fusekit.rms_norm(x, w), ref.rms_norm(x, w, 1e-6))
                y, h = fusekit.fused_add_rms_norm(x, r, w)
                assert torch.equal(h, ref.fused_add(x, r))
                ref.assert_close(y, ref.rms_norm(h, w, 1e-6))
                ref.assert_close(fusekit.layer_norm(x, w, b), ref.layer_norm(x, w, b, 1e-5))
                y, h = fusekit.fused_add_layer_norm(x, r, w, b)
                ref.assert_close(y, ref.layer_norm(h, w, b, 1e-5))
                x2, r2 = x.clone(), r.clone()
                fusekit.fused_add_rms_norm_(x2, r2, w)
                assert torch.equal(r2, ref.fused_add(x, r))
                xg = x.float().requires_grad_()
                fusekit.rms_norm(xg, w.float()).sum().backward()
                assert xg.grad.isfinite().all()
    print(json.dumps({{"info": fusekit.build_info(), "ops": sorted(set(rec.ops)),
                       "warnings": [str(w.message) for w in caught
                                    if "fusekit" in str(w.message).lower()]}}))
""")


def run_probe(tmp_path, python_dir=PYTHON_DIR, library=INFO["library"]["path"], **env_changes):
    """Runs PROBE with the package from `python_dir`, FUSEKIT_LIBRARY=`library` (default: the
    library this session loaded; None: unset) and the environment changes; returns its JSON
    summary."""
    env = dict(os.environ)
    for key in ("FUSEKIT_DISABLE", "FUSEKIT_DISABLE_OPS", "FUSEKIT_LIBRARY"):
        env.pop(key, None)
    env["PYTHONPATH"] = str(python_dir)
    if library:
        env["FUSEKIT_LIBRARY"] = str(library)
    env.update(env_changes)
    done = subprocess.run([sys.executable, "-c", PROBE.format(tests=TESTS_DIR)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_disable_everything(tmp_path):
    out = run_probe(tmp_path, FUSEKIT_DISABLE="1")
    assert out["info"]["disabled"] and not out["info"]["library"]["loaded"]
    assert out["info"]["backends"] == []
    assert out["ops"] == []  # no fusekit operator ran
    assert out["warnings"] == []  # asked for: nothing to warn about


@pytest.mark.skipif(not INFO["library"]["loaded"], reason="needs the compiled library")
def test_disable_some_ops(tmp_path):
    out = run_probe(tmp_path, FUSEKIT_DISABLE_OPS="rms_norm, layer_norm")
    assert out["info"]["disabled_ops"] == ["layer_norm", "rms_norm"]
    ran = {op.removesuffix("_out") for op in out["ops"]}  # without grad, the out= forms run
    # Nor their forms with statistics and backward passes (the probe's gradient call).
    assert not [op for op in ran if op.startswith(("rms_norm", "layer_norm"))], ran
    assert "fused_add_rms_norm" in ran and "fused_add_layer_norm" in ran
    assert out["warnings"] == []


def test_missing_library(tmp_path):
    package = tmp_path / "pkg"
    shutil.copytree(os.path.join(PYTHON_DIR, "fusekit"), package / "fusekit",
                    ignore=shutil.ignore_patterns("*.so", "*.json", "__pycache__"))
    out = run_probe(tmp_path, python_dir=package, library=None)
    reason = out["info"]["library"]["reason"]
    assert "libfusekit_torch.so) is not installed" in reason
    assert out["ops"] == []
    # One warning per op family, each naming the reason, never repeated.
    assert sorted(w.split(":")[0] for w in out["warnings"]) == [
        "fusekit.fused_add_layer_norm", "fusekit.fused_add_rms_norm", "fusekit.layer_norm",
        "fusekit.rms_norm"]
    assert all(reason in w for w in out["warnings"])


def test_unknown_disabled_op_families_are_ignored_with_a_warning(tmp_path):
    out = run_probe(tmp_path, FUSEKIT_DISABLE_OPS="rms_norm,rmsnorm")
    assert out["info"]["disabled_ops"] == ["rms_norm"]
    assert [w for w in out["warnings"] if "unknown op families ['rmsnorm']" in w], out["warnings"]


def test_library_path_that_does_not_exist(tmp_path):
    """FUSEKIT_LIBRARY is the one place looked at when set: a wrong path is the reason given, not
    passed over for the packaged library."""
    out = run_probe(tmp_path, library=tmp_path / "no_such_dir" / "libfusekit_torch.so")
    reason = out["info"]["library"]["reason"]
    assert reason.startswith("FUSEKIT_LIBRARY is ") and reason.endswith(", which does not exist")
    assert out["ops"] == [] and all(reason in w for w in out["warnings"])


@pytest.mark.skipif(not INFO["library"]["loaded"], reason="needs the compiled library")
def test_library_built_for_a_newer_torch(tmp_path):
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    shutil.copy(INFO["library"]["path"], lib_dir / "libfusekit_torch.so")
    build = dict(INFO["build"], torch_version="99.0.0")
    (lib_dir / "fusekit_build_info.json").write_text(json.dumps(build))
    out = run_probe(tmp_path, library=lib_dir / "libfusekit_torch.so")
    assert not out["info"]["library"]["loaded"]
    assert "built against PyTorch 99.0.0" in out["info"]["library"]["reason"]
    assert out["ops"] == [] and len(out["warnings"]) == 4


def test_broken_library_file(tmp_path):
    lib = tmp_path / "libfusekit_torch.so"
    lib.write_bytes(b"not a shared library")
    (tmp_path / "fusekit_build_info.json").write_text(json.dumps(
        {"torch_version": "2.10.0", "gpu_backend": "none", "torch_gpu_kernels": False}))
    out = run_probe(tmp_path, library=lib)
    assert f"loading {lib} failed" in out["info"]["library"]["reason"]
    assert out["ops"] == []


# The eager implementations under torch.compile(fullgraph=True): a model compiled where the
# kernels are disabled (or missing) must trace as it does with them, the fp8 forms included
# (rows holding NaN, whose codes the eager path writes as the format's NaN).
COMPILE_PROBE = textwrap.dedent("""
    import torch
    import fusekit
    assert not fusekit.build_info()["library"]["loaded"]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 77, generator=g).bfloat16()
    x[1, 5] = float("nan")
    r = torch.randn(3, 77, generator=g).bfloat16()
    w = torch.randn(77, generator=g).bfloat16()
    gu = torch.randn(3, 154, generator=g).bfloat16()
    gu[2, 0] = float("nan")
    s = torch.tensor([0.05])

    def layer(x, r, w, gu, s):
        q1, s1 = fusekit.rms_norm_quant_fp8(x, w, format="e4m3fnuz")
        r2 = r.clone()  # updated in place to x + r
        q2, s2 = fusekit.fused_add_rms_norm_quant_fp8(x, r2, w, format="e4m3fn")
        q3 = fusekit.rms_norm_quant_fp8_static(x, w, s, format="e4m3fn")
        q4, s4 = fusekit.silu_and_mul_quant_fp8(gu, format="e4m3fn", scale_upper_bound=0.5)
        q5, s5 = fusekit.gelu_and_mul_quant_fp8(gu, format="e4m3fnuz")
        return [t.view(torch.uint8) if t.element_size() == 1 else t
                for t in (q1, s1, q2, r2, s2, q3, q4, s4, q5, s5)]

    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    for a, e in zip(compiled(x, r, w, gu, s), layer(x, r, w, gu, s)):
        assert torch.equal(a, e) or torch.equal(a.isnan(), e.isnan()) and torch.equal(
            a.nan_to_num(), e.nan_to_num()), (a, e)
    print("ok")
""")


def test_eager_fp8_forms_compile_in_one_graph(tmp_path):
    env = dict(os.environ, FUSEKIT_DISABLE="1", PYTHONPATH=str(PYTHON_DIR))
    done = subprocess.run([sys.executable, "-c", COMPILE_PROBE], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


@pytest.mark.skipif(not INFO["library"]["loaded"], reason="needs the compiled library")
def test_unsupported_dtypes_fall_back_with_one_warning(gen):
    x = randn((3, 64), torch.float64, "cpu", gen)
    w = randn((64,), torch.float64, "cpu", gen)
    with pytest.warns(RuntimeWarning, match="no fusekit kernels for x of dtype torch.float64"):
        with OpRecorder() as rec:
            y = fusekit.layer_norm(x, w, None)
    assert rec.ops == []
    ref.assert_close(y, ref.layer_norm(x, w, None, 1e-5), dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fusekit.layer_norm(x, w, None)  # the same reason again: no second warning
    # float16 x with a bfloat16 weight has no kernel either: the eager code computes it.
    xh = randn((3, 64), torch.float16, "cpu", gen)
    with pytest.warns(RuntimeWarning, match="torch.float16 x with torch.bfloat16 weight"):
        y = fusekit.rms_norm(xh, w.bfloat16())
    ref.assert_close(y, ref.rms_norm(xh, w.bfloat16(), 1e-6))


@pytest.mark.skipif(not INFO["library"]["loaded"], reason="needs the compiled library")
def test_tensors_of_a_device_without_kernels_fall_back_and_cpu_tensors_do_not(gen):
    # The direct path remembers, per device kind and dtypes, whether kernels serve a call: meta
    # tensors' fallback must not send CPU tensors of the same dtypes to the eager code, nor a CPU
    # call's kernels take meta tensors.
    x = randn((2, 64), torch.bfloat16, "cpu", gen)
    w = randn((64,), torch.bfloat16, "cpu", gen)
    for device in ("meta", "cpu", "meta", "cpu"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the meta calls' one fallback warning
            with OpRecorder() as rec:
                y = fusekit.rms_norm(x.to(device), w.to(device))
                u = fusekit.silu_and_mul(torch.cat([x, x], -1).to(device))
        assert y.device.type == device and y.shape == x.shape
        assert u.device.type == device and u.shape == x.shape
        assert rec.ops == ([] if device == "meta" else ["rms_norm_out", "silu_and_mul_out"])
        if device == "cpu":
            ref.assert_close(y, ref.rms_norm(x, w, 1e-6))
