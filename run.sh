#!/usr/bin/env bash
# The two entry points of fusekit:
#
#   ./run.sh bench [benchmark args]   build, then run the benchmark (on the GPU when there is one,
#                                     else on the CPU backend): when python3 has torch, the
#                                     comparative one (python3 -m fusekit bench: fusekit vs PyTorch
#                                     eager, torch.compile and, given --seed-dir, the seed Triton
#                                     kernels), else the C++ one; JSON goes to build/bench.json
#   ./run.sh test                     build, then run every test: the C++ suite with ctest, and the
#                                     PyTorch operators and Python package with pytest (GPU tests
#                                     run when a GPU is present and are skipped, with the reason,
#                                     otherwise)
#
# Both install missing build dependencies first (scripts/install_deps.sh; for test also torch and
# pytest from requirements-test.txt, with pip, into the environment build/venv when python3
# lacks them: scripts/python_env.sh). With nvcc, the CUDA
# backend is built for the local GPU, or where there is none, only to check that it compiles
# (unoptimized PTX for compute_90; that library reports no usable GPU).
# FUSEKIT_GPU (AUTO, CUDA, HIP, OFF) and CUDA_ARCHS / HIP_ARCHS override the backend and targets;
# FUSEKIT_PYTHON_TESTS=0 skips the Python part (no torch, no operator library, no pytest).
set -euo pipefail
cd "$(dirname "$0")"
what=${1:-}
[ $# -gt 0 ] && shift

python_tests=OFF
if [ "$what" = test ] && [ "${FUSEKIT_PYTHON_TESTS:-1}" != 0 ]; then
  python_tests=ON
  scripts/install_deps.sh --python
else
  scripts/install_deps.sh
fi
# python3 (and cmake) from the project's environment build/venv where install_deps.sh made one
source scripts/python_env.sh

build_dir=build/release
args=(-S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEKIT_GPU="${FUSEKIT_GPU:-AUTO}")
# test, and bench when python3 has torch, build the PyTorch operator library (torch/) too; bench
# without torch says OFF, so that a build directory configured with it earlier does not ask for
# it again. "Has torch" asks for torch.__version__: run from here, where the source tree's torch/
# folder imports as an empty namespace package when PyTorch is not installed, a bare import
# succeeds.
if [ "$what" = bench ]; then
  if python3 -c "import torch; torch.__version__" >/dev/null 2>&1; then
    python_bench=ON
    args+=(-DFUSEKIT_TORCH=ON -DPython_EXECUTABLE="$(command -v python3)")
  else
    args+=(-DFUSEKIT_TORCH=OFF)
  fi
fi
if [ "$what" = test ]; then
  args+=(-DFUSEKIT_TORCH="$python_tests" -DPython_EXECUTABLE="$(command -v python3)")
fi
if [ -n "${CUDA_ARCHS:-}" ]; then
  args+=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" -DFUSEKIT_CUDA_COMPILE_CHECK=OFF)
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  # a GPU is here: build for it alone
  args+=(-DCMAKE_CUDA_ARCHITECTURES=native -DFUSEKIT_CUDA_COMPILE_CHECK=OFF)
else
  # No GPU here: nothing built for one runs here, so the CUDA build only checks that the sources
  # compile: for one architecture (each more costs as much again: the library's default, sm_80
  # and sm_90, doubles it), as PTX alone (compute_90, no ptxas: a third of each unit's compile
  # time), and without the device optimizer (FUSEKIT_CUDA_COMPILE_CHECK: half of what is left).
  # Such a library reports no usable GPU; CUDA_ARCHS builds one that runs.
  args+=(-DCMAKE_CUDA_ARCHITECTURES=90-virtual -DFUSEKIT_CUDA_COMPILE_CHECK=ON)
fi
[ -n "${HIP_ARCHS:-}" ] && args+=(-DCMAKE_HIP_ARCHITECTURES="$HIP_ARCHS")
cmake "${args[@]}" >/dev/null

case "$what" in
  bench)
    if [ "${python_bench:-OFF}" = ON ]; then
      cmake --build "$build_dir" --target fusekit_torch
      FUSEKIT_LIBRARY="$PWD/$build_dir/torch/libfusekit_torch.so" PYTHONPATH=python \
        python3 -m fusekit bench --json build/bench.json --plot build/bench.png "$@"
    else
      cmake --build "$build_dir" --target fusekit_bench
      "$build_dir/bench/fusekit_bench" --json build/bench.json "$@"
    fi
    ;;
  test)
    cmake --build "$build_dir"
    ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
    if [ "$python_tests" = ON ]; then
      FUSEKIT_LIBRARY="$PWD/$build_dir/torch/libfusekit_torch.so" PYTHONPATH=python \
        python3 -m pytest -q tests/python
    fi
    ;;
  *)
    echo "usage: ./run.sh bench [args] | ./run.sh test" >&2
    exit 2
    ;;
esac
