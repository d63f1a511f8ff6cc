#!/usr/bin/env bash
# Installs what building and testing fusekit needs on Debian/Ubuntu: a C++17 compiler, CMake >= 3.24,
# Ninja, GoogleTest and valgrind. Packages already present are left alone; nothing is installed when
# everything is there. The CUDA toolkit (nvcc) or ROCm (hipcc) are optional: without them
# fusekit builds its CPU backend only.
#
#   scripts/install_deps.sh            the C++ build and test tools
#   scripts/install_deps.sh --python   also, with pip, requirements-test.txt (torch, pytest) for the
#                                      PyTorch operators and the Python tests, unless python3
#                                      already has torch >= 2.10 and pytest (then nothing is
#                                      fetched: machines without network keep their torch)
set -euo pipefail

need=()
command -v c++ >/dev/null 2>&1 || need+=(g++)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v ninja >/dev/null 2>&1 || need+=(ninja-build)
[ -f /usr/include/gtest/gtest.h ] || [ -d /usr/src/googletest ] || need+=(libgtest-dev)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# The benchmark's memory check (tests/scripts/bench_memcheck.sh) runs it under valgrind.
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)

if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${need[@]}"
fi

version=$(cmake --version | head -n1 | awk '{print $3}')
if [ "$(printf '%s\n3.24\n' "$version" | sort -V | head -n1)" != "3.24" ]; then
  echo "CMake $version is older than 3.24; installing a newer one from PyPI"
  python3 -m pip install --quiet "cmake>=3.24"
fi

if [ "${1:-}" = "--python" ]; then
  if ! python3 -c 'import sys, torch, pytest
v = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
sys.exit(0 if v >= (2, 10) else 1)' >/dev/null 2>&1; then
    echo "installing the Python test requirements (requirements-test.txt) with pip"
    python3 -m pip install --quiet -r "$(dirname "$0")/../requirements-test.txt"
  fi
fi
