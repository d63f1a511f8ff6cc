#!/usr/bin/env bash
# CI: the Python package as the README builds it (`pip install --no-build-isolation .`), CPU only
# (FUSEKIT_GPU=OFF, which keeps it to seconds), as a wheel installed into a directory of its own;
# then, from outside the tree, so that Python finds that install and not python/fusekit: its
# compiled library loaded, and the operator tests (tests/python/test_ops.py) against it. Needs
# the torch the tests use; installs scikit-build-core with pip where it is missing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../scripts/python_env.sh
source "$repo/scripts/python_env.sh"  # the tests' python3: build/venv's where there is one
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 -c 'import scikit_build_core' >/dev/null 2>&1 ||
  python3 -m pip install --quiet "scikit-build-core>=0.10"
FUSEKIT_GPU=OFF python3 -m pip wheel --quiet --no-build-isolation --no-deps \
  --wheel-dir "$work/wheel" "$repo"
python3 -m pip install --quiet --no-deps --target "$work/site" "$work"/wheel/fusekit-*.whl
cd "$work"
SITE="$work/site" PYTHONPATH="$work/site" python3 - <<'PY'
import os
import fusekit
where = os.path.dirname(os.path.realpath(fusekit.__file__))
assert where == os.path.join(os.path.realpath(os.environ["SITE"]), "fusekit"), where
info = fusekit.build_info()
assert info["library"]["loaded"], info["library"]
print(f"fusekit {info['version']} from {where}: compiled library loaded")
PY
PYTHONPATH="$work/site" python3 -m pytest -q -p no:cacheprovider "$repo/tests/python/test_ops.py"
