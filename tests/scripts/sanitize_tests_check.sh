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
# it before any GPU call) are substrings of the test names it treats so (FAKE_ERROR under the tool
# FAKE_ERROR_TOOL alone, where set). The real tool ends a process that made no GPU call with the
# line below and exit code 255. FAKE_CALL_LOG collects each call's arguments, FAKE_ENV_LOG the
# GPU it was given (CUDA_VISIBLE_DEVICES) and FUSEKIT_TEST_UNDER_SANITIZER.
cat > "$work/bin/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
[ -n "${FAKE_CALL_LOG:-}" ] && echo "$*" >> "$FAKE_CALL_LOG"
[ -n "${FAKE_ENV_LOG:-}" ] &&
  echo "gpu=${CUDA_VISIBLE_DEVICES:-unset} flag=${FUSEKIT_TEST_UNDER_SANITIZER:-unset}" \
    >> "$FAKE_ENV_LOG"
tool=memcheck
while [[ $1 == --* ]]; do
  case $1 in
    --tool) tool=$2; shift 2 ;;
    --error-exitcode | --leak-check | --num-cuda-barriers | --print-limit) shift 2 ;;
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
if [[ -n ${FAKE_ERROR:-} && $name == *"$FAKE_ERROR"* && ${FAKE_ERROR_TOOL:-$tool} == "$tool" ]]
then
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

# SANITIZE_PART=K/P: the parts' queues split the whole queue between them (each test in exactly one
# part under each tool), each part's summary and times.txt cover its own tests alone, a failure
# counts in its own part only, and a malformed part is refused.
rm -f "$work/parts.log"
for k in 1 2; do
  out=$(env PATH="$work/bin:$PATH" SANITIZE_FILTER='Half.*:FastDivide.*' SANITIZE_JOBS=1 \
        SANITIZE_PART="$k/2" FAKE_ORDER_LOG="$work/parts.log" FAKE_FAIL=Half.RoundsToNearestEven \
        bash "$script" memcheck "$binary" "$work/part$k" 2>&1)
  rc=$?
  # Half.RoundsToNearestEven is the third test in listing order: in part 1 (entries 1, 3, 5, 7).
  want_rc=$([ "$k" -eq 1 ] && echo 1 || echo 0)
  ran=$(wc -l < "$work/part$k/times.txt")
  if [ "$rc" -eq "$want_rc" ] && [ "$ran" -eq 4 ] &&
     [ "$(grep -c '^FAILED: ' <<< "$out")" -eq $((k == 1 ? 1 : 0)) ] &&
     grep -q "^memcheck: $((k == 1 ? 3 : 4)) tests clean, 0 skipped" <<< "$out"; then
    echo "ok: SANITIZE_PART=$k/2 runs and reports its own four tests"
  else
    echo "FAIL: SANITIZE_PART=$k/2: rc $rc (expected $want_rc), $ran tests timed"
    echo "    ${out//$'\n'/$'\n'    }"
    failures=$((failures + 1))
  fi
done
if [ "$(sort "$work/parts.log" | uniq | wc -l)" -eq 8 ] && [ "$(wc -l < "$work/parts.log")" -eq 8 ]
then
  echo "ok: the two parts ran each of the eight tests once"
else
  echo "FAIL: the two parts ran: $(tr '\n' ' ' < "$work/parts.log")"
  failures=$((failures + 1))
fi
# A tool's parts depend on its own times alone: part 1 of memcheck by itself and part 2 of
# memcheck+racecheck, given the same memcheck times (as a file, and as a previous LOG_DIR), run
# every test under memcheck exactly once between them, and racecheck on half of the tests.
mkdir -p "$work/mixed_times/memcheck"
printf '%s\n' "5 Half.OverflowAndSpecials" "2 FastDivide.EveryDivisorUpTo8192" \
  > "$work/mixed_times/memcheck/times.txt"
rm -f "$work/mixed.log"
env PATH="$work/bin:$PATH" SANITIZE_FILTER='Half.*:FastDivide.*' SANITIZE_JOBS=2 \
  SANITIZE_PART=1/2 SANITIZE_TIMES="$work/mixed_times/memcheck/times.txt" \
  FAKE_CALL_LOG="$work/mixed.log" bash "$script" memcheck "$binary" "$work/mixed1" \
  > "$work/mixed.out" 2>&1
