#!/usr/bin/env bash
# Checks scripts/sanitize_tests.sh on any machine, GPU or not: a stand-in for compute-sanitizer
# runs the test binary and then reports as the real tool does, or reports an error, or dies
# before its summary, for tests chosen by name. The script must pass a clean run, and fail, naming
# exactly the bad tests, for an error report, a process that died, and a failing test. Without
# this, a sanitizer run that never looked at its logs would pass on every GPU.
#
#   tests/scripts/sanitize_tests_check.sh TEST_BINARY
set -uo pipefail
binary=$1
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/sanitize_tests.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
# The stand-in: the tool's options, then the binary and its --gtest_filter=NAME. FAKE_ERROR,
# FAKE_DIE and FAKE_FAIL are substrings of the test names it treats so.
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
echo "========= COMPUTE-SANITIZER"
if [[ -n ${FAKE_FAIL:-} && $name == *"$FAKE_FAIL"* ]]; then
  "$@"
  echo "[  FAILED  ] $name (0 ms)"
  rc=1
else
  "$@"
  rc=$?
fi
if [[ -n ${FAKE_DIE:-} && $name == *"$FAKE_DIE"* ]]; then exit 137; fi
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
expect() {  # description expected_rc expected_failed_count tool [env...]
  local what=$1 want_rc=$2 want_failed=$3 tool=$4; shift 4
  local out rc failed
  out=$(env PATH="$work/bin:$PATH" SANITIZE_FILTER='Half.*:FastDivide.*' SANITIZE_JOBS=2 "$@" \
        bash "$script" "$tool" "$binary" "$work/logs" 2>&1)
  rc=$?
  failed=$(grep -c '^FAILED: ' <<< "$out")
  if [ "$rc" -ne "$want_rc" ] || [ "$failed" -ne "$want_failed" ]; then
    echo "FAIL: $what: rc $rc (expected $want_rc), $failed tests named failed (expected $want_failed)"
    echo "    ${out//$'\n'/$'\n'    }"
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}
# Half.* has four tests and FastDivide.* four (tests/cpp/test_half.cc, test_fast_divide.cc).
expect "a clean memcheck run passes" 0 0 memcheck
expect "a clean racecheck run passes" 0 0 racecheck
expect "an error report fails its tests" 1 4 memcheck FAKE_ERROR=Half.
expect "a process that died fails its test" 1 1 racecheck FAKE_DIE=FastDivide.EveryDivisor
expect "a failing test fails" 1 1 memcheck FAKE_FAIL=Half.RoundsToNearestEven
[ "$failures" -eq 0 ] || exit 1
