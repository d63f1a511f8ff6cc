#!/usr/bin/env bash
# fusekit_bench --row-pad on the CPU backend (any machine): every per-row tensor a strided view of
# a padded buffer, its rows unaligned where the pad is off the 16-byte group. Each op of both
# families must run on such views (a view the library refused would fail the run), with the
# bytes of the unpadded tensors; the table and the JSON must say the rows are padded; and a pad
# that is negative or not a number must be refused as bad usage (exit code 2).
#
#   tests/scripts/bench_row_pad_check.sh BENCH_BINARY
set -uo pipefail
# shellcheck source=bench_check_common.sh
source "$(dirname "$0")/bench_check_common.sh"  # $bench, $work, fail

ops=rms_norm,fused_add_rms_norm,layer_norm,rms_norm_quant_fp8,silu_and_mul,silu_and_mul_quant_fp8
for pad in 5 8; do
  "$bench" --cpu --ops "$ops" --M 3 --N 7,64 --row-pad "$pad" --json "$work/out.json" \
    > "$work/out.txt" 2> "$work/err.txt" ||
    fail "--row-pad $pad: exit $? ($(tail -3 "$work/err.txt"))"
  grep -q "row stride is its width + $pad\$" "$work/out.txt" ||
    fail "--row-pad $pad: the table does not say the rows are padded"
  python3 - "$work/out.json" "$pad" <<'PY' || fail "--row-pad $pad: the JSON"
import json, sys
doc = json.load(open(sys.argv[1]))
pad = int(sys.argv[2])
assert doc["env"]["row_pad"] == pad, doc["env"]
rows = doc["rows"]
assert len(rows) == 12, [(r["op"], r["shape"]) for r in rows]
# bf16 (the default dtype): each input read once and each output written once, as without the
# pad, which moves no bytes (fp8 outputs one byte an element and a float32 scale a row).
expected = {
    "rms_norm": lambda m, n: 2 * (2 * m * n + n),
    "fused_add_rms_norm": lambda m, n: 2 * (4 * m * n + n),
    "layer_norm": lambda m, n: 2 * (2 * m * n + 2 * n),
    "rms_norm_quant_fp8": lambda m, n: 2 * (m * n + n) + m * n + 4 * m,
    "silu_and_mul": lambda m, n: 2 * 3 * m * n,
    "silu_and_mul_quant_fp8": lambda m, n: 2 * 2 * m * n + m * n + 4 * m,
}
for r in rows:
    m, n = r["shape"]
    assert r["us"] > 0, r
    assert r["bytes"] == expected[r["op"]](m, n), r
PY
done
"$bench" --cpu --ops rms_norm --M 1 --N 8 > "$work/out.txt" 2>&1 || fail "no pad: exit $?"
grep -q "row stride" "$work/out.txt" && fail "no pad: the table says the rows are padded"
for bad in -1 x 1.5; do
  "$bench" --cpu --ops rms_norm --M 1 --N 8 --row-pad "$bad" > /dev/null 2>&1
  status=$?
  [ "$status" = 2 ] || fail "--row-pad $bad: exit $status, not 2"
done
# On a GPU: the launch configuration reported (and the --sweep variants timed) must be those of
# the padded views the op runs on, not of contiguous rows: rows 5 bf16 elements (10 bytes) beyond
# N = 64 apart are off the 16-byte group, so the kernels cannot load whole groups ("vec=any"),
# while a pad of 8 keeps rows aligned (vec=8).
"$bench" --ops rms_norm --M 1 --N 8 --runs 5 --json "$work/mode.json" > /dev/null 2>&1 ||
  fail "GPU probe: exit $?"
mode=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['env']['mode'])" \
  "$work/mode.json")
if [ "$mode" = gpu ]; then
  for pad in 5 8; do
    "$bench" --ops rms_norm,fused_add_rms_norm_oop --M 3 --N 64 --row-pad "$pad" --runs 5 \
      --sweep --json "$work/gpu.json" > /dev/null 2> "$work/err.txt" ||
      fail "GPU --row-pad $pad: exit $? ($(tail -3 "$work/err.txt"))"
    python3 - "$work/gpu.json" "$pad" <<'PY' || fail "GPU --row-pad $pad: the launch reported"
import json, sys
doc = json.load(open(sys.argv[1]))
want = "vec=any" if sys.argv[2] == "5" else "vec=8"
for r in doc["rows"]:
    assert r["config"].endswith(want), (r["op"], r["config"], want)
    starred = [v["variant"] for v in r["sweep"] if v["variant"].endswith(" *")]
    assert starred and starred[0].split(" pdl=")[0] == r["config"].split(" vec=")[0], r
PY
  done
  echo "GPU: the padded views' launch configurations checked"
fi
echo "bench_row_pad_check: OK"
