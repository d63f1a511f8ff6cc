#!/usr/bin/env bash
# A/B timing of fusekit_bench across commits, in one run on one GPU (not part of the build).
# Timings on a shared GPU move between runs by more than most changes are worth, so versions are
# compared in the same run, in interleaved rounds (A B B A ...), by medians (bench/NOTES.md).
#
#   dev/ab_bench.sh prepare REV...   (where git is) each commit's sources, without its results
#                                    and docs, into build/ab/trees/REV: a few MB, to copy to a
#                                    GPU machine that has no git
#   dev/ab_bench.sh run [NAME...]    (on the GPU machine) builds fusekit_bench from each prepared
#                                    tree (build/ab/NAME) and from this checkout ("new",
#                                    $AB_NEW_DIR, default build/gpu: scripts/gpu_check.sh's
#                                    tree), all at once (AB_BUILD=0: use what is built); then
#                                    times the cell groups below,
#                                    one process per tree and group, in the order of the names,
#                                    then reversed, ROUNDS times (default 2: A B new new B A ...);
#                                    JSON and logs under $AB_DIR (default build/ab/runs/DATE), and
#                                    the summary (dev/ab_summary.py) on stdout
#
# Environment: AB_GROUPS ("name=fusekit_bench args;name=args;..."; default: the norm decode cells,
# the norm and act large batches, the act decode cells), AB_DEADLINE_S (stop starting rounds after
# this many seconds), CUDA_ARCH (default 90a).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
what=${1:-}
[ $# -gt 0 ] && shift

if [ "$what" = prepare ]; then
  for rev in "$@"; do
    dir=build/ab/trees/$rev
    rm -rf "$dir" && mkdir -p "$dir"
    git archive "$rev" | tar -x -C "$dir" || exit 1
    rm -rf "$dir"/bench/results "$dir"/bench/NOTES.md "$dir"/python "$dir"/torch "$dir"/tests/python
    echo "$dir: $(du -sh "$dir" | cut -f1)"
  done
  exit 0
fi
[ "$what" = run ] || { sed -n '2,20p' "$0"; exit 2; }

names=("$@")
[ ${#names[@]} -eq 0 ] && mapfile -t names < <(ls build/ab/trees 2>/dev/null)
AB_DIR=${AB_DIR:-build/ab/runs/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$AB_DIR"
cfg=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEKIT_GPU=CUDA
     -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90a}")
new_dir=${AB_NEW_DIR:-build/gpu}
if [ "${AB_BUILD:-1}" != 0 ]; then
  for name in "${names[@]}"; do
    ( cmake -S "build/ab/trees/$name" -B "build/ab/$name" "${cfg[@]}" -DFUSEKIT_BUILD_TESTS=OFF \
        > "$AB_DIR/build-$name.log" 2>&1 &&
      cmake --build "build/ab/$name" --target fusekit_bench >> "$AB_DIR/build-$name.log" 2>&1
      echo "built $name: rc=$?" ) &
  done
  ( cmake -S . -B "$new_dir" "${cfg[@]}" > "$AB_DIR/build-new.log" 2>&1 &&
    cmake --build "$new_dir" --target fusekit_bench >> "$AB_DIR/build-new.log" 2>&1
    echo "built new: rc=$?" ) &
  wait
fi
binary() {
  local dir="build/ab/$1"
  [ "$1" = new ] && dir=$new_dir
  echo "$dir/bench/fusekit_bench"
}

default_groups="decode=--ops rms_norm,fused_add_rms_norm,layer_norm,fused_add_layer_norm\
 --M 1,32,256 --N 2048,4096,5120,8192,16384;\
large=--ops rms_norm,fused_add_rms_norm,layer_norm,silu_and_mul,silu_and_mul_quant_fp8\
 --M 2048,16384 --N 4096,14336;\
act=--ops silu_and_mul,silu_and_mul_quant_fp8,gelu_tanh_and_mul_quant_fp8 --M 1,32,256\
 --N 11008,14336"
IFS=';' read -r -a groups <<< "${AB_GROUPS:-$default_groups}"
order=("${names[@]}" new)
reversed=()
for ((i = ${#order[@]} - 1; i >= 0; i--)); do reversed+=("${order[$i]}"); done
start=$SECONDS
round=0
for ((r = 0; r < ${ROUNDS:-2}; r++)); do
  for tree in "${order[@]}" "${reversed[@]}"; do
    if [ $((SECONDS - start)) -gt "${AB_DEADLINE_S:-100000}" ]; then
      echo "deadline: stopped after round $round"
      break 2
    fi
    round=$((round + 1))
    for group in "${groups[@]}"; do
      gname=${group%%=*}
      read -r -a args <<< "${group#*=}"
      timeout 300 "$(binary "$tree")" "${args[@]}" --json "$AB_DIR/$gname-$tree-r$round.json" \
        > "$AB_DIR/$gname-$tree-r$round.log" 2>&1 || echo "$tree round $round $gname failed"
    done
  done
done
python3 dev/ab_summary.py "$AB_DIR" "$(IFS=,; echo "${order[*]}")"
