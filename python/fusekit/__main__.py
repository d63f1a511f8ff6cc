"""`python -m fusekit <command>`: the package's command line, so that an installed fusekit can
say what it is and measure itself without the source tree.

    python -m fusekit info            what is in use: versions, compiled library, GPU backends
    python -m fusekit bench [...]     fusekit against eager, torch.compile and the seed kernels
                                      (python -m fusekit bench --help)
"""

from __future__ import annotations

import json
import sys

USAGE = __doc__.split("\n\n", 1)[1].rstrip()


def info() -> int:
    import fusekit

    build_info = getattr(fusekit, "build_info", None)
    if not callable(build_info):
        print(json.dumps({"version": getattr(fusekit, "__version__", None)}, indent=2))
        return 0
    print(json.dumps(build_info(), indent=2, default=str))
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv.pop(0) if argv else None
    if command == "bench":
        from .bench.cli import main as bench_main

        return bench_main(argv)
    if command == "info":
        return info()
    if command in ("-h", "--help", "help"):
        print(f"usage:\n{USAGE}")
        return 0
    print(f"usage:\n{USAGE}", file=sys.stderr)
    if command is not None:
        print(f"unknown command {command!r}: expected 'bench' or 'info'", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
