#!/usr/bin/env bash
# fusekit_bench on the CPU backend under valgrind's memcheck (any machine): every op of both
# families on rows of one element and of an odd width, in each dtype and both fp8 formats, where
# the benchmark's own buffers are the smallest (the fp8 forms' float32 scales over a slot of one
# 16-bit element a row once overflowed it). Any invalid read or write fails the test.
#
#   tests/scripts/bench_memcheck.sh BENCH_BINARY
set -uo pipefail
bench=$1
if ! command -v valgrind >/dev/null 2>&1; then
  echo "SKIP: valgrind is not installed (scripts/install_deps.sh installs it)"
  exit 77
fi
# Every op the benchmark knows (its usage lists them), the fp8 forms included.
ops=$("$bench" --help 2>&1 | sed -n 's/.*known: \([a-z0-9_,]*\).*/\1/p')
[ -n "$ops" ] || { echo "FAIL: no op list in $bench --help" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for dtype in bf16 fp16 fp32; do
  for fp8 in e4m3fn e4m3fnuz; do
    valgrind -q --error-exitcode=9 --log-file="$work/vg.txt" \
      "$bench" --cpu --ops "$ops" --M 1,3 --N 1,7 --dtype "$dtype" --fp8 "$fp8" \
      > "$work/out.txt" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ]; then
      echo "FAIL: --dtype $dtype --fp8 $fp8: exit $rc" >&2
      grep -m 20 -E 'Invalid|at 0x|by 0x' "$work/vg.txt" >&2
      tail -3 "$work/out.txt" >&2
      exit 1
    fi
  done
done
echo "OK: $(echo "$ops" | tr ',' '\n' | wc -l) ops, M 1 and 3, N 1 and 7, three dtypes, two fp8" \
  "formats: no memcheck error"
