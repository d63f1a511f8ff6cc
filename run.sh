#!/usr/bin/env bash
# The two entry points of fusekit:
#
#   ./run.sh bench [benchmark args]   build, then run the benchmark (on the GPU when there is one,
#                                     else on the CPU backend); JSON goes to build/bench.json
#   ./run.sh test                     build, then run every test with ctest (GPU tests run when a
#                                     GPU is present and are skipped, with the reason, otherwise)
#
# Both install missing build dependencies first (scripts/install_deps.sh). FUSEKIT_GPU (AUTO,
# CUDA, HIP, OFF) and CUDA_ARCHS / HIP_ARCHS override the backend and targets.
set -euo pipefail
cd "$(dirname "$0")"
what=${1:-}
[ $# -gt 0 ] && shift

scripts/install_deps.sh

build_dir=build/release
args=(-S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEKIT_GPU="${FUSEKIT_GPU:-AUTO}")
if [ -n "${CUDA_ARCHS:-}" ]; then
  args+=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS")
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  args+=(-DCMAKE_CUDA_ARCHITECTURES=native)  # a GPU is here: build for it alone
fi
[ -n "${HIP_ARCHS:-}" ] && args+=(-DCMAKE_HIP_ARCHITECTURES="$HIP_ARCHS")
cmake "${args[@]}" >/dev/null

case "$what" in
  bench)
    cmake --build "$build_dir" --target fusekit_bench
    "$build_dir/bench/fusekit_bench" --json build/bench.json "$@"
    ;;
  test)
    cmake --build "$build_dir"
    ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
    ;;
  *)
    echo "usage: ./run.sh bench [args] | ./run.sh test" >&2
    exit 2
    ;;
esac
