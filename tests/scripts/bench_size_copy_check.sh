#!/usr/bin/env bash
# fusekit_bench --size-copy: on a GPU, each case also gets a device copy moving its own bytes,
# shown as a "% size copy" column and as copy_us / pct_size_copy in the JSON (pct_size_copy =
# 100 x copy_us / us); without one (or with --cpu) the option is noted as GPU-only and changes
# nothing. Without --size-copy there is no such column or key.
#
#   tests/scripts/bench_size_copy_check.sh BENCH_BINARY
set -uo pipefail
# shellcheck source=bench_check_common.sh
source "$(dirname "$0")/bench_check_common.sh"  # $bench, $work, fail

check_json() {  # json expect_copy
  python3 - "$1" "$2" <<'PY' || fail "the JSON ($2)"
import json, math, sys
doc = json.load(open(sys.argv[1]))
expect = sys.argv[2] == "copy"
rows = doc["rows"]
assert rows, doc
for r in rows:
    if not expect:
        assert "copy_us" not in r and "pct_size_copy" not in r, r
        continue
    assert r["copy_us"] > 0, r
    assert math.isclose(r["pct_size_copy"], 100 * r["copy_us"] / r["us"], rel_tol=1e-9), r
PY
}

# The usage text is a printf format: its option line must print as written.
"$bench" --help | grep -q "report each case as % of it$" ||
  fail "--help: the --size-copy line does not print as written"

args=(--ops rms_norm,silu_and_mul_quant_fp8 --M 3,257 --N 64,769)
"$bench" --cpu --size-copy "${args[@]}" --json "$work/cpu.json" > "$work/cpu.txt" \
  2> "$work/cpu.err" || fail "--cpu --size-copy: exit $? ($(tail -3 "$work/cpu.err"))"
grep -q "note: --size-copy applies to GPU runs only; ignored" "$work/cpu.err" ||
  fail "--cpu --size-copy: no note that the option is GPU-only"
grep -q "size copy" "$work/cpu.txt" &&
  fail "--cpu --size-copy: the CPU table has a size-copy column"
check_json "$work/cpu.json" none

"$bench" "${args[@]}" --runs 5 --json "$work/plain.json" > "$work/plain.txt" 2> "$work/plain.err" ||
  fail "no --size-copy: exit $? ($(tail -3 "$work/plain.err"))"
grep -q "size copy" "$work/plain.txt" && fail "no --size-copy: the table has a size-copy column"
check_json "$work/plain.json" none

mode=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['env']['mode'])" \
  "$work/plain.json")
if [ "$mode" = gpu ]; then
  "$bench" --size-copy "${args[@]}" --runs 5 --json "$work/gpu.json" > "$work/gpu.txt" \
    2> "$work/gpu.err" || fail "--size-copy on the GPU: exit $? ($(tail -3 "$work/gpu.err"))"
  grep -q "% size copy" "$work/gpu.txt" || fail "--size-copy on the GPU: no size-copy column"
  grep -q "a copy of the same bytes" "$work/gpu.err" ||
    fail "--size-copy on the GPU: the progress lines do not give the copy"
  check_json "$work/gpu.json" copy
  echo "GPU: --size-copy timed a copy for each of $(grep -c '^\[' "$work/gpu.err") cases"
else
  echo "no GPU: --size-copy checked as ignored"
fi
echo "OK"
