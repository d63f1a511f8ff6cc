"""A progress bar on stderr for a benchmark that can run for many minutes: tqdm's when tqdm is
installed (it is optional), else a counter that rewrites one line on a terminal and prints a
line per step when stderr is a file or a pipe (a log then shows how far a run got)."""

from __future__ import annotations

import sys


class Progress:
    def __init__(self, total: int, enabled: bool = True, stream=None):
        self.total, self.done, self.enabled = total, 0, enabled
        self.stream = stream or sys.stderr
        self.bar = None
        self.width = 0
        if not enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self.bar = tqdm(total=total, file=self.stream, unit="step", dynamic_ncols=True)

    def start(self, label: str) -> None:
        """Shows what runs next (a torch.compile can take a while before step() comes)."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(label)
        elif self.stream.isatty():
            self._write(f"\r[{self.done:>{len(str(self.total))}}/{self.total}] {label}")

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(1)
        elif self.stream.isatty():
            self._write(f"\r[{self.done:>{len(str(self.total))}}/{self.total}] {label}")
        else:
            print(f"[{self.done}/{self.total}] {label}", file=self.stream, flush=True)

    def _write(self, text: str) -> None:
        pad = max(0, self.width - len(text))
        self.width = len(text)
        self.stream.write(text + " " * pad)
        self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.stream.isatty() and self.width:
            self.stream.write("\n")
            self.stream.flush()
