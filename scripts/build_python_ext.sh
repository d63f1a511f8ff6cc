#!/usr/bin/env bash
# Builds fusekit's PyTorch operator library with plain CMake (no pip, no network: only cmake, a C++
# compiler, the GPU compiler if any, and torch in the Python used) and copies it, with its
# fusekit_build_info.json, into python/fusekit/, so that from the repository root
#
#   PYTHONPATH=python python3 -c 'import fusekit; print(fusekit.build_info())'
#   PYTHONPATH=python python3 -m pytest tests/python
#
# use it. GPU targets: $FUSEKIT_CUDA_ARCHS (e.g. 90a) or $FUSEKIT_HIP_ARCHS if set, else the GPUs
# torch sees, else CMake's defaults (cmake/FusekitTorch.cmake).
#
# Environment: PYTHON (default python3), BUILD_DIR (default build-py), FUSEKIT_GPU (AUTO, CUDA,
# HIP, OFF), JOBS (default nproc), CMAKE_ARGS (extra configure arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(command -v "${PYTHON:-python3}")
build=${BUILD_DIR:-build-py}
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)

# shellcheck disable=SC2086
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DFUSEKIT_TORCH=ON \
  -DFUSEKIT_BUILD_TESTS=OFF -DFUSEKIT_BUILD_BENCH=OFF -DFUSEKIT_GPU="${FUSEKIT_GPU:-AUTO}" \
  -DPython_EXECUTABLE="$python" ${CMAKE_ARGS:-}
cmake --build "$build" --target fusekit_torch -j "${JOBS:-$(nproc)}"
install -m 755 "$build/torch/libfusekit_torch.so" python/fusekit/
install -m 644 "$build/torch/fusekit_build_info.json" python/fusekit/
echo "fusekit: python/fusekit/libfusekit_torch.so built for:"
cat python/fusekit/fusekit_build_info.json
