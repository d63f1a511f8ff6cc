"""What the benchmark compares fusekit with (fusekit.bench.baselines): torch.compile in each of
its modes (per hidden size, shared over all shapes, per shape) compiled as the mode says and
checked against eager; the seed kernels loaded, or reported as skipped or failed with the reason;
and the comparison of each implementation's outputs with eager's (fp8 codes within two steps, an
in-place input put back before each checked call, outputs of another dtype refused)."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from bench_support import FAKE_SEED, SEEDED, check_row, run_bench


def test_act_compile_on_cpu(tmp_path):
    # torch.compile of the eager formulas, plain and fp8, through the same loop as the norms.
    proc, out_json, _ = run_bench(tmp_path, "--quick", "--device", "cpu", "--ops",
                                  "silu_and_mul,silu_and_mul_quant_fp8", "--M", "8", "--N", "64")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out_json.read_text())["rows"]
    assert [(r["op"], r["M"], r["N"]) for r in rows] == [("silu_and_mul", 8, 64),
                                                          ("silu_and_mul_quant_fp8", 8, 64)]
    for row in rows:
        check_row(row, "cpu")


def test_compile_per_shape_specialises_each_shape(tmp_path):
    # A fresh torch.compile(dynamic=False) for each shape: every shape's compile row is timed and
    # checked against eager, and the JSON records the mode.
    ns = (32, 48, 64)
    proc, out_json, _ = run_bench(tmp_path, "--quick", "--device", "cpu", "--ops", "rms_norm",
                                  "--M", "4", "--N", ",".join(map(str, ns)),
                                  "--impls", "fusekit,eager,compile", "--compile", "per-shape")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out_json.read_text())
    assert doc["env"]["options"]["compile"] == "per-shape"
    rows = doc["rows"]
    assert [(r["op"], r["M"], r["N"]) for r in rows] == [("rms_norm", 4, n) for n in ns]
    for row in rows:
        check_row(row, "cpu")
        assert "time_us" in row["results"]["compile"], row["results"]["compile"]


@pytest.mark.parametrize("mode", ["per-n", "shared"])
def test_compile_per_n_keeps_the_hidden_size_fixed(monkeypatch, mode):
    # The default per-n mode: each hidden size gets kernels compiled for that N, shared over the
    # batch sizes (M dynamic from the second one on). In shared mode the second N recompiles
    # every size as dynamic, the general kernels a model of one hidden size never runs.
    from fusekit.bench import baselines

    graphs = []  # per compiled graph: its tensor inputs' sizes, "s" where symbolic

    def recording_backend(gm, example_inputs):
        sizes = []
        for node in gm.graph.nodes:
            value = node.meta.get("example_value")
            if node.op == "placeholder" and isinstance(value, torch.Tensor):
                sizes.append(tuple("s" if isinstance(d, torch.SymInt) else int(d)
                                   for d in value.shape))
        graphs.append(sizes)
        return gm.forward

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: real_compile(
        fn, backend=recording_backend, **kw))
    torch._dynamo.reset()
    impls = baselines.Implementations("cpu", ("compile",), None, mode)
    spec = baselines.OPS["rms_norm"]
    try:
        for n in (32, 48):
            for m in (4, 8, 16):
                args = spec.make_args(m, n, torch.float32, "cpu")
                got = impls.for_op(spec, (m, n))["compile"](*args)
                torch.testing.assert_close(got, spec.eager(*args))
    finally:
        torch._dynamo.reset()  # no entry compiled by the recording backend outlives the test
    x_sizes = [sizes[0] for sizes in graphs]  # x [M, N] is the first input
    if mode == "per-n":
        assert x_sizes == [(4, 32), ("s", 32), (4, 48), ("s", 48)], graphs
    else:
        assert x_sizes == [(4, 32), ("s", 32), ("s", "s")], graphs


@pytest.mark.parametrize("mode", ["per-n", "shared", "per-shape"])
def test_run_header_says_how_torch_compile_was_compiled(mode):
    # The compile column's numbers depend on the mode (shared ran dynamic-size kernels from the
    # second N on), so the run's header names it wherever that column is in the table.
    from fusekit.bench import baselines, report

    env = {"gpu": None, "cpu": "x86_64", "torch": torch.__version__, "triton": None,
           "fusekit": "0", "fusekit_build": {}, "commit": {"commit": "abc1234"},
           "timing": "host", "options": {"compile": mode, "impls": ["fusekit", "compile"]}}
    lines = report.summary(env, 1.0).splitlines()
    named = [line for line in lines if line.startswith("torch.compile:")]
    assert named == [f"torch.compile: --compile {mode}, {baselines.COMPILE_MODE_NOTES[mode]}"]
    others = [m for m in baselines.COMPILE_MODES if m != mode]
    assert not any(f"--compile {m}," in line for line in lines for m in others)
    env["options"]["impls"] = ["fusekit", "eager"]  # no compile column: nothing to say
    assert not any(line.startswith("torch.compile:")
                   for line in report.summary(env, 1.0).splitlines())


def test_compile_mode_is_checked(tmp_path):
    proc, _, _ = run_bench(tmp_path, "--quick", "--device", "cpu", "--compile", "sometimes")
    assert proc.returncode != 0
    assert "--compile" in proc.stderr


def test_seed_loading(tmp_path, monkeypatch):
    from fusekit.bench import baselines

    seed = ("seed_triton",)
    (tmp_path / "seed_triton.py").write_text(FAKE_SEED)
    impls = baselines.Implementations("cuda", seed, str(tmp_path))
    table = {op: impls.for_op(baselines.OPS[op]) for op in baselines.OPS}
    assert table["silu_and_mul"]["seed_triton"].__module__ == "seed_triton"
    missing = table["gelu_tanh_and_mul"]["seed_triton"]
    assert missing.kind == "error" and "gelu_tanh_and_mul_triton" in missing.why
    assert [op for op in baselines.OPS if "seed_triton" in table[op]] == list(SEEDED)
    x = torch.randn(3, 16)
    want = baselines.OPS["silu_and_mul"].eager(x)
    assert torch.equal(table["silu_and_mul"]["seed_triton"](x), want)

    cpu = baselines.Implementations("cpu", seed, str(tmp_path))
    assert cpu.for_op(baselines.OPS["silu_and_mul"])["seed_triton"].kind == "skipped"
    nowhere = baselines.Implementations("cuda", seed, str(tmp_path / "nowhere"))
    not_run = nowhere.for_op(baselines.OPS["rms_norm"])["seed_triton"]
    assert not_run.kind == "error" and "seed_triton.py" in not_run.why
    unseeded = baselines.Implementations("cuda", seed, None)
    assert "seed_triton" not in unseeded.for_op(baselines.OPS["silu_and_mul"])

    # A seed file whose `import triton` fails: skipped, saying triton is missing.
    (tmp_path / "seed_triton.py").write_text("import triton\n" + FAKE_SEED)
    monkeypatch.setitem(sys.modules, "triton", None)
    no_triton = baselines.Implementations("cuda", seed, str(tmp_path))
    not_run = no_triton.for_op(baselines.OPS["silu_and_mul"])["seed_triton"]
    assert not_run.kind == "skipped" and "triton is not installed" in not_run.why


def test_in_place_fp8_form_gets_its_inputs_back():
    # fused_add_rms_norm_quant_fp8 updates residual in place: each implementation's checked call
    # must see the residual eager's reference saw, which the benchmark puts back before it; a call
    # on the updated residual is caught by the comparison.
    from fusekit.bench import baselines

    torch.manual_seed(0)
    spec = baselines.OPS["fused_add_rms_norm_quant_fp8"]
    args = spec.make_args(8, 256, torch.bfloat16, "cpu")
    snapshot = spec.inputs_snapshot(args)
    want = spec.reference(spec.eager(*args), 8)
    assert not torch.equal(args[1], snapshot)  # eager's call added x into residual
    stale = spec.compare(spec.eager(*args), want)
    assert not stale["within_tolerance"], stale
    spec.restore_inputs(args, snapshot)
    assert torch.equal(args[1], snapshot)
    check = spec.compare(spec.fusekit_fn()(*args), want)
    assert check["within_tolerance"], check
    plain = baselines.OPS["rms_norm_quant_fp8"]
    assert plain.inputs_snapshot(plain.make_args(8, 256, torch.bfloat16, "cpu")) is None
    assert (plain.shapes_name, spec.shapes_name) == ("rms_norm", "fused_add_rms_norm")


def test_fp8_compare_allows_two_steps():
    from fusekit.bench import baselines

    spec = baselines.OPS["silu_and_mul_quant_fp8"]
    x = torch.randn(16, 256, dtype=torch.bfloat16)
    q, scale = spec.eager(x)
    bits = q.view(torch.uint8)
    nonzero = (bits & 0x7F) > 0
    # Magnitude one code down (codes of a sign are ordered like their magnitudes).
    one_down = torch.where(nonzero, bits - 1, bits).to(torch.uint8).view(torch.float8_e4m3fn)
    # Two codes down within a binade (mantissa >= 2), where the grid's step is uniform; three
    # codes down anywhere.
    two_down = torch.where((bits & 0x07) >= 2, bits - 2, bits).to(torch.uint8)
    three_down = torch.where((bits & 0x7F) > 2, bits - 3, bits).to(torch.uint8)
    check = spec.compare((one_down, scale), spec.reference((q, scale), 8))
    assert check["within_tolerance"] and 0.99 < check["fp8_max_steps_vs_eager"] <= 1.0, check
    check = spec.compare((two_down.view(torch.float8_e4m3fn), scale), (q, scale))
    assert check["within_tolerance"] and check["fp8_max_steps_vs_eager"] <= 2.0, check
    check = spec.compare((three_down.view(torch.float8_e4m3fn), scale), (q, scale))
    assert not check["within_tolerance"] and check["fp8_max_steps_vs_eager"] > 2.5, check
    check = spec.compare((q, scale * 1.01), (q, scale))
    assert not check["within_tolerance"], check
    assert spec.compare(spec.fusekit_fn()(x), (q, scale))["within_tolerance"]


@pytest.mark.parametrize("op, got_dtype", [("rms_norm", torch.float32),
                                           ("silu_and_mul", torch.bfloat16)])
def test_compare_rejects_outputs_of_another_dtype(op, got_dtype):
    """An implementation whose outputs differ in dtype from eager's does other work than the one
    timed against it (the seed kernels write bfloat16 whatever x's dtype: half the bytes of a
    float32 output), so its measurement must not stand beside the others as the same op."""
    from fusekit.bench import baselines

    spec = baselines.OPS[op]
    dtype = torch.float32 if got_dtype == torch.bfloat16 else torch.bfloat16
    args = spec.make_args(4, 8, dtype, "cpu")
    want = spec.reference(spec.eager(*args), 4)
    got = tuple(t.to(got_dtype) for t in baselines._outputs(spec.eager(*args)))
    with pytest.raises(ValueError, match="dtype"):
        spec.compare(got if len(got) > 1 else got[0], want)
    assert spec.compare(spec.eager(*args), want)["max_abs_diff_vs_eager"] == 0
