"""Python-side registrations for the C++ operators: fake (meta) implementations, so torch.compile
and torch.export trace them without running them, and autograd formulas over the C++ backward ops.

The fake implementations first check, as the C++ operators do, that every tensor lies on the
first one's device: PyTorch sends a call whose tensors include a meta one to the fake
implementation even when the others are real, and a fake answer there would be unwritten memory.
Then they allocate exactly what the C++ operators do (torch/norm_ops.cc,
torch/act_ops.cc): outputs contiguous with x's shape, per-row statistics float32 [M], parameter
gradients [N] in the parameter's dtype or [0] when not asked for. Mutating ops return nothing. The
gated activations' outputs have the last dimension N (half of x's [..., 2N], or gate's), in the
inputs' dtype or the fp8 dtype of the format, with float32 scales [M] or [..., 1]. RMSNorm's fp8
forms return codes of x's shape (and, when dynamic, such scales); their fused-add forms mutate
residual, which a fake implementation need not do.

Autograd. The *_with_rstd / *_with_stats ops save their statistics (fusekit.functional uses them
whenever a gradient is needed); the plain functional ops, when called directly through
torch.ops, recompute them in backward with one forward pass. Gradients of the fused add reach x
and residual through grad_h (of residual_out, the normalized rows), cast to each one's dtype. The
per-row statistics are not differentiable outputs. The gated activations differentiate through
their C++ backward ops ({act}_and_mul_backward, {act}_and_mul_split_backward); their fp8 forms
are not differentiable, nor are RMSNorm's. The backward formulas are themselves not
differentiable (the C++ backward ops have no formula of their own): a second-order gradient
raises instead of coming out as zero or missing (_first_order_only).
"""

from __future__ import annotations

import functools
import inspect
import operator

import torch

from .activation import ACTIVATIONS, fp8_dtype
from .functional import _is_rows

_ops = torch.ops.fusekit


def _rows(x):
    return functools.reduce(operator.mul, x.shape[:-1], 1)


def _stats(x):
    return x.new_empty((_rows(x),), dtype=torch.float32)


def _like(x, dtype=None):
    return x.new_empty(x.shape, dtype=dtype or x.dtype)


def _param_grad(x, wanted, param):
    if wanted and param is not None:
        return param.new_empty((param.shape[-1],))
    return x.new_empty((0,), dtype=param.dtype if param is not None else x.dtype)


