#!/usr/bin/env bash
# Checks scripts/sanitize_tests.sh on any machine, GPU or not: a stand-in for compute-sanitizer
# runs the test binary and then reports as the real tool does, or reports an error, or dies
# before its summary, or makes no GPU call, for tests chosen by name. The script must pass a clean
# run, count a test skipped before any GPU call as skipped, and fail, naming exactly the bad tests,
# for an error report, a process that died, a failing test, and a test that ran without a GPU
# call. Without this, a sanitizer run that never looked at its logs would pass on every GPU.
#
#   tests/scripts/sanitize_tests_check.sh TEST_BINARY
set -uo pipefail
binary=$1
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/sanitize_tests.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
# The stand-in: the tool's options, then the binary and its --gtest_filter=NAME. FAKE_ERROR,
# FAKE_DIE, FAKE_FAIL, FAKE_NO_GPU (the test runs but calls no GPU API) and FAKE_SKIP (gtest skips
# it before any GPU call) are substrings of the test names it treats so. The real tool ends a
# process that made no GPU call with the line below and exit code 255.
cat > "$work/bin/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
tool=memcheck
while [[ $1 == --* ]]; do
  case $1 in
    --tool) tool=$2; shift 2 ;;
    --error-exitcode | --leak-check | --num-cuda-barriers) shift 2 ;;
    *) shift ;;
  esac
done
name=${2#--gtest_filter=}
[ -n "${FAKE_ORDER_LOG:-}" ] && echo "$name" >> "$FAKE_ORDER_LOG"
echo "========= COMPUTE-SANITIZER"
no_gpu_call="========= Error: Target application terminated before first instrumented API call"
if [[ -n ${FAKE_SKIP:-} && $name == *"$FAKE_SKIP"* ]]; then
  printf '[  SKIPPED ] %s (0 ms)\n[  PASSED  ] 0 tests.\n[  SKIPPED ] 1 test, listed below:\n' \
    "$name"
  echo "$no_gpu_call"
  exit 255
fi
if [[ -n ${FAKE_FAIL:-} && $name == *"$FAKE_FAIL"* ]]; then
  "$@"
  echo "[  FAILED  ] $name (0 ms)"
  rc=1
else
  "$@"
  rc=$?
fi
if [[ -n ${FAKE_DIE:-} && $name == *"$FAKE_DIE"* ]]; then exit 137; fi
if [[ -n ${FAKE_NO_GPU:-} && $name == *"$FAKE_NO_GPU"* ]]; then
  echo "$no_gpu_call"
  exit 255
fi
if [[ -n ${FAKE_ERROR:-} && $name == *"$FAKE_ERROR"* ]]; then
  echo "========= Invalid __global__ read of size 4 bytes"
  echo "========= ERROR SUMMARY: 1 error"
  exit 1
fi
if [ "$tool" = racecheck ]; then
  echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
else
  echo "========= ERROR SUMMARY: 0 errors"
fi
exit $rc
EOF
chmod +x "$work/bin/compute-sanitizer"

failures=0
expect() {  # description expected_rc expected_failed_count expected_skipped tool [env...]
  local what=$1 want_rc=$2 want_failed=$3 want_skipped=$4 tool=$5; shift 5
  local out rc failed
  out=$(env PATH="$work/bin:$PATH" SANITIZE_FILTER='Half.*:FastDivide.*' SANITIZE_JOBS=2 "$@" \
        bash "$script" "$tool" "$binary" "$work/logs" 2>&1)
  rc=$?
  failed=$(grep -c '^FAILED: ' <<< "$out")
  skipped=$(sed -n "s/^$tool: [0-9]* tests clean, \([0-9]*\) skipped, .*/\1/p" <<< "$out")
  if [ "$rc" -ne "$want_rc" ] || [ "$failed" -ne "$want_failed" ] ||
     [ "${skipped:-none}" != "$want_skipped" ]; then
    echo "FAIL: $what: rc $rc (expected $want_rc), $failed tests named failed (expected" \
      "$want_failed), ${skipped:-no} skipped (expected $want_skipped)"
    echo "    ${out//$'\n'/$'\n'    }"
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}
# Half.* has four tests and FastDivide.* four (tests/cpp/test_half.cc, test_fast_divide.cc).
expect "a clean memcheck run passes" 0 0 0 memcheck
expect "a clean racecheck run passes" 0 0 0 racecheck
expect "a test skipped before any GPU call is skipped" 0 0 1 synccheck \
  FAKE_SKIP=FastDivide.EveryDivisor
expect "an error report fails its tests" 1 4 0 memcheck FAKE_ERROR=Half.
expect "a process that died fails its test" 1 1 0 racecheck FAKE_DIE=FastDivide.EveryDivisor
expect "a failing test fails" 1 1 0 memcheck FAKE_FAIL=Half.RoundsToNearestEven
expect "a test that ran without a GPU call fails" 1 1 0 memcheck \
  FAKE_NO_GPU=Half.RoundsToNearestEven

# SANITIZE_TIMES: the tests it does not name first, in listing order, then the named ones longest
# first; each run writes LOG_DIR/times.txt, which the next may read from the same LOG_DIR.
printf '%s\n' "3 Half.RoundsToNearestEven" "7 FastDivide.LargeAndRandomDivisors" "not a time" \
  "1 Half.OverflowAndSpecials" > "$work/times.txt"
expected="Half.Fp16RoundTripsEveryPattern Half.Bf16RoundTripsEveryPattern"
expected+=" FastDivide.EveryDivisorUpTo8192 FastDivide.PowersOfTwoAndNeighbours"
expected+=" FastDivide.AllNumeratorsForTheLaunchSizesOfOneRow FastDivide.LargeAndRandomDivisors"
expected+=" Half.RoundsToNearestEven Half.OverflowAndSpecials"
for times in "$work/times.txt" "$work/logs/times.txt"; do
  rm -f "$work/order.log"
  env PATH="$work/bin:$PATH" SANITIZE_FILTER='Half.*:FastDivide.*' SANITIZE_JOBS=1 \
    SANITIZE_TIMES="$times" FAKE_ORDER_LOG="$work/order.log" \
    bash "$script" memcheck "$binary" "$work/logs" > "$work/order.out" 2>&1
  rc=$?
  order=$(tr '\n' ' ' < "$work/order.log" 2>/dev/null)
  if [ "$times" = "$work/times.txt" ] && [ "$rc" -eq 0 ] && [ "${order% }" = "$expected" ]; then
    echo "ok: SANITIZE_TIMES starts unnamed tests first, then the longest"
  elif [ "$times" != "$work/times.txt" ] && [ "$rc" -eq 0 ] &&
       [ "$(wc -l < "$work/order.log")" -eq 8 ] &&
       [ "$(wc -l < "$work/logs/times.txt")" -eq 8 ]; then
    echo "ok: a run's times.txt orders the next run in the same LOG_DIR"
  else
    echo "FAIL: SANITIZE_TIMES=$times: rc $rc, order: $order"
    sed 's/^/    /' "$work/order.out"
    failures=$((failures + 1))
  fi
done
[ "$failures" -eq 0 ] || exit 1
