"""fusekit's comparative benchmark, `python -m fusekit bench` (see cli.py): fusekit against
PyTorch eager, torch.compile and the seed Triton kernels, with the GPU timing methods of the C++
benchmark (bench/), so that the numbers of both can be set side by side."""

from .cli import main

__all__ = ["main"]
