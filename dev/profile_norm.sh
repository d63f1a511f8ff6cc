#!/usr/bin/env bash
# Scratch profiling of the norm kernels (not part of the build): Nsight Compute sections and
# warp-stall reasons for a few shapes, and the SASS of one kernel. Run after scripts/gpu_check.sh
# built build/gpu. Output under $LOG_DIR (one file per kind, to keep the count small).
set -uo pipefail
cd "$(dirname "$0")/.."
LOG_DIR=${LOG_DIR:-build/gpu-check}
bench=build/gpu/bench/fusekit_bench
stalls=$(for r in long_scoreboard short_scoreboard barrier membar wait no_instruction \
           branch_resolving imc_miss lg_throttle mio_throttle math_pipe_throttle drain \
           dispatch_stall misc sleeping selected not_selected; do
           printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' "$r"; done)
out="$LOG_DIR/ncu.txt"
: > "$out"
for spec in ${PROFILE_SHAPES:-rms_norm:1:4096 rms_norm:16384:4096}; do
  IFS=: read -r op m n <<< "$spec"
  echo "== ncu $op M=$m N=$n" | tee -a "$out"
  timeout 120 ncu --kernel-name regex:norm_ --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --metrics "${stalls%,},smsp__inst_executed.sum,sm__cycles_elapsed.max" \
    "$bench" --ops "$op" --M "$m" --N "$n" --runs 5 >> "$out" 2>&1
done
grep -E "^== |Duration|DRAM Throughput|stalled|inst_executed|cycles_elapsed|Registers Per|Achieved Occ|Block Size" "$out" \
  | awk '$NF != "0" && $NF != "(!)" ' | head -80
if [ -n "${SASS_KERNEL:-}" ]; then
  obj=$(find build/gpu -name "${SASS_OBJECT:-norm_rms.cu.o}" | head -1)
  cuobjdump -sass "$obj" | awk -v pat="$SASS_KERNEL" '/Function :/{p = ($0 ~ pat)} p' > "$LOG_DIR/kernel.sass"
  echo "sass: $(grep -c '/\*[0-9a-f]*\*/' "$LOG_DIR/kernel.sass") instructions"
fi
