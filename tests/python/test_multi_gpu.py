"""Tensors on a GPU other than the current one, as in tensor-parallel inference, where each
process or thread drives several GPUs: every op must launch on its tensors' GPU (on that GPU's
current stream), leave the caller's current device as it was, and give the bits it gives on the
first GPU; its per-device state (launch limits raised per kernel and device, thread-block
cluster residency, device properties) must be that GPU's. Also CUDA-graph capture on the second
GPU, and tensors of one op spread over two GPUs (refused, naming the argument).

Runs where torch sees two or more GPUs with fusekit kernels; skipped otherwise."""

from __future__ import annotations

import pytest
import torch

import fusekit
import reference as ref
from conftest import OpRecorder, gpu_skip_reason, randn

BF16, F32 = torch.bfloat16, torch.float32


def _two_gpu_reason() -> str | None:
    reason = gpu_skip_reason()
    if reason is not None:
        return reason
    if torch.cuda.device_count() < 2:
        return f"needs two GPUs; torch sees {torch.cuda.device_count()}"
    return None


pytestmark = pytest.mark.skipif(_two_gpu_reason() is not None, reason=_two_gpu_reason() or "")


@pytest.fixture(autouse=True)
def _restore_current_gpu():
    """These tests change the current GPU; the tests after them start from the one they had."""
    current = torch.cuda.current_device()
    yield
    torch.cuda.set_device(current)

# (M, N): a filling batch, odd rows of a narrow vector, a tall batch of long rows, and rows long
# enough for thread-block clusters (one row, and a few) where the GPU has them.
SHAPES = [(257, 4096), (3, 5125), (2048, 8192), (1, 262144), (4, 32768)]


