"""The benchmark command line, run as a user runs it (`python -m fusekit bench` in a subprocess):
it must finish on the CPU, and on the GPU when there is one, and leave a JSON document whose rows
hold a positive time for every implementation that ran, a table on stdout, and a PNG when
matplotlib is installed. Without matplotlib or tqdm it must still finish, and when fusekit's own
calls fail, or give fp8 codes off eager's, it must say so in its exit status. Both op families
run, each with its fp8 forms: the norms and the gated activations (tiny shapes on the CPU), and
the seed kernels, which need a GPU, are reported as skipped without one."""

from __future__ import annotations

import json
import os

import pytest
import torch

import fusekit
from bench_support import (ACT_OPS, DEVICES, FAKE_SEED, HAS_MATPLOTLIB, OPS, QUICK_M, QUICK_N,
                           REPO_SHAPES, SEEDED, check_row, positive, run_bench)


@pytest.mark.parametrize("device", DEVICES)
def test_quick_run_writes_table_json_and_plot(tmp_path, device):
    # On the CPU the norms only (torch.compile of each op takes many seconds there); the gated
    # activations' CPU runs are the tests below, on tiny shapes.
    ops = OPS + ACT_OPS if device == "cuda" else OPS
    families = () if device == "cuda" else ("--family", "norm")
    proc, out_json, out_png = run_bench(tmp_path, "--quick", "--device", device, *families)
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
    assert shapes == sorted((op, m, QUICK_N) for op in ops for m in QUICK_M)
    for row in doc["rows"]:
        check_row(row, device)
        # No copy of each row's bytes unless --size-copy asks for it.
        assert "copy" not in row
        assert all("pct_size_copy" not in r for r in row["results"].values()), row
    for op in ops:
        assert op in proc.stdout
    assert "copy bandwidth" in proc.stdout and "% size copy" not in proc.stdout
    if device == "cpu":
        assert "CPU" in proc.stdout and "host" in proc.stdout
    if HAS_MATPLOTLIB:
        assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert not out_png.exists() and "matplotlib" in proc.stderr


@pytest.mark.parametrize("device", DEVICES)
def test_size_copy_times_a_copy_of_each_rows_bytes(tmp_path, device):
    # --size-copy: each row also times a copy moving its bytes by its calls' method (graph
    # replay at M <= 256 on a GPU), and each implementation's time is given against it.
    proc, out_json, _ = run_bench(tmp_path, "--quick", "--device", device, "--size-copy",
                                  "--ops", "rms_norm,silu_and_mul_quant_fp8", "--M", "3,257",
                                  "--N", "64,769", "--impls", "fusekit,eager", "--plot", "")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out_json.read_text())
    assert len(doc["rows"]) == 8
    for row in doc["rows"]:
        method = "host" if device == "cpu" else ("graph" if row["M"] <= 256 else "cold")
        copy = row["copy"]
        assert copy["method"] == method, row
        positive(copy, "time_us")
        for name in ("fusekit", "eager"):
            result = row["results"][name]
            assert result["pct_size_copy"] == pytest.approx(
                100 * copy["time_us"] / result["time_us"]), (name, row)
    header = next(line for line in proc.stdout.splitlines() if line.startswith("op "))
    assert header.count("% size copy") == 1, header
    assert header.index("% copy") < header.index("% size copy") < header.index("fusekit x")


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


def test_cpu_runs_skip_calls_past_64_mib_unless_told(tmp_path):
    """The default shapes' largest calls take eager seconds each on a host: on the CPU, calls
    moving more than 64 MiB are skipped (and listed) unless --max-bytes sets another bound
    (--quick's shapes are small enough: test_quick_run_writes_table_json_and_plot)."""
    args = ("--device", "cpu", "--ops", "rms_norm", "--N", "4096", "--impls", "fusekit")
    proc, out_json, _ = run_bench(tmp_path, *args, "--M", "1,8193")  # 8193 rows: over 128 MiB
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out_json.read_text())
    assert [r["M"] for r in doc["rows"]] == [1]
    assert doc["skipped"] == [{"op": "rms_norm", "family": "norm", "M": 8193, "N": 4096,
                               "reason": "max_bytes", "limit": 64 << 20}]
    assert "over --max-bytes (64M on the CPU by default)" in proc.stdout
    # [1, 4096]: x and out 16 KiB, weight 8 KiB: nothing left to run is bad usage (exit 2, as
    # fusekit_bench), not an empty table and success.
    out_json.unlink()
    proc, out_json, _ = run_bench(tmp_path, *args, "--M", "1,2", "--max-bytes", "20K")
    assert proc.returncode == 2 and "no cases to run" in proc.stderr, proc.stderr[-2000:]
    assert not out_json.exists()
    # 0 is no bound, as fusekit_bench reads it (it skipped every call).
    proc, out_json, _ = run_bench(tmp_path, *args, "--M", "1,2", "--max-bytes", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out_json.read_text())
    assert [r["M"] for r in doc["rows"]] == [1, 2] and doc["skipped"] == []
    proc, _, _ = run_bench(tmp_path, *args, "--max-bytes", "lots")
    assert proc.returncode == 2 and "--max-bytes" in proc.stderr


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


