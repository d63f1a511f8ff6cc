"""OpRecorder: records which fusekit operators a block of code dispatches, to prove that the
compiled kernels (and not the eager fallback) did the work. No pytest here: the fallback tests'
subprocesses import it too."""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode


class OpRecorder(TorchDispatchMode):
    """`with OpRecorder() as rec: ...` leaves the fusekit operator names, in call order, in
    rec.ops (e.g. ["rms_norm", "rms_norm_backward"]), and every operator's (e.g.
    "aten.clone.default") in rec.all_ops."""

    def __init__(self):
        super().__init__()
        self.ops = []
        self.all_ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        self.all_ops.append(name)
        if name.startswith("fusekit."):
            self.ops.append(name.split(".")[1])
        return func(*args, **(kwargs or {}))
