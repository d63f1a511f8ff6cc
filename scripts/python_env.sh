# The Python that fusekit's build and test scripts use, in one place. Sourced (not run) by run.sh,
# .ci/run and scripts/gpu_check.sh after scripts/install_deps.sh.
#
# Why a project environment. Where python3 lacks what the PyTorch parts need (torch >= 2.10 and
# pytest), install_deps.sh --python does not install into python3 itself: on Debian 12, Ubuntu
# 23.04 and later its pip refuses to (PEP 668, "externally-managed-environment"), on a fresh
# Debian python3 has no pip at all, and a user's interpreter is theirs. It makes build/venv
# instead (python3 -m venv with the system's site-packages visible, so a torch installed there is
# used where it is new enough) and installs requirements-test.txt into it; a CMake older than
# 3.24 is replaced there too. Sourcing this file puts build/venv/bin first on PATH when the
# environment exists, so that python3 (and cmake) are that environment's from then on, as
# `source build/venv/bin/activate` would do. Remove build/venv to go back to python3 alone.
fusekit_venv_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/venv"
if [ -x "$fusekit_venv_dir/bin/python3" ]; then
  case ":$PATH:" in
    *":$fusekit_venv_dir/bin:"*) ;;
    *) PATH="$fusekit_venv_dir/bin:$PATH" ;;
  esac
  export PATH
fi