def test_act_family_runs_on_cpu(tmp_path):
    # Every gated activation and fp8 form on tiny shapes, with a seed directory: the seed kernels
    # are entries of silu_and_mul and gelu_tanh_and_mul only, skipped (no GPU) with the reason.
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "seed_triton.py").write_text(FAKE_SEED)
    proc, out_json, out_png = run_bench(tmp_path, "--quick", "--device", "cpu", "--family", "act",
                                        "--M", "1,8", "--N", "64", "--impls",
                                        "fusekit,eager,seed_triton", "--seed-dir", str(seeds))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out_json.read_text())
    shapes = sorted((row["op"], row["M"], row["N"]) for row in doc["rows"])
    assert shapes == sorted((op, m, 64) for op in ACT_OPS for m in (1, 8))
    for row in doc["rows"]:
        check_row(row, "cpu", impls=("fusekit", "eager"))
        seed = row["results"].get("seed_triton")
        if row["op"] in SEEDED:
            assert "need a GPU" in seed["skipped"], row
        else:
            assert seed is None, row
    for op in ACT_OPS:
        assert op in proc.stdout
    assert "act_and_mul, bfloat16: x [M, 2N] -> [M, N]" in proc.stdout
    assert "seed_triton  skipped [1]" in proc.stdout and "[1] the seed Triton kernels need a GPU" \
        in proc.stdout
    if HAS_MATPLOTLIB:
        assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rounds_time_each_implementation_in_turn(tmp_path):
    # --rounds 3: every implementation timed three times, its times the median round's.
    proc, out_json, _ = run_bench(tmp_path, "--quick", "--device", "cpu", "--ops",
                                  "rms_norm,silu_and_mul", "--M", "1,8", "--N", "64", "--impls",
                                  "fusekit,eager", "--rounds", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out_json.read_text())
    assert doc["env"]["options"]["rounds"] == 3
    assert len(doc["rows"]) == 4
    for row in doc["rows"]:
        check_row(row, "cpu", impls=("fusekit", "eager"))
        assert list(row["results"]) == ["fusekit", "eager"]
        for result in row["results"].values():
            rounds = result["rounds_us"]
            assert len(rounds) == 3 and all(t > 0 for t in rounds)
            assert result["time_us"] == sorted(rounds)[1]
    # One round (the default) leaves no rounds_us.
    proc, out_json, _ = run_bench(tmp_path, "--quick", "--device", "cpu", "--ops", "rms_norm",
                                  "--M", "1", "--N", "64", "--impls", "fusekit,eager")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for result in json.loads(out_json.read_text())["rows"][0]["results"].values():
        assert "rounds_us" not in result


def test_model_shapes_file_runs(tmp_path):
    # bench/shapes-models.json (the hidden sizes of common models) through --shapes: every N of
    # each family is planned and timed (one row per batch here, on the CPU).
    models = os.path.join(os.path.dirname(REPO_SHAPES), "shapes-models.json")
    if not os.path.exists(models):
        pytest.skip("not running from a source checkout")
    with open(models, encoding="utf-8") as f:
        spec = json.load(f)
    proc, out_json, _ = run_bench(tmp_path, "--device", "cpu", "--shapes", models,
                                  "--ops", "rms_norm,silu_and_mul", "--M", "1", "--impls",
                                  "fusekit,eager")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out_json.read_text())["rows"]
    assert sorted((r["op"], r["N"]) for r in rows) == sorted(
        [("rms_norm", n) for n in spec["norm"]["N"]] +
        [("silu_and_mul", n) for n in spec["act_and_mul"]["N"]])
    for row in rows:
        check_row(row, "cpu", impls=("fusekit", "eager"))


