"""torch.compile(fullgraph=True) over code using RMSNorm with an fp8 output (dynamic and static
scales, the fused-add forms updating the residual in place), on each device: no graph break, the
graph calls the fusekit operators, and results (codes, scales and the updated residual) equal
eager bit for bit. On the GPU also CUDA-graph capture and replay, with the static scale changed
between replays: the kernels read it when they run."""

from __future__ import annotations

import pytest
import torch

import fusekit
from compile_checks import (assert_compiled_equals_eager, assert_cuda_graph_replays_equal_eager,
                            assert_dynamic_shapes_equal_eager, assert_graph_calls)
from conftest import gpu_skip_reason, randn

BF16, F32 = torch.bfloat16, torch.float32


def layer(x, residual, w, static_scale):
    """A layer boundary's norms with fp8 outputs; residual is updated in place twice."""
    q1, s1 = fusekit.fused_add_rms_norm_quant_fp8(x, residual, w, format="e4m3fn",
                                                  scale_upper_bound=0.5)
    q2 = fusekit.rms_norm_quant_fp8_static(residual, w, static_scale, format="e4m3fnuz")
    q3, s3 = fusekit.rms_norm_quant_fp8(x, w, 1e-5, 1.0, format="e4m3fnuz", scale_keepdim=True)
    q4 = fusekit.fused_add_rms_norm_quant_fp8_static(x, residual, w, static_scale,
                                                     format="e4m3fn")
    return (q1.view(torch.uint8), s1, q2.view(torch.uint8), q3.view(torch.uint8), s3,
            q4.view(torch.uint8), residual * 1)


def inputs(device, gen, n=769, m=6):
    return (randn((m, n), BF16, device, gen), randn((m, n), F32, device, gen),
            randn((n,), F32, device, gen, mean=1.0),
            torch.tensor([0.02], dtype=F32, device=device))


@pytest.mark.parametrize("backend", ("inductor", "aot_eager"))
def test_compiled_equals_eager(device, gen, backend):
    # Codes, scales, and the residual the fused-add forms update in place.
    assert_compiled_equals_eager(layer, inputs(device, gen), backend=backend)


def test_dynamic_shapes(device, gen):
    assert_dynamic_shapes_equal_eager(layer, lambda m: inputs(device, gen, m=m))


def test_graph_calls_the_fusekit_operators(device, gen):
    assert_graph_calls(layer, inputs(device, gen),
                       ("fusekit.fused_add_rms_norm_quant_fp8", "fusekit.rms_norm_quant_fp8_static",
                        "fusekit.rms_norm_quant_fp8", "fusekit.fused_add_rms_norm_quant_fp8_static"))


@pytest.mark.skipif(gpu_skip_reason() is not None, reason=gpu_skip_reason() or "")
def test_cuda_graph_capture_and_replay(gen):
    def fresh(trial):
        args = inputs("cuda", gen, n=4096, m=64)
        args[3].fill_((0.02, 0.005, 0.1)[trial])  # a new static scale: read by the replayed kernels
        return args

    assert_cuda_graph_replays_equal_eager(layer, fresh)