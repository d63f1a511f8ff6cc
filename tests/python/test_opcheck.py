"""torch.library.opcheck on every fusekit operator: the schema's mutation annotations match what
the kernel writes, the fake implementation matches the real outputs' metadata, the autograd
registration is complete, and AOT dispatch (what torch.compile uses) traces it, with dynamic
shapes. Differentiable ops get inputs that require grad; mutating ops get inputs that do not."""

from __future__ import annotations

import pytest
import torch

from conftest import randn

ops = torch.ops.fusekit
BF16, F32 = torch.bfloat16, torch.float32


def samples(device, gen):
    """(operator, args, kwargs) for every operator, grad-requiring where differentiable."""
    def t(shape, dtype=BF16, grad=False, mean=0.0):
        return randn(shape, dtype, device, gen, mean=mean).requires_grad_(grad)

    m, n = 5, 96
    rows = lambda dtype=F32: torch.empty(m, device=device, dtype=dtype)  # noqa: E731
    x, r, w, b = t((m, n), grad=True), t((m, n), F32, grad=True), t((n,), grad=True, mean=1.0), \
        t((n,), grad=True)
    xs, rs, ws, bs = (v.detach() for v in (x, r, w, b))
    h = rs.clone()
    grad, rstd, mean = t((m, n)), rows().uniform_(0.5, 2.0), rows().normal_()
    return [
        (ops.rms_norm, (x, w, 1e-6), {}),
        (ops.rms_norm, (x.detach().reshape(1, m, n).requires_grad_(), w, 1e-5, 1.0, True), {}),
        (ops.rms_norm_with_rstd, (x, w, 1e-6), {}),
        (ops.rms_norm_out, (torch.empty_like(xs), xs, ws, 1e-6), {"rstd": rows()}),
        (ops.fused_add_rms_norm, (x, r, w, 1e-6), {}),
        (ops.fused_add_rms_norm, (x, r.detach().to(BF16).requires_grad_(), w, 1e-6, 0.0, F32),
         {}),
        (ops.fused_add_rms_norm_with_rstd, (x, r, w, 1e-6, 1.0), {}),
        (ops.fused_add_rms_norm_out, (torch.empty_like(xs), torch.empty_like(rs), xs, rs, ws,
                                      1e-6), {"rstd": rows()}),
        (ops.fused_add_rms_norm_, (xs.clone(), rs.clone(), ws, 1e-6), {}),
        (ops.layer_norm, (x, w, b, 1e-5), {}),
        (ops.layer_norm, (x, None, b, 1e-5), {}),
        (ops.layer_norm_with_stats, (x, w, b, 1e-5), {}),
        (ops.layer_norm_with_stats, (x, None, None, 1e-5), {}),
        (ops.layer_norm_out, (torch.empty_like(xs), xs, ws, bs, 1e-5, rows(), rows()), {}),
        (ops.fused_add_layer_norm, (x, r, w, b, 1e-5), {}),
        (ops.fused_add_layer_norm_with_stats, (x, r, w, None, 1e-5), {}),
        (ops.fused_add_layer_norm_out, (torch.empty_like(xs), torch.empty_like(rs), xs, rs, ws,
                                        bs, 1e-5), {"mean": rows(), "rstd": rows()}),
        (ops.fused_add_layer_norm_, (xs.clone(), rs.clone(), ws, None, 1e-5), {}),
        (ops.rms_norm_backward, (grad, xs, rstd, ws, 0.0, None, True), {}),
        (ops.rms_norm_backward, (grad, h, rstd, ws, 1.0, torch.randn_like(h), False), {}),
        (ops.layer_norm_backward, (grad, xs, mean, rstd, ws, bs, None, True, True), {}),
        (ops.layer_norm_backward, (grad, h, mean, rstd, None, bs, torch.randn_like(h), False,
                                   True), {}),
    ]


def test_every_operator_is_checked(device, gen):
    checked = {op._qualified_op_name for op, _, _ in samples(device, gen)}
    registered = {name for name in torch._C._dispatch_get_all_op_names()
                  if name.startswith("fusekit::")}
    assert len(registered) == 16
    assert registered <= checked, f"not opchecked: {sorted(registered - checked)}"


@pytest.mark.parametrize("index", range(22))
def test_opcheck(device, gen, index):
    op, args, kwargs = samples(device, gen)[index]
    torch.library.opcheck(op, args, kwargs)