def test_default_runs_every_family(tmp_path):
    proc, out_json, _ = run_bench(tmp_path, "--quick", "--device", "cpu", "--M", "2", "--N", "32",
                                  "--impls", "fusekit")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out_json.read_text())["rows"]
    assert [(r["family"], r["op"]) for r in rows] == (
        [("norm", op) for op in OPS] + [("act_and_mul", op) for op in ACT_OPS])
    assert all("time_us" in r["results"]["fusekit"] for r in rows), rows


def test_fp8_codes_off_eager_fail_the_run(tmp_path):
    # fusekit's fp8 scale doubled in the child: decoded values twice eager's, outside tolerance.
    breaker = ("import fusekit\n"
               "real = fusekit.silu_and_mul_quant_fp8\n"
               "def doubled(*args, **kwargs):\n"
               "    q, scale = real(*args, **kwargs)\n"
               "    return q, scale * 2\n"
               "fusekit.silu_and_mul_quant_fp8 = doubled")
    proc, out_json, _ = run_bench(tmp_path, "--quick", "--device", "cpu", "--ops",
                                  "silu_and_mul_quant_fp8", "--M", "4", "--N", "64", "--impls",
                                  "fusekit,eager", prelude=breaker)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    ours = json.loads(out_json.read_text())["rows"][0]["results"]["fusekit"]
    assert ours["within_tolerance"] is False and ours["scale_max_rel_diff_vs_eager"] > 0.9
    assert "MISMATCH [1]" in proc.stdout and "outside the tolerance" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (("--ops", "no_such_op"), "no_such_op"),
    (("--family", "no_such_family"), "no_such_family"),
    (("--family", "norm", "--ops", "silu_and_mul"), "not in the families"),
    (("--rounds", "0"), "--rounds"),
    # float("inf") parses; int() of it raised OverflowError, a traceback and exit 1.
    (("--max-bytes", "inf"), "--max-bytes"),
    # An empty list fell back to the shapes file's (or every implementation): accepted, ignored.
    (("--M", ""), "--M"),
    (("--N", ","), "--N"),
    (("--impls", ""), "--impls"),
    (("--ops", ""), "--ops"),
    (("--family", ""), "--family"),
])
def test_bad_arguments_exit_2(tmp_path, args, message):
    proc, out_json, _ = run_bench(tmp_path, *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not out_json.exists()


@pytest.mark.parametrize("content, message", [
    ("[1, 2]", "expected a JSON object"),
    ('{"norm": []}', "norm"),
    ('{"norm": {"ops": ["rms_norm"], "M": ["1"], "N": [8]}}', "norm.M"),
    ('{"norm": {"ops": ["rms_norm"], "M": [1.5], "N": [8]}}', "norm.M"),
    ('{"norm": {"ops": ["rms_norm"], "M": [1], "N": [true]}}', "norm.N"),
    ('{"norm": {"ops": "rms_norm", "M": [1], "N": [8]}}', "norm.ops"),
    ('{"norm": {"ops": ["rms_norm"], "M": [1], "N": [8], "skip_if_bytes_over": "1G"}}',
     "skip_if_bytes_over"),
    ('{"norm": {"ops": ["rms_norm"], "M": [1], "N": [8], "dtype": "fp64"}}', "norm.dtype"),
])
def test_bad_shapes_file_exits_2(tmp_path, content, message):
    """A shapes file the benchmark cannot use is bad usage, named, as fusekit_bench says it:
    not a traceback from deep in the run (exit 1) or a run of float or string shapes."""
    shapes = tmp_path / "shapes.json"
    shapes.write_text(content, encoding="utf-8")
    proc, out_json, _ = run_bench(tmp_path, "--shapes", str(shapes), "--device", "cpu",
                                  "--impls", "fusekit", "--no-progress")
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert not out_json.exists()


@pytest.mark.parametrize("forced", [None, "fp16"])
def test_shapes_file_sections_give_their_dtype(tmp_path, forced):
    """A section's "dtype" is its cases' dtype (bf16 where it names none) unless --dtype forces
    one for all, as fusekit_bench reads the same file: one shapes file, the same cases in both
    programs."""
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({
        "norm": {"ops": ["rms_norm"], "M": [3], "N": [64], "dtype": "fp32"},
        "act_and_mul": {"ops": ["silu_and_mul"], "M": [3], "N": [64]}}), encoding="utf-8")
    args = ["--shapes", str(shapes), "--device", "cpu", "--impls", "fusekit,eager",
            "--ops", "rms_norm,silu_and_mul", "--no-progress"] + (
                ["--dtype", forced] if forced else [])
    proc, out_json, _ = run_bench(tmp_path, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    rows = {row["op"]: row for row in json.loads(out_json.read_text())["rows"]}
    want = {"rms_norm": "float16" if forced else "float32",
            "silu_and_mul": "float16" if forced else "bfloat16"}
    assert {op: row["dtype"] for op, row in rows.items()} == want
    size = {"float32": 4, "float16": 2, "bfloat16": 2}
    assert rows["rms_norm"]["bytes"] == size[want["rms_norm"]] * (2 * 3 * 64 + 64)
    assert rows["silu_and_mul"]["bytes"] == size[want["silu_and_mul"]] * (3 * 128 + 3 * 64)
    assert f"norm, {want['rms_norm']}" in proc.stdout


def test_json_writes_no_nan_or_infinity(tmp_path):
    """JSON has no NaN or Infinity: json.dump writes them as bare tokens, which strict readers
    (and the C++ benchmark's reader) reject. A difference against eager of an output that
    overflowed, say, is NaN; such numbers are written as null."""
    from fusekit.bench import report

    row = {"op": "rms_norm", "family": "norm", "M": 1, "N": 8, "dtype": "float16", "bytes": 48,
           "results": {"fusekit": {"time_us": 1.0, "method": "host",
                                   "max_abs_diff_vs_eager": float("nan"),
                                   "rounds_us": [1.0, float("inf")]}}}
    path = tmp_path / "out.json"
    report.write_json(str(path), {"device": "cpu"}, float("inf"), [row], [])

    def no_constant(name):
        raise ValueError(f"bare {name} token in the JSON")

    doc = json.loads(path.read_text(encoding="utf-8"), parse_constant=no_constant)
    result = doc["rows"][0]["results"]["fusekit"]
    assert result["max_abs_diff_vs_eager"] is None and result["rounds_us"] == [1.0, None]
    assert doc["copy_GBps"] is None
    # The caller's rows as they were: only the document is cleaned.
    assert row["results"]["fusekit"]["rounds_us"][1] == float("inf")


def test_rounds_of_mixed_methods_report_the_cold_time():
    """With --rounds, a graph that captured in some rounds and not in another must not give a
    median of graph and cold times together under the first round's method."""
    from fusekit.bench import cli

    rounds = [{"cold_us": 10.0, "graph_us": 2.0, "time_us": 2.0, "method": "graph"},
              {"cold_us": 11.0, "time_us": 11.0, "method": "cold", "graph_error": "E"},
              {"cold_us": 12.0, "graph_us": 3.0, "time_us": 3.0, "method": "graph"}]
    result = cli._combine(rounds)
    assert (result["method"], result["time_us"], result["cold_us"]) == ("cold", 11.0, 11.0)
    assert "graph_us" not in result and result["rounds_us"] == [2.0, 11.0, 3.0]
    same = cli._combine([rounds[0], rounds[2]])
    assert (same["method"], same["time_us"], same["graph_us"]) == ("graph", 2.5, 2.5)


def test_packaged_shapes_match_the_repository():
    from fusekit.bench import baselines

    packaged = os.path.join(os.path.dirname(fusekit.__file__), "bench", "shapes.json")
    with open(packaged, encoding="utf-8") as f:
        ours = json.load(f)
    assert set(ours["norm"]["ops"]) <= set(OPS)
    assert set(ours["act_and_mul"]["ops"]) <= {spec.shapes_name for spec in
                                               baselines.family_ops("act_and_mul")}
    if not os.path.exists(REPO_SHAPES):
        pytest.skip("not running from a source checkout")
    with open(REPO_SHAPES, encoding="utf-8") as f:
        assert ours == json.load(f), "python/fusekit/bench/shapes.json is out of date"