rc1=$?
env PATH="$work/bin:$PATH" SANITIZE_FILTER='Half.*:FastDivide.*' SANITIZE_JOBS=2 \
  SANITIZE_PART=2/2 SANITIZE_TIMES="$work/mixed_times" FAKE_CALL_LOG="$work/mixed.log" \
  bash "$script" memcheck+racecheck "$binary" "$work/mixed2" >> "$work/mixed.out" 2>&1
rc2=$?
mixed=$(sed 's/^--tool \([a-z]*\) .*--gtest_filter=\(.*\)$/\1 \2/' "$work/mixed.log")
if [ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] &&
   [ "$(grep -c '^memcheck ' <<< "$mixed")" -eq 8 ] &&
   [ "$(grep '^memcheck ' <<< "$mixed" | sort -u | wc -l)" -eq 8 ] &&
   [ "$(grep -c '^racecheck ' <<< "$mixed")" -eq 4 ]; then
  echo "ok: parts run with other tools beside one still split that tool's tests between them"
else
  echo "FAIL: parts with different tools: rc $rc1 and $rc2, calls: ${mixed//$'\n'/, }"
  sed 's/^/    /' "$work/mixed.out"
  failures=$((failures + 1))
fi
for bad in 0/2 3/2 1 x/y; do
  env PATH="$work/bin:$PATH" SANITIZE_FILTER='Half.*' SANITIZE_PART="$bad" \
    bash "$script" memcheck "$binary" "$work/bad" > "$work/bad.out" 2>&1
  rc=$?
  if [ "$rc" -eq 2 ] && grep -q "SANITIZE_PART must be K/P" "$work/bad.out"; then
    echo "ok: SANITIZE_PART=$bad is refused"
  else
    echo "FAIL: SANITIZE_PART=$bad: rc $rc"
    failures=$((failures + 1))
  fi
done

check_showing() {  # "output files" description command...: ok, or FAIL with those files
  local files=$1 what=$2 file
  shift 2
  if "$@"; then
    echo "ok: $what"
  else
    echo "FAIL: $what"
    for file in $files; do sed 's/^/    /' "$file" 2>/dev/null; done
    failures=$((failures + 1))
  fi
}

# Every process runs with FUSEKIT_TEST_UNDER_SANITIZER set; on several GPUs (SANITIZE_GPUS of
# those CUDA_VISIBLE_DEVICES lists) each sees one of them, and every one gets processes; asked
# for more GPUs than are visible, the script refuses.
gpu_run() {  # expected_rc env...; the calls' environments in $work/env.log
  local want=$1; shift
  rm -f "$work/env.log"
  env PATH="$work/bin:$PATH" SANITIZE_FILTER='Half.*:FastDivide.*' FAKE_ENV_LOG="$work/env.log" \
    "$@" bash "$script" memcheck "$binary" "$work/gpus" > "$work/gpus.out" 2>&1
  local rc=$?
  [ "$rc" -eq "$want" ] || { echo "    rc $rc (expected $want)"; return 1; }
}
gpu_check() { check_showing "$work/gpus.out $work/env.log" "$@"; }
env_count() { grep -c -x -- "$1" "$work/env.log"; }
gpu_check "one GPU: the processes keep the device list, with the sanitizer flag set" \
  eval 'gpu_run 0 SANITIZE_JOBS=2 CUDA_VISIBLE_DEVICES=4 &&
        [ "$(env_count "gpu=4 flag=1")" -eq 8 ]'
gpu_check "two GPUs: each process sees one, both get processes" \
  eval 'gpu_run 0 SANITIZE_JOBS=2 CUDA_VISIBLE_DEVICES=3,5 &&
        [ $(( $(env_count "gpu=3 flag=1") + $(env_count "gpu=5 flag=1") )) -eq 8 ] &&
        [ "$(env_count "gpu=3 flag=1")" -ge 1 ] && [ "$(env_count "gpu=5 flag=1")" -ge 1 ] &&
        grep -q "over GPUs 3 5" "$work/gpus.out"'
gpu_check "SANITIZE_GPUS=1: the device list left as it is (the first its default)" \
  eval 'gpu_run 0 SANITIZE_JOBS=2 SANITIZE_GPUS=1 CUDA_VISIBLE_DEVICES=3,5 &&
        [ "$(env_count "gpu=3,5 flag=1")" -eq 8 ]'
gpu_check "more GPUs than visible are refused" \
  eval 'gpu_run 2 SANITIZE_GPUS=3 CUDA_VISIBLE_DEVICES=3,5 &&
        grep -q "SANITIZE_GPUS must be 1 to 2" "$work/gpus.out"'

