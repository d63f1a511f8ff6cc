#!/usr/bin/env bash
# The installed package as the README's "Install for other CMake projects" gives it: cmake
# --install of BUILD_DIR into a temporary prefix, then tests/install, a project outside the tree,
# configured against that prefix (find_package(fusekit), fusekit::fusekit) with the build's own
# C++ compiler, built, and run (tests/install/consumer.cc says what it checks).
#
#   tests/scripts/install_check.sh BUILD_DIR
set -uo pipefail
build=$1
tests_dir=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $1" >&2
  [ -f "${2:-}" ] && cat "$2" >&2
  exit 1
}

cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 ||
  fail "cmake --install $build" "$work/install.log"
[ -f "$work/prefix/include/fusekit/fusekit.h" ] || fail "no include/fusekit/fusekit.h installed"
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
cmake -S "$tests_dir/install" -B "$work/consumer" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" ${cxx:+-DCMAKE_CXX_COMPILER="$cxx"} \
  >"$work/configure.log" 2>&1 || fail "configuring a project with find_package(fusekit)" \
  "$work/configure.log"
cmake --build "$work/consumer" >"$work/build.log" 2>&1 ||
  fail "building against the installed fusekit" "$work/build.log"
"$work/consumer/consumer" || fail "the program built against the installed fusekit"
