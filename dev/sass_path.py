#!/usr/bin/env python3
"""Counts a GPU kernel's straight-line SASS path, by phase (a probe, not part of the build).

A one-row norm call's time follows the instructions on its threads' path (bench/NOTES.md, "One-row
calls cost what their thread's path holds": 0.73 us + 0.95 ns an instruction on an H200), so a
change to a decode kernel can be weighed from its SASS before any GPU time. This prints, for each
kernel of an object file or library whose mangled name matches every given pattern, the
instructions from its entry to its last global load before the rsqrt (loads), from there to its
first cluster send (compute), to the rsqrt (exchange and fold), and to its exit (outputs), with
the registers ptxas gave it. Counts are static: a loop's body counts once, and both sides of a
branch count, so a kernel whose fold branches at run time reads long (build the branch's condition
in as a constant to count one side). Kernels without a cluster send or an rsqrt print the total
only.

  python3 dev/sass_path.py build/sm90a/CMakeFiles/fusekit.dir/src/gpu/norm/norm_rms.cu.o \\
      'NormKindE0ELb0ENS0_8BFloat16' 'RowFitE3ELi4ELb0ELb0ELi512ELb1ELb0ELb1ELb0E'

Needs cuobjdump (the CUDA toolkit's, or the nvidia-cuda-cuobjdump wheel's): on PATH, in
$CUDA_HOME/bin, or named by $CUOBJDUMP.
"""
import os
import re
import shutil
import subprocess
import sys

INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
FUNCTION = re.compile(r"^\s+Function : (\S+)")


def cuobjdump():
    for candidate in (os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"),
                      os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin",
                                   "cuobjdump")):
        if candidate and os.path.exists(candidate):
            return candidate
    sys.exit("cuobjdump not found: put it on PATH, or set CUOBJDUMP or CUDA_HOME")


def kernels(path):
    """Yields (mangled name, [(offset, instruction), ...]) for each function in `path`."""
    text = subprocess.run([cuobjdump(), "-sass", path], check=True, capture_output=True,
                          text=True).stdout
    name, body = None, []
    for line in text.splitlines():
        function = FUNCTION.match(line)
        if function:
            if name:
                yield name, body
            name, body = function.group(1), []
            continue
        instruction = INSTRUCTION.match(line)
        if instruction and name:
            body.append((int(instruction.group(1), 16) // 16, instruction.group(2)))
    if name:
        yield name, body


def registers(path):
    """Registers a function, from the object's resource usage."""
    text = subprocess.run([cuobjdump(), "-res-usage", path], check=True, capture_output=True,
                          text=True).stdout
    found, name = {}, None
    for line in text.splitlines():
        function = re.match(r"\s*Function (\S+):", line)
        if function:
            name = function.group(1)
        used = re.search(r"REG:(\d+)", line)
        if used and name:
            found[name] = int(used.group(1))
    return found


def phases(body):
    """The path's phases: instructions between its landmarks (those the kernel has)."""
    def first(pattern, after=0):
        return next((a for a, t in body if a >= after and re.search(pattern, t)), None)

    def last(pattern, before):
        hits = [a for a, t in body if a < before and re.search(pattern, t)]
        return hits[-1] if hits else None

    exit_ = first(r"\bEXIT\b")
    rsqrt = first(r"MUFU\.RSQ")
    if exit_ is None or rsqrt is None:
        return {"total": exit_ if exit_ is not None else len(body)}
    exit_ = first(r"\bEXIT\b", rsqrt) or body[-1][0]
    loads = last(r"\bLDG", rsqrt)
    send = first(r"\bSTAS\b")
    result = {"loads": loads}
    if send is not None and loads is not None and send < rsqrt:
        result.update(compute=send - loads, exchange_and_fold=rsqrt - send)
    elif loads is not None:
        result.update(compute_and_reduction=rsqrt - loads)
    result.update(outputs=exit_ - rsqrt, total=exit_)
    return result


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    path, patterns = argv[1], argv[2:]
    regs = registers(path)
    shown = 0
    for name, body in kernels(path):
        if all(p in name for p in patterns):
            shown += 1
            counts = ", ".join(f"{k} {v}" for k, v in phases(body).items())
            print(f"{name}\n  {counts}; {regs.get(name, '?')} registers")
    if not shown:
        sys.exit("no kernel matches " + " and ".join(repr(p) for p in patterns))


if __name__ == "__main__":
    main(sys.argv)
