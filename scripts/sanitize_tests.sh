#!/usr/bin/env bash
# Runs compute-sanitizer tools over the GPU tests, one test per process and several processes at
# once. Why: under racecheck a single norm test takes minutes (every shared-memory access of its
# large batches is checked), while the GPU sits mostly idle between a test's small launches, so
# concurrent processes share it well. A test per process lets a free worker take the next test
# (no shard waits on an unlucky mix of heavy tests), and several tools given at once share one
# queue: the slowest test takes about as long under memcheck as under racecheck, so two tools run
# one after the other wait on it twice. With 16 at once on an H200, memcheck and racecheck in one
# queue over all 200 GPU tests took 17.5 minutes, in two parts (SANITIZE_PART) of 9.4 and 8.1
# (bench/results/sanitize-h200-2026-12-02.txt).
# Each test's log is kept; the run fails if any test fails, or any log lacks the tool's clean
# summary.
#
#   scripts/sanitize_tests.sh TOOL[+TOOL...] TEST_BINARY LOG_DIR [tool options...]
#
# One tool writes its logs into LOG_DIR; several write each tool's into LOG_DIR/TOOL (and leave
# the rest of LOG_DIR alone). The options after LOG_DIR go to every tool; SANITIZE_<TOOL>_OPTIONS
# (e.g. SANITIZE_MEMCHECK_OPTIONS="--leak-check full") to that tool alone.
#
# Environment: SANITIZE_FILTER (gtest filter of the tests to run; default: every test that
# launches GPU kernels, without the >2^31-element cases, which take minutes under
# instrumentation), SANITIZE_GPUS (how many GPUs to deal the processes over, each process seeing
# one through CUDA_VISIBLE_DEVICES; default: every GPU visible, by nvidia-smi or within
# CUDA_VISIBLE_DEVICES), SANITIZE_JOBS (concurrent processes; default: the CPU count, at most 16
# per GPU), SANITIZE_TIMES (start the longest tests first, by a previous run's times: for one
# tool, that run's LOG_DIR/times.txt; for several, that run's LOG_DIR, holding TOOL/times.txt for
# each),
# SANITIZE_PART=K/P (run part K of P: under each tool, every P-th test from the K-th of that tool's
# tests ordered as the queue orders them, so that each part gets its share of the long tests; a
# tool's parts depend on that tool's times alone, so parts run with different tools beside it still
# split its tests between them; for a sweep longer than one sitting on the GPU, each part in a
# LOG_DIR of its own, the parts' times.txt files joined for a later SANITIZE_TIMES).
set -uo pipefail
if [ "${1:-}" = --one ]; then  # internal: one test, one process
  shift
  binary=$1 tool=$2 test=$3 log=$4 start=$SECONDS
  tool_options_var="SANITIZE_${tool^^}_OPTIONS"
  # shellcheck disable=SC2086  # options are words without spaces
  # Where there are several GPUs, xargs's slot number (SANITIZE_SLOT) picks this process's.
  read -r -a devices <<< "${SANITIZE_DEVICES:-}"
  if [ ${#devices[@]} -gt 1 ]; then
    export CUDA_VISIBLE_DEVICES=${devices[$(( ${SANITIZE_SLOT:-0} % ${#devices[@]} ))]}
  fi
  # FUSEKIT_TEST_UNDER_SANITIZER: the invariance tests skip their second, identical run of each
  # batch (tests/cpp/test_support.h, repeat_runs_compared), which the tool would check again.
  FUSEKIT_TEST_UNDER_SANITIZER=1 OMP_NUM_THREADS=1 \
    compute-sanitizer --tool "$tool" --error-exitcode 1 $SANITIZE_TOOL_OPTIONS \
      ${!tool_options_var:-} "$binary" --gtest_filter="$test" > "$log" 2>&1
  echo "# rc=$? in $((SECONDS - start)) s" >> "$log"
  exit 0
fi
usage="usage: $0 TOOL[+TOOL...] TEST_BINARY LOG_DIR [tool options...]"
[ $# -ge 3 ] || { echo "$usage" >&2; exit 2; }
IFS='+' read -r -a tools <<< "$1"
binary=$2 log_dir=$3; shift 3
for ((i = 0; i < ${#tools[@]}; i++)); do
  [[ ${tools[i]} =~ ^[a-z]+$ ]] || { echo "bad tool name '${tools[i]}'; $usage" >&2; exit 2; }
  for ((j = 0; j < i; j++)); do
    [ "${tools[i]}" != "${tools[j]}" ] || { echo "tool ${tools[i]} given twice" >&2; exit 2; }
  done
done
filter=${SANITIZE_FILTER:-'*gpu*:NormLaunchShapes.*:ActQuantLaunchShapes.*:-*HugeTensor*'}
nproc_=$(nproc)
# The GPUs the processes are dealt over: CUDA_VISIBLE_DEVICES's entries where it is set, else
# 0 .. n - 1; SANITIZE_GPUS takes the first that many.
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=',' read -r -a visible <<< "$CUDA_VISIBLE_DEVICES"
else
  visible=()
  gpu_count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  for ((i = 0; i < ${gpu_count:-0}; i++)); do visible+=("$i"); done
  [ ${#visible[@]} -gt 0 ] || visible=(0)
fi
gpus=${SANITIZE_GPUS:-${#visible[@]}}
if [[ ! $gpus =~ ^[1-9][0-9]*$ ]] || [ "$gpus" -gt ${#visible[@]} ]; then
  echo "SANITIZE_GPUS must be 1 to ${#visible[@]} (the GPUs visible), not '$gpus'" >&2
  exit 2
fi
export SANITIZE_DEVICES="${visible[*]:0:gpus}"
max_jobs=$(( 16 * gpus ))
jobs=${SANITIZE_JOBS:-$(( nproc_ < max_jobs ? nproc_ : max_jobs ))}
part=${SANITIZE_PART:-1/1}
if [[ ! $part =~ ^([0-9]+)/([0-9]+)$ ]] || [ "${BASH_REMATCH[1]}" -lt 1 ] ||
   [ "${BASH_REMATCH[1]}" -gt "${BASH_REMATCH[2]}" ]; then
  echo "SANITIZE_PART must be K/P with 1 <= K <= P, not '$part'" >&2
  exit 2
fi
part_index=${BASH_REMATCH[1]} part_count=${BASH_REMATCH[2]}
tool_dir() { if [ ${#tools[@]} -eq 1 ]; then echo "$log_dir"; else echo "$log_dir/$1"; fi; }
# Heaviest first where SANITIZE_TIMES gives "seconds test" lines (a previous run's times.txt): a
# long test started last holds up the whole run alone. Tests without a time (new ones) start
# first. Read before the log directories are emptied, since the times may lie there.
times_file() {
  if [ -z "${SANITIZE_TIMES:-}" ]; then echo /dev/null
  elif [ ${#tools[@]} -eq 1 ]; then echo "$SANITIZE_TIMES"
  else echo "$SANITIZE_TIMES/$1/times.txt"; fi
}
declare -A times
for tool in "${tools[@]}"; do
  file=$(times_file "$tool")
  if [ ${#tools[@]} -eq 1 ] || [ -e "$file" ]; then
    [ -r "$file" ] || { echo "SANITIZE_TIMES: cannot read $file" >&2; exit 2; }
  fi
  times[$tool]=$(cat "$file" 2>/dev/null)
done
tests_list=$("$binary" --gtest_list_tests --gtest_filter="$filter" |
  awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }')  # "Suite." lines, then "  Test  # ..."
[ -n "$tests_list" ] || { echo "no test matches $filter" >&2; exit 1; }
count=$(wc -l <<< "$tests_list")
for tool in "${tools[@]}"; do
  dir=$(tool_dir "$tool")
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "$tests_list" > "$dir/tests.txt"
done
part_note=""
[ "$part_count" -gt 1 ] && part_note=", part $part_index of $part_count"
gpu_note=""
[ "$gpus" -gt 1 ] && gpu_note=" over GPUs $SANITIZE_DEVICES"
echo "${tools[*]}: $count tests each, $jobs processes at a time$gpu_note$part_note"
t0=$SECONDS
export SANITIZE_TOOL_OPTIONS="$*"
log_of() { echo "$(tool_dir "$1")/$(echo "$2" | tr '/' '_').log"; }
# The queue: tests without a time in listing order (each under every tool in turn), then the
# timed ones, longest first; a part takes its share of each tool's tests in that order. Names
# hold no spaces: each line is "tool test log", three words for xargs after the binary.
for ((i = 0; i < ${#tools[@]}; i++)); do
  tool=${tools[i]}
  printf '%s\n' "${times[$tool]}" |
    awk -v tool="$tool" -v index_="$i" '
      NR == FNR { if (NF == 2 && $1 ~ /^[0-9]+([.][0-9]*)?$/) t[$2] = $1; next }
      { print (($0 in t) ? t[$0] : 1e12), FNR, index_, tool, $0 }' - \
      "$(tool_dir "$tool")/tests.txt" |
    sort -k1,1gr -k2,2n | awk -v k="$part_index" -v p="$part_count" 'NR % p == k % p'
done | sort -k1,1gr -k2,2n -k3,3n | while read -r _ _ _ tool test; do
  echo "$tool $test $(log_of "$tool" "$test")"
done > "$(tool_dir "${tools[0]}")/order.txt"
xargs -L 1 -P "$jobs" --process-slot-var=SANITIZE_SLOT bash "$0" --one "$binary" \
  < "$(tool_dir "${tools[0]}")/order.txt"
# Each tool's tests in this run (all of them, but for a part).
tests_of() { awk -v tool="$1" '$1 == tool { print $2 }' "$(tool_dir "${tools[0]}")/order.txt"; }
status=0
# A process that makes no GPU call gets no summary: the tool prints this and exits with 255.
no_gpu_call='terminated before first instrumented API call'
for tool in "${tools[@]}"; do
  ran=0 skipped=0
  case $tool in
    racecheck) clean='RACECHECK SUMMARY: 0 hazards' ;;
    *) clean='ERROR SUMMARY: 0 errors' ;;
  esac
  while read -r test; do
    log=$(log_of "$tool" "$test")
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
  done < <(tests_of "$tool")
  echo "$tool: $ran tests clean, $skipped skipped, in $((SECONDS - t0)) s"
  # times.txt: "seconds test", for SANITIZE_TIMES in a later run.
  dir=$(tool_dir "$tool")
  while read -r test; do
    sed -n "s|^# rc=[0-9]* in \([0-9]*\) s$|\1 $test|p" "$(log_of "$tool" "$test")" 2>/dev/null
  done < <(tests_of "$tool") > "$dir/times.txt"
  echo "$tool: the slowest tests (seconds, with the other processes running beside them; all in" \
    "$dir/times.txt):"
  sort -rn "$dir/times.txt" | head -5 | sed 's/^/  /'
done
[ $status -eq 0 ] || echo "failures above; each test's log is under $log_dir"
exit $status