def _half_last(x, dtype=None):
    shape = tuple(x.shape[:-1]) + (x.shape[-1] // 2,) if x.dim() > 0 else ()
    return x.new_empty(shape, dtype=dtype or x.dtype)


def _scales(out, keepdim):
    if keepdim:
        return out.new_empty(tuple(out.shape[:-1]) + (1,), dtype=torch.float32)
    return _stats(out)


def _same_device(op: str, names, args, kwargs) -> None:
    first = None
    for name, value in list(zip(names, args)) + list(kwargs.items()):
        if not isinstance(value, torch.Tensor):
            continue
        if first is None:
            first = (name, value.device)
        elif value.device != first[1]:
            raise ValueError(f"invalid argument: {op}: {name}: expected device {first[1]} "
                             f"({first[0]}'s device) but got {value.device}")


def _checked_fake(register):
    """register_fake, with _same_device in front of each fake implementation."""
    def fake(name: str):
        def decorate(fn):
            names = list(inspect.signature(fn).parameters)
            op = name.split("::", 1)[1]

            @functools.wraps(fn)
            def checked(*args, **kwargs):
                _same_device(op, names, args, kwargs)
                return fn(*args, **kwargs)
            return register(name)(checked)
        return decorate
    return fake


def _register_act_fakes(fake, act: str) -> None:
    name = f"fusekit::{act}_and_mul"

    @fake(name)
    def _(x):
        return _half_last(x)

    @fake(name + "_out")
    def _(out, x):
        return None

    @fake(name + "_split")
    def _(gate, up):
        return _like(gate)

    @fake(name + "_split_out")
    def _(out, gate, up):
        return None

    @fake(name + "_quant_fp8")
    def _(x, format, scale_upper_bound=0.0, scale_keepdim=False):
        out = _half_last(x, fp8_dtype(f"{act}_and_mul_quant_fp8", format))
        return out, _scales(out, scale_keepdim)

    @fake(name + "_quant_fp8_out")
    def _(out, scale, x, format, scale_upper_bound=0.0):
        return None

    @fake(name + "_split_quant_fp8")
    def _(gate, up, format, scale_upper_bound=0.0, scale_keepdim=False):
        out = _like(gate, fp8_dtype(f"{act}_and_mul_split_quant_fp8", format))
        return out, _scales(out, scale_keepdim)

    @fake(name + "_split_quant_fp8_out")
    def _(out, scale, gate, up, format, scale_upper_bound=0.0):
        return None

    @fake(name + "_backward")
    def _(grad_out, x):
        return _like(x)

    @fake(name + "_split_backward")
    def _(grad_out, gate, up):
        return _like(gate), _like(gate)


def _register_norm_fp8_fakes(fake) -> None:
    @fake("fusekit::rms_norm_quant_fp8")
    def _(x, weight, eps, format, weight_offset=0.0, scale_upper_bound=0.0, scale_keepdim=False):
        out = _like(x, fp8_dtype("rms_norm_quant_fp8", format))
        return out, _scales(out, scale_keepdim)

    @fake("fusekit::rms_norm_quant_fp8_out")
    def _(out, scale, x, weight, eps, format, weight_offset=0.0, scale_upper_bound=0.0):
        return None

    @fake("fusekit::rms_norm_quant_fp8_static")
    def _(x, weight, scale, eps, format, weight_offset=0.0):
        return _like(x, fp8_dtype("rms_norm_quant_fp8_static", format))

    @fake("fusekit::rms_norm_quant_fp8_static_out")
    def _(out, x, weight, scale, eps, format, weight_offset=0.0):
        return None

    @fake("fusekit::fused_add_rms_norm_quant_fp8")
    def _(x, residual, weight, eps, format, weight_offset=0.0, scale_upper_bound=0.0,
          scale_keepdim=False):
        out = _like(x, fp8_dtype("fused_add_rms_norm_quant_fp8", format))
        return out, _scales(out, scale_keepdim)

    @fake("fusekit::fused_add_rms_norm_quant_fp8_out")
    def _(out, scale, x, residual, weight, eps, format, weight_offset=0.0,
          scale_upper_bound=0.0):
        return None

    @fake("fusekit::fused_add_rms_norm_quant_fp8_static")
    def _(x, residual, weight, scale, eps, format, weight_offset=0.0):
        return _like(x, fp8_dtype("fused_add_rms_norm_quant_fp8_static", format))

    @fake("fusekit::fused_add_rms_norm_quant_fp8_static_out")
    def _(out, x, residual, weight, scale, eps, format, weight_offset=0.0):
        return None


def _register_fakes() -> None:
    fake = _checked_fake(torch.library.register_fake)

    @fake("fusekit::rms_norm")
    def _(x, weight, eps=1e-6, weight_offset=0.0, weight_after_cast=False):
        return _like(x)

    @fake("fusekit::rms_norm_with_rstd")
    def _(x, weight, eps=1e-6, weight_offset=0.0, weight_after_cast=False):
        return _like(x), _stats(x)

    @fake("fusekit::rms_norm_out")
    def _(out, x, weight, eps=1e-6, weight_offset=0.0, weight_after_cast=False, rstd=None):
        return None

    @fake("fusekit::fused_add_rms_norm")
    def _(x, residual, weight, eps=1e-6, weight_offset=0.0, residual_dtype=None,
          weight_after_cast=False):
        return _like(x), _like(x, residual_dtype or residual.dtype)

    @fake("fusekit::fused_add_rms_norm_with_rstd")
    def _(x, residual, weight, eps=1e-6, weight_offset=0.0, residual_dtype=None,
          weight_after_cast=False):
        return _like(x), _like(x, residual_dtype or residual.dtype), _stats(x)

    @fake("fusekit::fused_add_rms_norm_out")
    def _(out, residual_out, x, residual, weight, eps=1e-6, weight_offset=0.0,
          weight_after_cast=False, rstd=None):
        return None

    @fake("fusekit::fused_add_rms_norm_")
    def _(x, residual, weight, eps=1e-6, weight_offset=0.0, weight_after_cast=False):
        return None

    _register_norm_fp8_fakes(fake)

    @fake("fusekit::layer_norm")
    def _(x, weight, bias, eps=1e-5):
        return _like(x)

    @fake("fusekit::layer_norm_with_stats")
    def _(x, weight, bias, eps=1e-5):
        return _like(x), _stats(x), _stats(x)

    @fake("fusekit::layer_norm_out")
    def _(out, x, weight, bias, eps=1e-5, mean=None, rstd=None):
        return None

    @fake("fusekit::fused_add_layer_norm")
    def _(x, residual, weight, bias, eps=1e-5, residual_dtype=None):
        return _like(x), _like(x, residual_dtype or residual.dtype)

    @fake("fusekit::fused_add_layer_norm_with_stats")
    def _(x, residual, weight, bias, eps=1e-5, residual_dtype=None):
        return _like(x), _like(x, residual_dtype or residual.dtype), _stats(x), _stats(x)

    @fake("fusekit::fused_add_layer_norm_out")
    def _(out, residual_out, x, residual, weight, bias, eps=1e-5, mean=None, rstd=None):
        return None

    @fake("fusekit::fused_add_layer_norm_")
    def _(x, residual, weight, bias, eps=1e-5):
        return None

    @fake("fusekit::rms_norm_backward")
    def _(grad_out, x, rstd, weight, weight_offset=0.0, grad_residual_out=None,
          weight_grad=True):
        return _like(x), _param_grad(x, weight_grad, weight)

    @fake("fusekit::layer_norm_backward")
    def _(grad_out, x, mean, rstd, weight, bias, grad_residual_out=None, weight_grad=True,
          bias_grad=True):
        return _like(x), _param_grad(x, weight_grad, weight), _param_grad(x, bias_grad, bias)

    for act in ACTIVATIONS:
        _register_act_fakes(fake, act)


# ---- autograd -----------------------------------------------------------------------------------

class _SecondOrderRefused(torch.autograd.Function):
    """Stands in as the history of a backward formula's outputs when a graph of them is asked for
    (create_graph=True): passes them through, and raises if they are differentiated."""

    @staticmethod
    def forward(ctx, *tensors):
        return tuple(t.view_as(t) for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(
            "fusekit: second-order gradients are not supported: the backward formulas of "
            "fusekit's ops are not differentiable (take the gradient without create_graph=True, "
            "or use PyTorch's ops where a second derivative is needed)")


def _first_order_only(backward):
    """A backward formula that runs without recording a graph and, where a graph of its result
    is asked for (create_graph=True, and the incoming gradients or the saved tensors require
    grad), returns outputs whose history raises when differentiated: the C++ backward ops have
    no formula of their own, so a second derivative through them would otherwise be zero or
    missing, in silence. (torch.autograd.function.once_differentiable looks at the incoming
    gradients alone, so it misses a gradient penalty of y.sum(), whose incoming gradient is a
    constant.)"""
    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with torch.no_grad():
            outputs = backward(ctx, *grads)
        if not torch.is_grad_enabled():
            return outputs
        needed = any(isinstance(g, torch.Tensor) and g.requires_grad for g in grads) or any(
            t is not None and t.requires_grad for t in ctx.saved_tensors)
        if not needed:
            return outputs
        single = not isinstance(outputs, tuple)
        outputs = (outputs,) if single else outputs
        places = [i for i, o in enumerate(outputs) if isinstance(o, torch.Tensor)]
        marked = _SecondOrderRefused.apply(
            *(outputs[i].detach().requires_grad_() for i in places))
        result = list(outputs)
        for i, t in zip(places, marked):
            result[i] = t
        return result[0] if single else tuple(result)
    return wrapper


def _contiguous(grad):
    # Gradients may arrive expanded (stride 0) or otherwise strided; the kernels take rows.
    return grad if grad is None or grad.is_contiguous() else grad.contiguous()


def _backward_rows(h):
    # The forward ops also take rows in runs (per-head views of a fused projection's output); the
    # backward ops take rows of one stride.
    return h if h.is_contiguous() or _is_rows(h) else h.contiguous()


def _grads(ctx, grad_out, grad_h_extra):
    """(grad of h, grad of weight[, grad of bias]) of y = norm(h), plus grad_h_extra (the gradient
    that reached residual_out) added to grad of h. Missing statistics are recomputed."""
    h, weight, bias, mean, rstd = ctx.saved_tensors
    if grad_out is None:  # only residual_out was used: the norm contributes nothing
        zero = (None if not ctx.weight_grad else torch.zeros_like(weight),
                None if not ctx.bias_grad else torch.zeros_like(bias))
        return (grad_h_extra,) + (zero if ctx.layer else zero[:1])
    grad_out, grad_h_extra = _contiguous(grad_out), _contiguous(grad_h_extra)
    h = _backward_rows(h)
    # Recomputed statistics depend on h alone; float32 parameters suit an h of any dtype.
    w32 = None if weight is None else weight.float()
    if ctx.layer:
        if rstd is None:
            b32 = None if bias is None else bias.float()
            _, mean, rstd = _ops.layer_norm_with_stats(h, w32, b32, ctx.eps)
        return _ops.layer_norm_backward(grad_out, h, mean, rstd, weight, bias, grad_h_extra,
                                        ctx.weight_grad, ctx.bias_grad)
    if rstd is None:
        rstd = _ops.rms_norm_with_rstd(h, w32, ctx.eps)[1]
    return _ops.rms_norm_backward(grad_out, h, rstd, weight, ctx.weight_offset, grad_h_extra,
                                  ctx.weight_grad)


def _save(ctx, *, layer, h, weight, bias=None, mean=None, rstd=None, eps, weight_offset=0.0,
          weight_after_cast=False, weight_grad, bias_grad=False):
    ctx.save_for_backward(h, weight, bias, mean, rstd)
    ctx.layer = layer
    ctx.eps, ctx.weight_offset, ctx.weight_after_cast = eps, weight_offset, weight_after_cast
    ctx.weight_grad = weight_grad and weight is not None
    ctx.bias_grad = bias_grad and bias is not None
    ctx.set_materialize_grads(False)


def _keep(wanted, grad):
    return grad if wanted else None


def _register_rms_autograd() -> None:
    # rms_norm[_with_rstd](x, weight, eps, weight_offset, weight_after_cast) -> out[, rstd]
    def setup(ctx, inputs, output):
        x, weight, eps, offset, after_cast = inputs
        rstd = None
        if isinstance(output, (tuple, list)):
            rstd = output[1]
            ctx.mark_non_differentiable(rstd)
        _save(ctx, layer=False, h=x, weight=weight, rstd=rstd, eps=eps, weight_offset=offset,
              weight_after_cast=after_cast, weight_grad=ctx.needs_input_grad[1])

    @_first_order_only
    def backward(ctx, grad_out, grad_rstd=None):
        grad_x, grad_w = _grads(ctx, grad_out, None)
        return grad_x, _keep(ctx.weight_grad, grad_w), None, None, None

    for name in ("fusekit::rms_norm", "fusekit::rms_norm_with_rstd"):
        torch.library.register_autograd(name, backward, setup_context=setup)

    # fused_add_rms_norm[_with_rstd](x, residual, weight, eps, weight_offset, residual_dtype,
    #                                weight_after_cast) -> (out, residual_out[, rstd])
    def setup_fused(ctx, inputs, output):
        x, residual, weight, eps, offset, _, after_cast = inputs
        rstd = output[2] if len(output) > 2 else None
        if rstd is not None:
            ctx.mark_non_differentiable(rstd)
        _save(ctx, layer=False, h=output[1], weight=weight, rstd=rstd, eps=eps,
              weight_offset=offset, weight_after_cast=after_cast,
              weight_grad=ctx.needs_input_grad[2])
        ctx.x_dtype, ctx.residual_dtype = x.dtype, residual.dtype

    @_first_order_only
    def backward_fused(ctx, grad_out, grad_residual_out, grad_rstd=None):
        grad_h, grad_w = _grads(ctx, grad_out, grad_residual_out)
        return (grad_h.to(ctx.x_dtype), grad_h.to(ctx.residual_dtype),
                _keep(ctx.weight_grad, grad_w), None, None, None, None)

    for name in ("fusekit::fused_add_rms_norm", "fusekit::fused_add_rms_norm_with_rstd"):
        torch.library.register_autograd(name, backward_fused, setup_context=setup_fused)


def _register_layer_autograd() -> None:
    # layer_norm[_with_stats](x, weight, bias, eps) -> out[, mean, rstd]
    def setup(ctx, inputs, output):
        x, weight, bias, eps = inputs
        mean = rstd = None
        if isinstance(output, (tuple, list)):
            _, mean, rstd = output
            ctx.mark_non_differentiable(mean, rstd)
        _save(ctx, layer=True, h=x, weight=weight, bias=bias, mean=mean, rstd=rstd, eps=eps,
              weight_grad=ctx.needs_input_grad[1], bias_grad=ctx.needs_input_grad[2])

    @_first_order_only
    def backward(ctx, grad_out, grad_mean=None, grad_rstd=None):
        grad_x, grad_w, grad_b = _grads(ctx, grad_out, None)
        return grad_x, _keep(ctx.weight_grad, grad_w), _keep(ctx.bias_grad, grad_b), None

    for name in ("fusekit::layer_norm", "fusekit::layer_norm_with_stats"):
        torch.library.register_autograd(name, backward, setup_context=setup)

    # fused_add_layer_norm[_with_stats](x, residual, weight, bias, eps, residual_dtype)
    #     -> (out, residual_out[, mean, rstd])
    def setup_fused(ctx, inputs, output):
        x, residual, weight, bias, eps, _ = inputs
        mean = rstd = None
        if len(output) > 2:
            mean, rstd = output[2], output[3]
            ctx.mark_non_differentiable(mean, rstd)
        _save(ctx, layer=True, h=output[1], weight=weight, bias=bias, mean=mean, rstd=rstd,
              eps=eps, weight_grad=ctx.needs_input_grad[2], bias_grad=ctx.needs_input_grad[3])
        ctx.x_dtype, ctx.residual_dtype = x.dtype, residual.dtype

    @_first_order_only
    def backward_fused(ctx, grad_out, grad_residual_out, grad_mean=None, grad_rstd=None):
        grad_h, grad_w, grad_b = _grads(ctx, grad_out, grad_residual_out)
        return (grad_h.to(ctx.x_dtype), grad_h.to(ctx.residual_dtype),
                _keep(ctx.weight_grad, grad_w), _keep(ctx.bias_grad, grad_b), None, None)

    for name in ("fusekit::fused_add_layer_norm", "fusekit::fused_add_layer_norm_with_stats"):
        torch.library.register_autograd(name, backward_fused, setup_context=setup_fused)


def _register_act_autograd(act: str) -> None:
    backward_fused = getattr(_ops, f"{act}_and_mul_backward")
    backward_split = getattr(_ops, f"{act}_and_mul_split_backward")

    # {act}_and_mul(x) -> out
    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @_first_order_only
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return backward_fused(_contiguous(grad_out), x)

    torch.library.register_autograd(f"fusekit::{act}_and_mul", backward, setup_context=setup)

    # {act}_and_mul_split(gate, up) -> out
    def setup_split(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @_first_order_only
    def backward_split_fn(ctx, grad_out):
        gate, up = ctx.saved_tensors
        grad_gate, grad_up = backward_split(_contiguous(grad_out), gate, up)
        return (_keep(ctx.needs_input_grad[0], grad_gate),
                _keep(ctx.needs_input_grad[1], grad_up))

    torch.library.register_autograd(f"fusekit::{act}_and_mul_split", backward_split_fn,
                                    setup_context=setup_split)


def register() -> None:
    _register_fakes()
    _register_rms_autograd()
    _register_layer_autograd()
    for act in ACTIVATIONS:
        _register_act_autograd(act)
