#!/usr/bin/env bash
# fusekit_bench's fused adds on a float32 residual, on the CPU (any machine): they run when --ops
# names them or a shapes file lists them, not with their 16-bit-residual namesakes of the default
# shapes, and each row's bytes are x read and written in x's dtype, the residual read and written
# in float32, and the weight (and LayerNorm's bias) once.
#
#   tests/scripts/bench_fp32_residual_check.sh BENCH_BINARY
set -uo pipefail
# shellcheck source=bench_check_common.sh
source "$(dirname "$0")/bench_check_common.sh"  # $bench, $work, fail

ops=fused_add_rms_norm_fp32_residual,fused_add_layer_norm_fp32_residual
for dtype in bf16 fp32; do
  "$bench" --cpu --ops "$ops" --M 1,3 --N 1,769 --dtype "$dtype" --json "$work/$dtype.json" \
    > "$work/out.txt" 2>&1 || fail "--ops $ops --dtype $dtype: exit $? ($(tail -2 "$work/out.txt"))"
done
# A shapes file that lists the 16-bit-residual op selects it alone; one that lists a float32 one
# selects that one.
printf '{"norm": {"ops": ["fused_add_layer_norm"], "M": [2], "N": [16]}}' > "$work/plain.json"
"$bench" --cpu --shapes "$work/plain.json" --json "$work/plain-out.json" > "$work/out.txt" 2>&1 ||
  fail "shapes file of fused_add_layer_norm: exit $?"
printf '{"norm": {"ops": ["fused_add_rms_norm_fp32_residual"], "M": [2], "N": [16]}}' \
  > "$work/f32.json"
"$bench" --cpu --shapes "$work/f32.json" --json "$work/f32-out.json" > "$work/out.txt" 2>&1 ||
  fail "shapes file of fused_add_rms_norm_fp32_residual: exit $?"
python3 - "$work" <<'PY' || fail "the float32-residual rows are not as described above"
import json, sys
work = sys.argv[1]
size = {"bf16": 2, "fp32": 4}
params = {"fused_add_rms_norm_fp32_residual": 1, "fused_add_layer_norm_fp32_residual": 2}
for dtype, s in size.items():
    rows = json.load(open(f"{work}/{dtype}.json"))["rows"]
    seen = sorted((r["op"], tuple(r["shape"])) for r in rows)
    want = sorted((op, (m, n)) for op in params for m in (1, 3) for n in (1, 769))
    assert seen == want, (dtype, seen)
    for r in rows:
        m, n = r["shape"]
        bytes_ = 2 * m * n * s + 2 * m * n * 4 + params[r["op"]] * n * s
        assert r["dtype"] == dtype and r["bytes"] == bytes_, (r, bytes_)
ops = [r["op"] for r in json.load(open(f"{work}/plain-out.json"))["rows"]]
assert ops == ["fused_add_layer_norm", "fused_add_layer_norm_oop"], ops
ops = [r["op"] for r in json.load(open(f"{work}/f32-out.json"))["rows"]]
assert ops == ["fused_add_rms_norm_fp32_residual"], ops
PY
echo "bench_fp32_residual_check: OK"
