#!/usr/bin/env bash
# Runs one compute-sanitizer tool over the GPU tests, one test per process and several processes
# at once. Why: under racecheck a single norm test takes minutes (every shared-memory access of
# its large batches is checked), while the GPU sits mostly idle between a test's small launches,
# so concurrent processes share it well: with 16 at once on an H200, memcheck and racecheck over
# all 163 GPU tests took about 18 minutes together. A test per process lets a free worker take the
# next test (no shard waits on an unlucky mix of heavy tests). Each test's log is kept; the run
# fails if any test fails, or any log lacks the tool's clean summary.
#
#   scripts/sanitize_tests.sh TOOL TEST_BINARY LOG_DIR [tool options...]
#
# Environment: SANITIZE_FILTER (gtest filter of the tests to run; default: every test that
# launches GPU kernels, without the >2^31-element cases, which take minutes under
# instrumentation), SANITIZE_JOBS (concurrent processes; default: the CPU count, at most 16),
# SANITIZE_TIMES (a previous run's LOG_DIR/times.txt: start the longest tests first).
set -uo pipefail
if [ "${1:-}" = --one ]; then  # internal: one test, one process
  shift
  tool=$1 binary=$2 test=$3 log=$4 start=$SECONDS
  # shellcheck disable=SC2086  # options are words without spaces
  OMP_NUM_THREADS=1 compute-sanitizer --tool "$tool" --error-exitcode 1 $SANITIZE_TOOL_OPTIONS \
      "$binary" --gtest_filter="$test" > "$log" 2>&1
  echo "# rc=$? in $((SECONDS - start)) s" >> "$log"
  exit 0
fi
[ $# -ge 3 ] || { echo "usage: $0 TOOL TEST_BINARY LOG_DIR [tool options...]" >&2; exit 2; }
tool=$1 binary=$2 log_dir=$3; shift 3
filter=${SANITIZE_FILTER:-'*gpu*:NormLaunchShapes.*:ActQuantLaunchShapes.*:-*HugeTensor*'}
nproc_=$(nproc)
jobs=${SANITIZE_JOBS:-$(( nproc_ < 16 ? nproc_ : 16 ))}
# Heaviest first where SANITIZE_TIMES names a file of "seconds test" lines (a previous run's
# LOG_DIR/times.txt): a long test started last holds up the whole run alone. Tests the file does
# not name (new ones) start first. Read before LOG_DIR is emptied, since it may lie there.
times=""
if [ -n "${SANITIZE_TIMES:-}" ]; then
  [ -r "$SANITIZE_TIMES" ] || { echo "SANITIZE_TIMES: cannot read $SANITIZE_TIMES" >&2; exit 2; }
  times=$(cat "$SANITIZE_TIMES")
fi
rm -rf "$log_dir"
mkdir -p "$log_dir"
# gtest lists "Suite." lines, then "  Test  # GetParam() = ..." lines.
"$binary" --gtest_list_tests --gtest_filter="$filter" |
  awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }' > "$log_dir/tests.txt"
count=$(wc -l < "$log_dir/tests.txt")
[ "$count" -gt 0 ] || { echo "no test matches $filter" >&2; exit 1; }
echo "$tool: $count tests, $jobs at a time"
t0=$SECONDS
export SANITIZE_TOOL_OPTIONS="$*"
# order.txt: unnamed tests in listing order, then the named ones, longest first.
printf '%s\n' "$times" |
  awk 'NR == FNR { if (NF == 2 && $1 ~ /^[0-9]+([.][0-9]*)?$/) t[$2] = $1; next }
       { print (($0 in t) ? t[$0] : 1e12), FNR, $0 }' - "$log_dir/tests.txt" |
  sort -k1,1gr -k2,2n | cut -d' ' -f3- > "$log_dir/order.txt"
# Test names hold no spaces: each line is "test log", two words for xargs.
while read -r test; do
  echo "$test $log_dir/$(echo "$test" | tr '/' '_').log"
done < "$log_dir/order.txt" | xargs -L 1 -P "$jobs" bash "$0" --one "$tool" "$binary"
status=0 ran=0 skipped=0
case $tool in
  memcheck) clean='ERROR SUMMARY: 0 errors' ;;
  racecheck) clean='RACECHECK SUMMARY: 0 hazards' ;;
  *) clean='ERROR SUMMARY: 0 errors' ;;
esac
# A process that makes no GPU call gets no summary: the tool prints this and exits with 255.
no_gpu_call='terminated before first instrumented API call'
while read -r test; do
  log="$log_dir/$(echo "$test" | tr '/' '_').log"
  if [ ! -f "$log" ] || grep -q '^\[  FAILED  \]' "$log"; then
    echo "FAILED: $test ($log)"
    status=1
  elif grep -q "$no_gpu_call" "$log"; then
    # Nothing for the tool to check. Fine for a test its parameters skip before any GPU call
    # (a CPU-only case of a GPU suite); any other test here was meant to launch kernels.
    if grep -q '^\[  SKIPPED \] 1 test' "$log"; then
      skipped=$((skipped + 1))
    else
      echo "FAILED: $test made no GPU call ($log)"
      status=1
    fi
  elif ! grep -q "$clean" "$log" || ! grep -q '^# rc=0 in ' "$log"; then
    echo "FAILED: $test ($log)"
    status=1
  elif grep -q '^\[  SKIPPED \] 1 test' "$log"; then
    skipped=$((skipped + 1))
  else
    ran=$((ran + 1))
  fi
done < "$log_dir/tests.txt"
echo "$tool: $ran tests clean, $skipped skipped, in $((SECONDS - t0)) s"
# times.txt: "seconds test", for SANITIZE_TIMES in a later run.
while read -r test; do
  log="$log_dir/$(echo "$test" | tr '/' '_').log"
  sed -n "s|^# rc=[0-9]* in \([0-9]*\) s$|\1 $test|p" "$log" 2>/dev/null
done < "$log_dir/tests.txt" > "$log_dir/times.txt"
echo "$tool: the slowest tests (seconds, with the other processes running beside them; all in" \
  "$log_dir/times.txt):"
sort -rn "$log_dir/times.txt" | head -5 | sed 's/^/  /'
[ $status -eq 0 ] || echo "$tool: failures above; each test's log is under $log_dir"
exit $status
