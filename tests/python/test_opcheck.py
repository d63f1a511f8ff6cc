"""torch.library.opcheck on every fusekit operator: the schema's mutation annotations match what
the kernel writes, the fake implementation matches the real outputs' metadata, the autograd
registration is complete, and AOT dispatch (what torch.compile uses) traces it, with dynamic
shapes. Differentiable ops get inputs that require grad; mutating ops and the fp8 forms (not
differentiable) get inputs that do not."""

from __future__ import annotations

import pytest
import torch

from conftest import INFO, randn

ops = torch.ops.fusekit
BF16, F32 = torch.bfloat16, torch.float32
FP8 = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)


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
    ] + norm_fp8_samples(t) + act_samples(t)


def norm_fp8_samples(t):
    """RMSNorm with an fp8 output: dynamic (both formats, [M] and [..., 1] scales, a bound) and
    static (scale [1] and []) scales, the fused-add forms updating residual in place, out= forms.
    Not differentiable: inputs do not require grad."""
    m, n = 5, 96
    x, w, r = t((m, n)), t((n,), mean=1.0), t((m, n), F32)
    device = x.device
    one, scalar = torch.tensor([0.05], device=device), torch.tensor(0.05, device=device)
    fp8 = torch.empty((m, n), device=device, dtype=torch.float8_e4m3fn)
    rows = torch.empty(m, device=device)
    return [
        (ops.rms_norm_quant_fp8, (x, w, 1e-6, "e4m3fn"), {}),
        (ops.rms_norm_quant_fp8, (x.reshape(1, m, n), w.float(), 1e-5, "e4m3fnuz", 1.0, 0.01,
                                  True), {}),
        (ops.rms_norm_quant_fp8_out, (fp8, rows, x, w, 1e-6, "e4m3fn"),
         {"scale_upper_bound": 0.5}),
        (ops.rms_norm_quant_fp8_static, (x, w, one, 1e-6, "e4m3fn"), {}),
        (ops.rms_norm_quant_fp8_static, (x, w, scalar, 1e-6, "e4m3fnuz", 1.0), {}),
        (ops.rms_norm_quant_fp8_static_out, (fp8.clone(), x, w, one, 1e-6, "e4m3fn"), {}),
        (ops.fused_add_rms_norm_quant_fp8, (x, r.clone(), w, 1e-6, "e4m3fn"), {}),
        (ops.fused_add_rms_norm_quant_fp8, (x, x.clone(), w, 1e-6, "e4m3fnuz"),
         {"scale_keepdim": True}),
        (ops.fused_add_rms_norm_quant_fp8_out, (fp8.clone(), rows.clone(), x, r.clone(), w, 1e-6,
                                                "e4m3fn"), {}),
        (ops.fused_add_rms_norm_quant_fp8_static, (x, r.clone(), w, one, 1e-6, "e4m3fn"), {}),
        (ops.fused_add_rms_norm_quant_fp8_static_out, (fp8.clone(), x, r.clone(), w, scalar,
                                                       1e-6, "e4m3fn"), {}),
    ]


def act_samples(t):
    """The gated activations: fused [m, 2n] input and strided gate / up views (the halves of one
    buffer), plain, fp8 (both formats, [M] and [..., 1] scales), out= and backward forms."""
    m, n = 5, 48
    samples = []
    for act in ("silu", "gelu_tanh", "gelu"):
        op = lambda suffix: getattr(ops, f"{act}_and_mul{suffix}")  # noqa: E731
        x = t((m, 2 * n), grad=True)
        xs = x.detach()
        gate, up = xs[:, :n], xs[:, n:]
        gate_g, up_g = gate.clone().requires_grad_(), t((m, n), grad=True)
        out = torch.empty((m, n), device=xs.device, dtype=BF16)
        fp8 = torch.empty((m, n), device=xs.device, dtype=torch.float8_e4m3fnuz)
        scale = torch.empty((m, 1), device=xs.device)
        grad = t((m, n))
        samples += [
            (op(""), (x,), {}),
            (op(""), (t((2, 3, 2 * n), F32, grad=True),), {}),
            (op("_out"), (out, xs), {}),
            (op("_split"), (gate_g, up_g), {}),
            (op("_split_out"), (out.clone(), gate, up), {}),
            (op("_quant_fp8"), (xs, "e4m3fn"), {}),
            (op("_quant_fp8"), (xs, "e4m3fnuz", 0.01, True), {}),
            (op("_quant_fp8_out"), (fp8, scale, xs, "e4m3fnuz"), {"scale_upper_bound": 0.5}),
            (op("_split_quant_fp8"), (gate, up, "e4m3fn"), {"scale_keepdim": True}),
            (op("_split_quant_fp8_out"), (fp8.clone(), scale.view(-1).clone(), gate, up,
                                          "e4m3fnuz"), {}),
            (op("_backward"), (grad, xs), {}),
            (op("_split_backward"), (grad, gate, up), {}),
        ]
    return samples