# Several tools in one queue: each tool's logs, times and summary in LOG_DIR/TOOL, the rest of
# LOG_DIR kept; the options after LOG_DIR to every tool, SANITIZE_<TOOL>_OPTIONS to that one.
two() {  # runs memcheck+racecheck over Half.* and FastDivide.*; output in $work/two.out
  rm -f "$work/calls.log"
  env PATH="$work/bin:$PATH" SANITIZE_FILTER='Half.*:FastDivide.*' FAKE_CALL_LOG="$work/calls.log" \
    SANITIZE_MEMCHECK_OPTIONS="--leak-check full" "$@" \
    bash "$script" memcheck+racecheck "$binary" "$work/two" --print-limit 5 > "$work/two.out" 2>&1
}
check() { check_showing "$work/two.out" "$@"; }
mkdir -p "$work/two"
echo kept > "$work/two/other.log"
two SANITIZE_JOBS=2
rc=$?
calls_with() { grep -c -- "$1" "$work/calls.log"; }
check "two tools in one queue: a clean run passes, each test under each tool" \
  test "$rc" -eq 0 -a "$(wc -l < "$work/calls.log")" -eq 16 \
  -a "$(grep -c '^memcheck: 8 tests clean, 0 skipped' "$work/two.out")" -eq 1 \
  -a "$(grep -c '^racecheck: 8 tests clean, 0 skipped' "$work/two.out")" -eq 1 \
  -a "$(ls "$work/two/memcheck"/*.log | wc -l)" -eq 8 \
  -a "$(ls "$work/two/racecheck"/*.log | wc -l)" -eq 8 \
  -a "$(cat "$work/two/other.log")" = kept
check "two tools: the common options reach both, SANITIZE_MEMCHECK_OPTIONS memcheck alone" \
  test "$(calls_with '--print-limit 5')" -eq 16 \
  -a "$(calls_with '--tool memcheck .*--leak-check full')" -eq 8 \
  -a "$(calls_with '--leak-check')" -eq 8
two SANITIZE_JOBS=2 FAKE_ERROR=Half.RoundsToNearestEven FAKE_ERROR_TOOL=racecheck
rc=$?
check "two tools: an error under one fails that tool's test alone" \
  test "$rc" -eq 1 -a "$(grep -c '^FAILED: ' "$work/two.out")" -eq 1 \
  -a "$(grep -c "^FAILED: Half.RoundsToNearestEven ($work/two/racecheck/" "$work/two.out")" -eq 1
# A previous run's LOG_DIR orders the queue: untimed tests first (each under both tools in
# turn), then the timed ones of both tools, longest first.
printf '%s\n' "9 Half.RoundsToNearestEven" > "$work/two/memcheck/times.txt"
printf '%s\n' "4 Half.RoundsToNearestEven" "6 Half.OverflowAndSpecials" \
  > "$work/two/racecheck/times.txt"
cp -r "$work/two" "$work/previous"
two SANITIZE_JOBS=1 SANITIZE_TIMES="$work/previous"
rc=$?
order=$(sed 's/^--tool \([a-z]*\) .*--gtest_filter=\(.*\)$/\1:\2/' "$work/calls.log" | tr '\n' ' ')
# Listing order: Half.{Fp16RoundTripsEveryPattern, Bf16RoundTripsEveryPattern, RoundsToNearestEven,
# OverflowAndSpecials}, then FastDivide.{EveryDivisorUpTo8192, PowersOfTwoAndNeighbours,
# LargeAndRandomDivisors, AllNumeratorsForTheLaunchSizesOfOneRow}.
expected="memcheck:Half.Fp16RoundTripsEveryPattern racecheck:Half.Fp16RoundTripsEveryPattern "
expected+="memcheck:Half.Bf16RoundTripsEveryPattern racecheck:Half.Bf16RoundTripsEveryPattern "
expected+="memcheck:Half.OverflowAndSpecials "
for t in EveryDivisorUpTo8192 PowersOfTwoAndNeighbours LargeAndRandomDivisors \
         AllNumeratorsForTheLaunchSizesOfOneRow; do
  expected+="memcheck:FastDivide.$t racecheck:FastDivide.$t "
done
expected+="memcheck:Half.RoundsToNearestEven racecheck:Half.OverflowAndSpecials "
expected+="racecheck:Half.RoundsToNearestEven "
check "two tools: SANITIZE_TIMES (a previous LOG_DIR) starts the untimed first, then the longest" \
  test "$rc" -eq 0 -a "$order" = "$expected"

[ "$failures" -eq 0 ] || exit 1
