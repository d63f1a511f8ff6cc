#!/usr/bin/env bash
# One bounded job on a GPU machine that checks and times a change against a base commit: builds
# the base's fusekit_bench (a tree from `dev/ab_bench.sh prepare REV`) and this checkout's
# fusekit_bench and fusekit_tests side by side; runs the chosen GPU tests in shards with
# compute-sanitizer memcheck beside them; times base against this checkout (dev/ab_bench.sh run);
# then sweeps launch shapes with this checkout's benchmark. Every step is bounded so that the
# whole job ends within END seconds of its start, whatever step runs long (a GPU machine lent for
# a fixed time, or a CI step with a limit, cuts off what runs past it, logs included).
#
#   dev/gpu_batch.sh            (on the GPU machine, in the checkout's root; git not needed)
#
# Environment, each step skipped where its variable is empty:
#   OUT       where logs, JSON and summaries go (default build/gpu_batch)
#   END       seconds the job may take in all (default 560)
#   BASE      the prepared tree's name under build/ab/trees (default main)
#   SUITE_F   gtest filter of the tests to run in 12 shards
#   SAN       gtest filter of the tests to run under memcheck, beside the shards
#   ABG       the A/B's cell groups, "name=fusekit_bench args;..." (dev/ab_bench.sh's AB_GROUPS)
#   ROUNDS    the A/B's rounds (default 2); AB_PASS seconds kept back for its last pass (40)
#   SWEEPS    "WORD|fusekit_bench args;...": each a --sweep --sweep-only WORD run
#   PREBUILT  1: take the binaries as built (build/ab/$BASE and build/gpu), build nothing
#   CUDA_ARCH the architecture built for (default 90a)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-build/gpu_batch}
mkdir -p "$OUT"
t0=$SECONDS
END=${END:-560}
BASE=${BASE:-main}
# Seconds left, at least 1 (timeout 0 would mean no bound).
left() { local l=$((END - (SECONDS - t0))); echo $((l > 1 ? l : 1)); }
at_most() { local l; l=$(left); echo $((l < $1 ? l : $1)); }  # a step's bound: $1 or what is left
log() { echo "[$((SECONDS - t0)) s] $*"; }
NEW=build/gpu
if [ ! -d "build/ab/trees/$BASE" ]; then
  echo "no tree build/ab/trees/$BASE (dev/ab_bench.sh prepare REV, then rename it $BASE)"
  exit 2
fi

if [ "${PREBUILT:-0}" != 1 ]; then
  cfg=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEKIT_GPU=CUDA
       -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90a}")
  ( cmake -S "build/ab/trees/$BASE" -B "build/ab/$BASE" "${cfg[@]}" -DFUSEKIT_BUILD_TESTS=OFF \
      > "$OUT/build-base.log" 2>&1 &&
    timeout "$(left)" cmake --build "build/ab/$BASE" --target fusekit_bench \
      >> "$OUT/build-base.log" 2>&1
    log "built $BASE rc=$?" ) &
  ( cmake -S . -B "$NEW" "${cfg[@]}" -DFUSEKIT_BUILD_TESTS=ON > "$OUT/build-new.log" 2>&1 &&
    timeout "$(left)" cmake --build "$NEW" --target fusekit_bench fusekit_tests \
      >> "$OUT/build-new.log" 2>&1
    log "built this checkout rc=$?" ) &
  wait
fi
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"

tests=$NEW/tests/cpp/fusekit_tests
if [ -n "${SUITE_F:-}" ]; then
  if [ -n "${SAN:-}" ]; then
    timeout "$(at_most 110)" compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" \
      --gtest_filter="$SAN" --gtest_brief=1 > "$OUT/memcheck.log" 2>&1 &
  fi
  timeout "$(at_most 110)" bash scripts/test_shards.sh 12 "$tests" "$OUT/shards" \
    --gtest_filter="$SUITE_F" > "$OUT/shards.log" 2>&1
  log "test shards rc=$?"
  tail -3 "$OUT/shards.log"
  wait
  if [ -n "${SAN:-}" ]; then
    echo "memcheck:"
    grep -E 'ERROR SUMMARY|PASSED|FAILED|tests ran' "$OUT/memcheck.log" | tail -3
  fi
fi

if [ -n "${ABG:-}" ] && [ "$(left)" -gt 60 ]; then
  AB_BUILD=0 AB_NEW_DIR=$NEW AB_DIR=$OUT/abruns AB_GROUPS="$ABG" \
    AB_DEADLINE_S=$(($(left) - ${AB_PASS:-40})) ROUNDS=${ROUNDS:-2} \
    timeout "$(left)" bash dev/ab_bench.sh run "$BASE" > "$OUT/ab.txt" 2>&1
  log "A/B done"
fi

bench=$NEW/bench/fusekit_bench
i=0
IFS=';' read -r -a sweeps <<< "${SWEEPS:-}"
for sweep in "${sweeps[@]}"; do
  i=$((i + 1))
  [ "$(left)" -lt 30 ] && { log "no time left for sweep $i"; break; }
  word=${sweep%%|*}
  read -r -a args <<< "${sweep#*|}"
  echo "## --sweep-only $word ${args[*]}" > "$OUT/sweep-$i.txt"
  timeout "$(at_most 120)" "$bench" "${args[@]}" --runs 20 --sweep --sweep-only "$word" \
    --json "$OUT/sweep-$i.json" >> "$OUT/sweep-$i.txt" 2>&1
  log "sweep $i rc=$?"
done
