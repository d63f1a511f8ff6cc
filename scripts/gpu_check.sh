#!/usr/bin/env bash
# Builds fusekit for the local GPU and runs, in one go, what a GPU change must pass: the test
# suite, compute-sanitizer memcheck, racecheck and synccheck over the GPU tests, the benchmark,
# and (when python3 has torch) the PyTorch operators' pytest suite and the comparative Python
# benchmark.
# Logs and JSON go to $LOG_DIR (default build/gpu-check).
#
#   scripts/gpu_check.sh [steps...]
#     steps: build test memcheck racecheck bench sweep pytest pybench
#     (default: build test memcheck racecheck bench pytest)
#
# Environment: CUDA_ARCH (default 90a), BUILD_DIR (default build/gpu), LOG_DIR, BENCH_ARGS,
# TEST_SHARDS (the C++ suite's processes at once, default 12),
# PYTEST_JOBS (pytest processes at once, default 8), PYTEST_TIMES (a previous run's
# LOG_DIR/pytest/times.txt: deal the tests longest first),
# PYBENCH_ARGS (for `python3 -m fusekit bench`, e.g. --seed-dir DIR), CMAKE_ARGS (extra
# configure arguments).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/python_env.sh  # python3 is build/venv's where ./run.sh test made that environment
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build test memcheck racecheck bench pytest)
BUILD_DIR=${BUILD_DIR:-build/gpu}
LOG_DIR=${LOG_DIR:-build/gpu-check}
CUDA_ARCH=${CUDA_ARCH:-90a}
mkdir -p "$LOG_DIR"
status=0
has() { local s; for s in "${steps[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
run() {  # name command...: runs, logs, records failure
  local name=$1; shift
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" > "$LOG_DIR/$name.log" 2>&1
  local rc=$?
  echo "   rc=$rc in $((SECONDS - t0)) s (log: $LOG_DIR/$name.log)"
  tail -n 3 "$LOG_DIR/$name.log" | sed 's/^/   | /'
  [ $rc -ne 0 ] && status=1
  return $rc
}

# The PyTorch operator library is built into the same tree when python3 has torch (asked by
# torch.__version__: here the source tree's torch/ folder imports as an empty namespace package
# when PyTorch is not installed).
torch_args=()
if python3 -c "import torch; torch.__version__" >/dev/null 2>&1; then
  torch_args=(-DFUSEKIT_TORCH=ON -DPython_EXECUTABLE="$(command -v python3)")
fi
if has build; then
  run configure cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DFUSEKIT_GPU=CUDA -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" -DFUSEKIT_RESOURCE_USAGE=ON \
      "${torch_args[@]}" ${CMAKE_ARGS:-}
  run build cmake --build "$BUILD_DIR" -j "$(nproc)" || exit 1
fi
tests="$BUILD_DIR/tests/cpp/fusekit_tests"
# The C++ suite in TEST_SHARDS processes at once (default 12; scripts/test_shards.sh says why),
# each shard's log in LOG_DIR/test/shard-K.log.
if has test; then
  run test scripts/test_shards.sh "${TEST_SHARDS:-12}" "$tests" "$LOG_DIR/test"
  # CUDA builds: the dynamic fp8 scale's math over every float (tests/cpp/gpu_scale_math_check.cu).
  scale_check="$BUILD_DIR/tests/cpp/fusekit_scale_math_check"
  [ -x "$scale_check" ] && run scale_math "$scale_check"
  # And float -> fp8 over every float, both formats and both GPU conversions, against the host.
  fp8_check="$BUILD_DIR/tests/cpp/fusekit_fp8_conversion_check"
  [ -x "$fp8_check" ] && run fp8_conversion "$fp8_check"
fi
# Sanitizers: every test that launches GPU kernels, one process per test, several at once
# (scripts/sanitize_tests.sh; SANITIZE_FILTER, SANITIZE_JOBS, SANITIZE_TIMES and SANITIZE_PART
# pass through).
# memcheck and racecheck share one queue where both are asked for: the slowest test takes about
# as long under each, so one tool after the other would wait on it twice. On an H200, 16 at once,
# the 200 such tests' times (each slowed by the other 15) added up to 65 minutes under memcheck
# and 210 under racecheck, the longest 8 minutes, and the shared queue took 17.5 minutes in two
# parts of 9.4 and 8.1 (bench/results/sanitize-h200-2026-12-02.txt); synccheck's added up to 109
# minutes over the 163 tests of 2026-11-29, the longest 8.
# A tool's earlier run here leaves each test's time in LOG_DIR/TOOL/times.txt; the next run
# starts the longest first (SANITIZE_TIMES). sanitize_env: extra environment for one pass.
sanitize_env=()
sanitize() {  # TOOL[+TOOL] [options for every tool]
  local dir="$LOG_DIR/$1" previous="$LOG_DIR/$1/times.txt"
  # Several tools: the script writes, and reads the times of, LOG_DIR/TOOL for each.
  if [[ $1 == *+* ]]; then dir=$LOG_DIR previous=$LOG_DIR; fi
  [ -r "$previous" ] || previous=""
  env "${sanitize_env[@]}" SANITIZE_TIMES="${SANITIZE_TIMES:-$previous}" \
    SANITIZE_MEMCHECK_OPTIONS="--leak-check full" \
    scripts/sanitize_tests.sh "$1" "$tests" "$dir" "${@:2}"
}
if has memcheck && has racecheck; then
  run memcheck_racecheck sanitize memcheck+racecheck
elif has memcheck; then
  run memcheck sanitize memcheck
fi
if has racecheck; then
  has memcheck || run racecheck sanitize racecheck
  # synccheck stops the cluster mailboxes' kernels in grids of several 16-block clusters (with
  # the compute-sanitizer of CUDA 13; tests/cpp/gpu_cluster_mailbox_check.cu shows it in a few
  # lines). Where that check fails so, the synccheck pass caps clusters at the 8 blocks at which
  # synccheck runs them (FUSEKIT_MAX_CLUSTER_BLOCKS): rows that would take 16-block clusters take
  # the staged path instead, the tests that need 16 skip, and the 16-block launches are left to
  # memcheck and racecheck.
  probe="$BUILD_DIR/tests/cpp/fusekit_cluster_mailbox_check"
  if [ -x "$probe" ] && "$probe" 16 4 > "$LOG_DIR/synccheck_probe.log" 2>&1 &&
     ! compute-sanitizer --tool synccheck "$probe" 16 4 >> "$LOG_DIR/synccheck_probe.log" 2>&1; then
    echo "== synccheck fails on 16-block clusters ($LOG_DIR/synccheck_probe.log):" \
      "FUSEKIT_MAX_CLUSTER_BLOCKS=8 for its pass"
    sanitize_env=(FUSEKIT_MAX_CLUSTER_BLOCKS=8)
  fi
  # synccheck tracks every mbarrier of a launch (the norm cluster kernel's mailboxes: two per
  # block of a full GPU) and stops the kernel when they overflow its default count.
  run synccheck sanitize synccheck --num-cuda-barriers 65536
  sanitize_env=()
fi
if has bench; then
  run bench "$BUILD_DIR/bench/fusekit_bench" --json "$LOG_DIR/bench.json" ${BENCH_ARGS:-}
  cat "$LOG_DIR/bench.log"
fi
if has sweep; then
  run sweep "$BUILD_DIR/bench/fusekit_bench" --sweep --json "$LOG_DIR/sweep.json" ${BENCH_ARGS:-}
  cat "$LOG_DIR/sweep.log"
fi
python_env=(env FUSEKIT_LIBRARY="$PWD/$BUILD_DIR/torch/libfusekit_torch.so" PYTHONPATH=python)
# The Python suite in PYTEST_JOBS processes at once (default 8), its tests dealt out in turn so
# that each file's slow ones spread over them: in one process it takes over 9 minutes on an H200,
# the GPU idle between its launches; in 8 groups of whole files 277 s, in 8 dealt so 230 s (the
# longest group 213 s, the others 51-170; 2026-12-04). With PYTEST_TIMES (a previous run's
# LOG_DIR/pytest/times.txt, "seconds test" lines) the tests are dealt longest first, each to the
# group with the least time so far: on an H100 the groups dealt in turn took 68-198 s for a mean
# of 122 s, the longest holding two slow tests of torch.compile's CPU code generation (2026-12-05).
# Each group's log is LOG_DIR/pytest/group-K.log, with every test's time, slowest first; the
# step fails if any group does, and writes LOG_DIR/pytest/times.txt for the next run.
pytest_in_groups() {
  local jobs=$1 dir="$LOG_DIR/pytest" k previous=""
  if [ -n "${PYTEST_TIMES:-}" ]; then  # read first: it may lie in the folder emptied below
    previous=$(cat "$PYTEST_TIMES") || { echo "PYTEST_TIMES: cannot read $PYTEST_TIMES"; return 2; }
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  "${python_env[@]}" python3 -m pytest -q -p no:cacheprovider --collect-only tests/python |
    grep '::' > "$dir/tests.txt" || { echo "no tests collected"; return 1; }
  if [ -n "$previous" ]; then
    # Longest first; a test the previous run did not have counts as its mean test.
    printf '%s\n' "$previous" | awk -v jobs="$jobs" -v dir="$dir" '
      NR == FNR { if (NF < 2) next; test = $0; sub(/^[^ ]+ /, "", test)  # ids may hold spaces
                  known[test] = $1; sum += $1; n++; next }
      { id[FNR] = $0; count = FNR }
      END {
        mean = n ? sum / n : 1
        for (i = 1; i <= count; i++) t[i] = (id[i] in known) ? known[id[i]] : mean
        for (done = 0; done < count; done++) {
          best = -1
          for (i in t) if (!(i in taken) && (best < 0 || t[i] > t[best])) best = i
          taken[best] = 1
          g = 0
          for (k = 1; k < jobs; k++) if (load[k] < load[g]) g = k
          load[g] += t[best]
          print id[best] > (dir "/group-" g ".txt")
        }
      }' - "$dir/tests.txt"
  else
    awk -v jobs="$jobs" -v dir="$dir" '{ print > (dir "/group-" (NR - 1) % jobs ".txt") }' \
      "$dir/tests.txt"
  fi
  local pids=() groups=()
  for ((k = 0; k < jobs; k++)); do
    [ -s "$dir/group-$k.txt" ] || continue
    local ids=()
    mapfile -t ids < "$dir/group-$k.txt"
    "${python_env[@]}" python3 -m pytest -q -p no:cacheprovider --durations=0 \
      --durations-min=0 "${ids[@]}" > "$dir/group-$k.log" 2>&1 &
    pids+=($!)
    groups+=("$k")
  done
  local failed=0 i
  for i in "${!pids[@]}"; do
    wait "${pids[i]}" || failed=1
    echo "group ${groups[i]}: $(tail -n 1 "$dir/group-${groups[i]}.log")"
  done
  # A test's time: its setup, call and teardown, as pytest's durations list them.
  cat "$dir"/group-*.log | awk '$1 ~ /^[0-9.]+s$/ && ($2 == "setup" || $2 == "call" ||
      $2 == "teardown") { test = $0; sub(/^[^ ]+ +[a-z]+ +/, "", test)
                          t[test] += substr($1, 1, length($1) - 1) }
      END { for (test in t) printf "%.2f %s\n", t[test], test }' | sort -rn > "$dir/times.txt"
  return $failed
}
if has pytest; then
  run pytest pytest_in_groups "${PYTEST_JOBS:-8}"
fi
if has pybench; then
  # shellcheck disable=SC2086
  run pybench "${python_env[@]}" python3 -m fusekit bench --no-progress \
      --json "$LOG_DIR/pybench.json" --plot "$LOG_DIR/pybench.png" ${PYBENCH_ARGS:-}
  cat "$LOG_DIR/pybench.log"
fi
exit $status