def test_every_operator_is_checked(device, gen):
    checked = {op._qualified_op_name for op, _, _ in samples(device, gen)}
    registered = {name for name in torch._C._dispatch_get_all_op_names()
                  if name.startswith("fusekit::")}
    assert len(registered) == 16 + 8 + 3 * 10  # norms, their fp8 forms, 10 per activation
    assert registered <= checked, f"not opchecked: {sorted(registered - checked)}"
    # test_opcheck's cases are counted on the CPU; each device's list must have that length.
    assert len(samples(device, gen)) == SAMPLE_COUNT


# opcheck's test_schema compares each mutated argument before and after with arithmetic that
# PyTorch does not implement for float8 tensors; for the fp8 out= forms the other checks run, and
# test_fp8_out_schemas_mark_their_outputs checks what test_schema would have.
_ALL_BUT_SCHEMA = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


# One case per sample, counted from the list itself (built on the CPU: the same list on every
# device), so that a sample added or removed changes the cases, none skipped silently. Without
# the library the operators do not exist; the suite then runs its fallback subset alone.
SAMPLE_COUNT = (len(samples("cpu", torch.Generator().manual_seed(0))) if INFO["library"]["loaded"]
                else 0)


@pytest.mark.parametrize("index", range(SAMPLE_COUNT))
def test_opcheck(device, gen, index):
    op, args, kwargs = samples(device, gen)[index]
    fp8_out = any(isinstance(a, torch.Tensor) and a.dtype in FP8 for a in args[:1])
    if fp8_out:
        torch.library.opcheck(op, args, kwargs, test_utils=_ALL_BUT_SCHEMA)
    else:
        torch.library.opcheck(op, args, kwargs)


def written_arguments(op):
    schema = op.default._schema
    return [a.name for a in schema.arguments
            if a.alias_info is not None and a.alias_info.is_write], schema


def test_fp8_out_schemas_mark_their_outputs():
    for act in ("silu", "gelu_tanh", "gelu"):
        for form in ("quant_fp8_out", "split_quant_fp8_out"):
            written, schema = written_arguments(getattr(ops, f"{act}_and_mul_{form}"))
            assert written == ["out", "scale"], (schema, written)
            assert not schema.returns
    for name, expected in (("rms_norm_quant_fp8_out", ["out", "scale"]),
                           ("rms_norm_quant_fp8_static_out", ["out"]),
                           ("fused_add_rms_norm_quant_fp8_out", ["out", "scale", "residual"]),
                           ("fused_add_rms_norm_quant_fp8_static_out", ["out", "residual"])):
        written, schema = written_arguments(getattr(ops, name))
        assert written == expected, (schema, written)
        assert not schema.returns


def test_fused_add_fp8_schemas_mark_the_residual():
    # The functional fused-add fp8 forms update residual in place: declared, so that
    # torch.compile functionalizes the mutation.
    for name in ("fused_add_rms_norm_quant_fp8", "fused_add_rms_norm_quant_fp8_static"):
        written, schema = written_arguments(getattr(ops, name))
        assert written == ["residual"], (schema, written)
