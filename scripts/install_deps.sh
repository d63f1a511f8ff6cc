#!/usr/bin/env bash
# Installs what building and testing fusekit needs on Debian/Ubuntu: a C++17 compiler, CMake >= 3.24,
# Ninja, GoogleTest and valgrind. Packages already present are left alone; nothing is installed when
# everything is there. The CUDA toolkit (nvcc) or ROCm (hipcc) are optional: without them
# fusekit builds its CPU backend only.
#
#   scripts/install_deps.sh            the C++ build and test tools
#   scripts/install_deps.sh --python   also requirements-test.txt (torch, pytest) for the PyTorch
#                                      operators and the Python tests, unless python3 already has
#                                      torch >= 2.10 and pytest (then nothing is fetched: machines
#                                      without network keep their torch)
#
# What python3 lacks goes into the project's environment build/venv, not into python3 itself
# (scripts/python_env.sh says why; the scripts that build and test source that file to use it).
# A CMake older than 3.24 (Ubuntu 22.04 has 3.22) is replaced there by PyPI's.
set -euo pipefail
# shellcheck source=python_env.sh
source "$(dirname "$0")/python_env.sh"
requirements="$(dirname "$0")/../requirements-test.txt"

apt_install() {
  echo "installing: $*"
  local sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "$@"
}

# build/venv, made the first time something must go into it. Debian and Ubuntu ship venv's
# ensurepip apart from python3 (package python3-venv).
use_project_venv() {
  if [ ! -x "$fusekit_venv_dir/bin/python3" ]; then
    python3 -c 'import ensurepip' >/dev/null 2>&1 || apt_install python3-venv
    echo "creating the Python environment $fusekit_venv_dir (scripts/python_env.sh says why)"
    python3 -m venv --system-site-packages "$fusekit_venv_dir"
  fi
  # shellcheck source=python_env.sh
  source "$(dirname "$0")/python_env.sh"
  hash -r
}

need=()
command -v c++ >/dev/null 2>&1 || need+=(g++)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v ninja >/dev/null 2>&1 || need+=(ninja-build)
[ -f /usr/include/gtest/gtest.h ] || [ -d /usr/src/googletest ] || need+=(libgtest-dev)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# The benchmark's memory check (tests/scripts/bench_memcheck.sh) runs it under valgrind.
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"

version=$(cmake --version | head -n1 | awk '{print $3}')
if [ "$(printf '%s\n3.24\n' "$version" | sort -V | head -n1)" != "3.24" ]; then
  echo "CMake $version is older than 3.24; installing a newer one from PyPI"
  use_project_venv
  python3 -m pip install --quiet "cmake>=3.24"
  hash -r
fi

if [ "${1:-}" = "--python" ]; then
  if ! python3 -c 'import sys, torch, pytest
v = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
sys.exit(0 if v >= (2, 10) else 1)' >/dev/null 2>&1; then
    use_project_venv
    echo "installing the Python test requirements (requirements-test.txt) into $fusekit_venv_dir"
    python3 -m pip install --quiet -r "$requirements"
  fi
  # torch.compile on the CPU (the compile tests) builds C++ that includes Python.h, which Debian
  # and Ubuntu ship apart from python3 (package python3-dev).
  if ! python3 -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)'
  then
    apt_install python3-dev
  fi
fi