def _inputs(m: int, n: int, device: str, seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    return {
        "x": randn((m, n), BF16, device, gen),
        "r": randn((m, n), F32, device, gen),
        "w": randn((n,), BF16, device, gen, scale=0.5, mean=1.0),
        "b": randn((n,), BF16, device, gen),
        "gate_up": randn((m, 2 * n), BF16, device, gen, scale=2.0),
        "s": torch.tensor([0.05], dtype=F32).to(device),
    }


def _bits(t: torch.Tensor) -> torch.Tensor:
    """t's storage bits as integers, so that fp8 codes and NaN compare exactly."""
    return t.contiguous().view(torch.uint8)


# Each call returns the tensors it wrote (outputs, and the residual where it is updated in place).
CALLS = {
    "rms_norm": lambda t: (fusekit.rms_norm(t["x"], t["w"], 1e-6),),
    "fused_add_rms_norm": lambda t: fusekit.fused_add_rms_norm(t["x"], t["r"], t["w"], 1e-6),
    "fused_add_rms_norm_": lambda t: fusekit.fused_add_rms_norm_(t["x"], t["r"], t["w"], 1e-6),
    "layer_norm": lambda t: (fusekit.layer_norm(t["x"], t["w"], t["b"], 1e-5),),
    "fused_add_layer_norm": lambda t: fusekit.fused_add_layer_norm(t["x"], t["r"], t["w"],
                                                                   t["b"], 1e-5),
    "rms_norm_quant_fp8": lambda t: fusekit.rms_norm_quant_fp8(t["x"], t["w"], 1e-6,
                                                               format="e4m3fn"),
    "fused_add_rms_norm_quant_fp8_static": lambda t: (fusekit.fused_add_rms_norm_quant_fp8_static(
        t["x"], t["r"], t["w"], t["s"], 1e-6, format="e4m3fn"), t["r"]),
    "silu_and_mul": lambda t: (fusekit.silu_and_mul(t["gate_up"]),),
    "gelu_tanh_and_mul_quant_fp8": lambda t: fusekit.gelu_tanh_and_mul_quant_fp8(
        t["gate_up"], format="e4m3fn"),
}


@pytest.mark.parametrize("m,n", SHAPES, ids=[f"{m}x{n}" for m, n in SHAPES])
@pytest.mark.parametrize("op", sorted(CALLS))
def test_ops_run_on_their_tensors_gpu(op, m, n):
    """Each op on tensors of the second GPU while the first is current (and the reverse) gives the
    bits it gives where its tensors' GPU is current, and changes no current device."""
    call = CALLS[op]
    same_model = torch.cuda.get_device_name(0) == torch.cuda.get_device_name(1)
    for current, other in ((0, 1), (1, 0)):
        torch.cuda.set_device(other)
        expected = call(_inputs(m, n, f"cuda:{other}", seed=m * 7 + n))
        torch.cuda.set_device(current)
        with OpRecorder() as rec:
            got = call(_inputs(m, n, f"cuda:{other}", seed=m * 7 + n))
        assert rec.ops, f"{op}: no fusekit operator ran"  # the kernels, not the eager fallback
        assert torch.cuda.current_device() == current, f"{op} changed the current device"
        torch.cuda.synchronize(other)
        for g, e in zip(got, expected):
            assert g.device == torch.device(f"cuda:{other}")
            assert torch.equal(_bits(g), _bits(e)), f"{op}: not the same bits on cuda:{other}"
    if not same_model:
        return  # different GPUs may take different launch configurations, hence other bits
    torch.cuda.set_device(0)
    on_first = call(_inputs(m, n, "cuda:0", seed=m * 7 + n))
    on_second = call(_inputs(m, n, "cuda:1", seed=m * 7 + n))
    for a, b in zip(on_first, on_second):
        assert torch.equal(_bits(a), _bits(b.to("cuda:0"))), f"{op}: other bits on cuda:1"


def test_values_on_the_second_gpu():
    """Against the float64 reference, not only against the first GPU (which could share a bug)."""
    torch.cuda.set_device(0)
    t = _inputs(257, 5125, "cuda:1", seed=5)
    y, h = fusekit.fused_add_rms_norm(t["x"], t["r"], t["w"], 1e-6)
    ref.assert_close(h, ref.fused_add(t["x"], t["r"]))
    ref.assert_close(y, ref.rms_norm(h, t["w"], 1e-6), dtype=BF16)
    ref.assert_close(fusekit.layer_norm(t["x"], t["w"], t["b"], 1e-5),
                     ref.layer_norm(t["x"], t["w"], t["b"], 1e-5), dtype=BF16)
    gate, up = t["gate_up"].double().chunk(2, dim=-1)
    ref.assert_close(fusekit.silu_and_mul(t["gate_up"]), torch.nn.functional.silu(gate) * up,
                     dtype=BF16)


def test_backward_on_the_second_gpu():
    """The backward kernels (and their workspaces) on the second GPU: the same gradients as on the
    first, while the first stays current."""
    torch.cuda.set_device(0)
    grads = {}
    for device in ("cuda:0", "cuda:1"):
        t = _inputs(300, 4096, device, seed=11)
        x, w, b, gate_up = (t[k].requires_grad_() for k in ("x", "w", "b", "gate_up"))
        y = (fusekit.rms_norm(x, w, 1e-6).float().sum() + fusekit.layer_norm(x, w, b).float().sum()
             + fusekit.silu_and_mul(gate_up).float().sum())
        y.backward()
        assert torch.cuda.current_device() == 0
        grads[device] = [g.grad.to("cuda:0") for g in (x, w, b, gate_up)]
    if torch.cuda.get_device_name(0) == torch.cuda.get_device_name(1):
        for a, b in zip(grads["cuda:0"], grads["cuda:1"]):
            assert torch.equal(a, b)


def test_graph_capture_on_the_second_gpu():
    """Captured on the second GPU's stream, replayed on new inputs: the replay computes what eager
    calls compute (an op launched on another stream or GPU would be missing from the graph)."""
    device = torch.device("cuda:1")
    t = _inputs(64, 4096, "cuda:1", seed=3)
    with torch.cuda.device(device):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm up: one-time per-device setup outside the capture
            fusekit.rms_norm_quant_fp8(t["x"], t["w"], 1e-6, format="e4m3fn")
            fusekit.silu_and_mul(t["gate_up"])
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            q, scale = fusekit.rms_norm_quant_fp8(t["x"], t["w"], 1e-6, format="e4m3fn")
            h = fusekit.silu_and_mul(t["gate_up"])
        fresh = _inputs(64, 4096, "cuda:1", seed=4)
        for k in ("x", "w", "gate_up"):
            t[k].copy_(fresh[k])
        graph.replay()
        torch.cuda.synchronize(device)
    q_eager, scale_eager = fusekit.rms_norm_quant_fp8(fresh["x"], fresh["w"], 1e-6,
                                                      format="e4m3fn")
    assert torch.equal(_bits(q), _bits(q_eager)) and torch.equal(scale, scale_eager)
    assert torch.equal(h, fusekit.silu_and_mul(fresh["gate_up"]))


@pytest.mark.parametrize("arg", ["weight", "residual"])
def test_tensors_on_two_gpus_are_refused(arg):
    t = _inputs(4, 64, "cuda:0", seed=1)
    if arg == "weight":
        t["w"] = t["w"].to("cuda:1")
    else:
        t["r"] = t["r"].to("cuda:1")
    x_before = t["x"].clone()
    with pytest.raises(ValueError, match=f"{arg}: expected device gpu:0 .x's device. but got "
                                         "gpu:1"):
        torch.ops.fusekit.fused_add_rms_norm_(t["x"], t["r"], t["w"], 1e-6)
    assert torch.equal(t["x"], x_before)
