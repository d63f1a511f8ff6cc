// fusekit's normalization operators for PyTorch (torch.ops.fusekit.rms_norm, layer_norm, their
// fused-add, fp8 and backward forms): schemas, and the functions that turn tensors into the C++
// API's calls. Conventions (schemas, outputs, errors): fusekit_ops.cc.
#include "op_support.h"

namespace fusekit::torch_ops {
namespace {

// ---- RMSNorm -------------------------------------------------------------------------------

void rms_norm_out(Tensor out, Tensor x, Tensor weight, double eps, double weight_offset,
                  bool weight_after_cast, OptTensor rstd) {
  const char* op = "rms_norm";
  raise_if_error(fusekit::rms_norm(
      view(out, op, "out"), view(x, op, "x"), view(weight, op, "weight"), to_float(eps),
      to_float(weight_offset), options(rstd, std::nullopt, weight_after_cast, op), stream_of(x)));
}

Tensor rms_norm(Tensor x, Tensor weight, double eps, double weight_offset,
                bool weight_after_cast) {
  Tensor out = empty_like_rows(x, x.scalar_type());
  rms_norm_out(out, x, weight, eps, weight_offset, weight_after_cast, std::nullopt);
  return out;
}

std::tuple<Tensor, Tensor> rms_norm_with_rstd(Tensor x, Tensor weight, double eps,
                                              double weight_offset, bool weight_after_cast) {
  Tensor out = empty_like_rows(x, x.scalar_type());
  Tensor rstd = row_stats(x);
  rms_norm_out(out, x, weight, eps, weight_offset, weight_after_cast, rstd);
  return {out, rstd};
}

void fused_add_rms_norm_out(Tensor out, Tensor residual_out, Tensor x, Tensor residual,
                            Tensor weight, double eps, double weight_offset,
                            bool weight_after_cast, OptTensor rstd) {
  const char* op = "fused_add_rms_norm";
  raise_if_error(fusekit::fused_add_rms_norm(
      view(out, op, "out"), view(residual_out, op, "residual_out"), view(x, op, "x"),
      view(residual, op, "residual"), view(weight, op, "weight"), to_float(eps),
      to_float(weight_offset), options(rstd, std::nullopt, weight_after_cast, op), stream_of(x)));
}

std::tuple<Tensor, Tensor, Tensor> fused_add_rms_norm_with_rstd(
    Tensor x, Tensor residual, Tensor weight, double eps, double weight_offset,
    std::optional<ScalarType> residual_dtype, bool weight_after_cast) {
  const Tensor r = residual_in(residual, residual_dtype);
  Tensor out = empty_like_rows(x, x.scalar_type());
  Tensor residual_out = empty_like_rows(x, r.scalar_type());
  Tensor rstd = row_stats(x);
  fused_add_rms_norm_out(out, residual_out, x, r, weight, eps, weight_offset, weight_after_cast,
                         rstd);
  return {out, residual_out, rstd};
}

std::tuple<Tensor, Tensor> fused_add_rms_norm(Tensor x, Tensor residual, Tensor weight,
                                              double eps, double weight_offset,
                                              std::optional<ScalarType> residual_dtype,
                                              bool weight_after_cast) {
  const Tensor r = residual_in(residual, residual_dtype);
  Tensor out = empty_like_rows(x, x.scalar_type());
  Tensor residual_out = empty_like_rows(x, r.scalar_type());
  fused_add_rms_norm_out(out, residual_out, x, r, weight, eps, weight_offset, weight_after_cast,
                         std::nullopt);
  return {out, residual_out};
}

void fused_add_rms_norm_inplace(Tensor x, Tensor residual, Tensor weight, double eps,
                                double weight_offset, bool weight_after_cast) {
  const char* op = "fused_add_rms_norm_";
  raise_if_error(fusekit::fused_add_rms_norm_inplace(
      view(x, op, "x"), view(residual, op, "residual"), view(weight, op, "weight"), to_float(eps),
      to_float(weight_offset), options(std::nullopt, std::nullopt, weight_after_cast, op),
      stream_of(x)));
}

// ---- RMSNorm with an fp8 output ------------------------------------------------------------
// out: x's shape, the fp8 dtype of `format`. Dynamic forms: a float32 scale per row ([M], or
// [..., 1] with scale_keepdim). Static forms: `scale` is a float32 tensor of one element ([] or
// [1]) that the kernel reads. The fused-add forms update residual in place (residual <- x +
// residual, the vLLM convention) and normalize that sum.

void rms_norm_quant_fp8_out(Tensor out, Tensor scale, Tensor x, Tensor weight, double eps,
                            std::string format, double weight_offset, double scale_upper_bound) {
  const std::string op = "rms_norm_quant_fp8_out";
  const char* o = op.c_str();
  raise_if_error(fusekit::rms_norm_quant_fp8(
      view(out, o, "out"), view(scale, o, "scale"), view(x, o, "x"), view(weight, o, "weight"),
      to_float(eps), fp8_format_of(format, op), to_float(weight_offset),
      to_float(scale_upper_bound), stream_of(x)));
}

std::tuple<Tensor, Tensor> rms_norm_quant_fp8(Tensor x, Tensor weight, double eps,
                                              std::string format, double weight_offset,
                                              double scale_upper_bound, bool scale_keepdim) {
  const Fp8Format f = fp8_format_of(format, "rms_norm_quant_fp8");
  Tensor out = empty_like_rows(x, fp8_scalar_type(f));
  Tensor scale = row_scales(out, scale_keepdim);
  rms_norm_quant_fp8_out(out, scale, x, weight, eps, format, weight_offset, scale_upper_bound);
  return {out, scale};
}

void rms_norm_quant_fp8_static_out(Tensor out, Tensor x, Tensor weight, Tensor scale,
                                   double eps, std::string format, double weight_offset) {
  const std::string op = "rms_norm_quant_fp8_static_out";
  const char* o = op.c_str();
  raise_if_error(fusekit::rms_norm_quant_fp8_static(
      view(out, o, "out"), view(x, o, "x"), view(weight, o, "weight"), view(scale, o, "scale"),
      to_float(eps), fp8_format_of(format, op), to_float(weight_offset), stream_of(x)));
}

Tensor rms_norm_quant_fp8_static(Tensor x, Tensor weight, Tensor scale, double eps,
                                 std::string format, double weight_offset) {
  const Fp8Format f = fp8_format_of(format, "rms_norm_quant_fp8_static");
  Tensor out = empty_like_rows(x, fp8_scalar_type(f));
  rms_norm_quant_fp8_static_out(out, x, weight, scale, eps, format, weight_offset);
  return out;
}

void fused_add_rms_norm_quant_fp8_out(Tensor out, Tensor scale, Tensor x, Tensor residual,
                                      Tensor weight, double eps, std::string format,
                                      double weight_offset, double scale_upper_bound) {
  const std::string op = "fused_add_rms_norm_quant_fp8_out";
  const char* o = op.c_str();
  const TensorView r = view(residual, o, "residual");
  raise_if_error(fusekit::fused_add_rms_norm_quant_fp8(
      view(out, o, "out"), view(scale, o, "scale"), r, view(x, o, "x"), r,
      view(weight, o, "weight"), to_float(eps), fp8_format_of(format, op),
      to_float(weight_offset), to_float(scale_upper_bound), stream_of(x)));
}

std::tuple<Tensor, Tensor> fused_add_rms_norm_quant_fp8(Tensor x, Tensor residual, Tensor weight,
                                                        double eps, std::string format,
                                                        double weight_offset,
                                                        double scale_upper_bound,
                                                        bool scale_keepdim) {
  const Fp8Format f = fp8_format_of(format, "fused_add_rms_norm_quant_fp8");
  Tensor out = empty_like_rows(x, fp8_scalar_type(f));
  Tensor scale = row_scales(out, scale_keepdim);
  fused_add_rms_norm_quant_fp8_out(out, scale, x, residual, weight, eps, format, weight_offset,
                                   scale_upper_bound);
  return {out, scale};
}

void fused_add_rms_norm_quant_fp8_static_out(Tensor out, Tensor x, Tensor residual,
                                             Tensor weight, Tensor scale, double eps,
                                             std::string format, double weight_offset) {
  const std::string op = "fused_add_rms_norm_quant_fp8_static_out";
  const char* o = op.c_str();
  const TensorView r = view(residual, o, "residual");
  raise_if_error(fusekit::fused_add_rms_norm_quant_fp8_static(
      view(out, o, "out"), r, view(x, o, "x"), r, view(weight, o, "weight"),
      view(scale, o, "scale"), to_float(eps), fp8_format_of(format, op), to_float(weight_offset),
      stream_of(x)));
}

Tensor fused_add_rms_norm_quant_fp8_static(Tensor x, Tensor residual, Tensor weight, Tensor scale,
                                           double eps, std::string format, double weight_offset) {
  const Fp8Format f = fp8_format_of(format, "fused_add_rms_norm_quant_fp8_static");
  Tensor out = empty_like_rows(x, fp8_scalar_type(f));
  fused_add_rms_norm_quant_fp8_static_out(out, x, residual, weight, scale, eps, format,
                                          weight_offset);
  return out;
}

// ---- LayerNorm -----------------------------------------------------------------------------

void layer_norm_out(Tensor out, Tensor x, OptTensor weight, OptTensor bias, double eps,
                    OptTensor mean, OptTensor rstd) {
  const char* op = "layer_norm";
  raise_if_error(fusekit::layer_norm(view(out, op, "out"), view(x, op, "x"),
                                    view(weight, op, "weight"), view(bias, op, "bias"),
                                    to_float(eps), options(rstd, mean, false, op), stream_of(x)));
}

Tensor layer_norm(Tensor x, OptTensor weight, OptTensor bias, double eps) {
  Tensor out = empty_like_rows(x, x.scalar_type());
  layer_norm_out(out, x, weight, bias, eps, std::nullopt, std::nullopt);
  return out;
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_with_stats(Tensor x, OptTensor weight,
                                                         OptTensor bias, double eps) {
  Tensor out = empty_like_rows(x, x.scalar_type());
  Tensor mean = row_stats(x);
  Tensor rstd = row_stats(x);
  layer_norm_out(out, x, weight, bias, eps, mean, rstd);
  return {out, mean, rstd};
}

void fused_add_layer_norm_out(Tensor out, Tensor residual_out, Tensor x, Tensor residual,
                              OptTensor weight, OptTensor bias, double eps, OptTensor mean,
                              OptTensor rstd) {
  const char* op = "fused_add_layer_norm";
  raise_if_error(fusekit::fused_add_layer_norm(
      view(out, op, "out"), view(residual_out, op, "residual_out"), view(x, op, "x"),
      view(residual, op, "residual"), view(weight, op, "weight"), view(bias, op, "bias"),
      to_float(eps), options(rstd, mean, false, op), stream_of(x)));
}

std::tuple<Tensor, Tensor, Tensor, Tensor> fused_add_layer_norm_with_stats(
    Tensor x, Tensor residual, OptTensor weight, OptTensor bias, double eps,
    std::optional<ScalarType> residual_dtype) {
  const Tensor r = residual_in(residual, residual_dtype);
  Tensor out = empty_like_rows(x, x.scalar_type());
  Tensor residual_out = empty_like_rows(x, r.scalar_type());
  Tensor mean = row_stats(x);
  Tensor rstd = row_stats(x);
  fused_add_layer_norm_out(out, residual_out, x, r, weight, bias, eps, mean, rstd);
  return {out, residual_out, mean, rstd};
}

std::tuple<Tensor, Tensor> fused_add_layer_norm(Tensor x, Tensor residual, OptTensor weight,
                                                OptTensor bias, double eps,
                                                std::optional<ScalarType> residual_dtype) {
  const Tensor r = residual_in(residual, residual_dtype);
  Tensor out = empty_like_rows(x, x.scalar_type());
  Tensor residual_out = empty_like_rows(x, r.scalar_type());
  fused_add_layer_norm_out(out, residual_out, x, r, weight, bias, eps, std::nullopt,
                           std::nullopt);
  return {out, residual_out};
}

void fused_add_layer_norm_inplace(Tensor x, Tensor residual, OptTensor weight, OptTensor bias,
                                  double eps) {
  const char* op = "fused_add_layer_norm_";
  raise_if_error(fusekit::fused_add_layer_norm_inplace(
      view(x, op, "x"), view(residual, op, "residual"), view(weight, op, "weight"),
      view(bias, op, "bias"), to_float(eps), options(std::nullopt, std::nullopt, false, op),
      stream_of(x)));
}

// ---- Backward ------------------------------------------------------------------------------
// Parameter gradients not asked for (or without a parameter) come back as empty [0] tensors.

Tensor param_grad(const Tensor& x, bool wanted, const OptTensor& param) {
  if (wanted && param.has_value()) {
    return empty_vector(*param, param->size(param->dim() - 1), param->scalar_type());
  }
  return empty_vector(x, 0, param.has_value() ? param->scalar_type() : x.scalar_type());
}

// The float32 scratch of the parameter-gradient sums (see fusekit/norm_backward.h).
Tensor workspace_for(const Tensor& x, bool weight_grad, bool bias_grad) {
  const int64_t n = x.dim() > 0 ? x.size(x.dim() - 1) : 0;
  const int64_t size = norm_backward_workspace_size(rows_of(x), n, weight_grad, bias_grad);
  return empty_vector(x, size, ScalarType::Float);
}

TensorView grad_view(const Tensor& g, const char* op, const char* arg) {
  return g.numel() > 0 ? view(g, op, arg) : TensorView();
}

std::tuple<Tensor, Tensor> rms_norm_backward(Tensor grad_out, Tensor x, Tensor rstd,
                                             Tensor weight, double weight_offset,
                                             OptTensor grad_residual_out, bool weight_grad) {
  const bool add = grad_residual_out.has_value();
  const char* op = add ? "fused_add_rms_norm_backward" : "rms_norm_backward";
  Tensor grad_x = empty_like_rows(x, x.scalar_type());
  Tensor grad_weight = param_grad(x, weight_grad, weight);
  const Tensor ws = workspace_for(x, grad_weight.numel() > 0, false);
  const TensorView gw = grad_view(grad_weight, op, "grad_weight");
  const TensorView wsv = ws.numel() > 0 ? view(ws, op, "workspace") : TensorView();
  const Stream s = stream_of(x);
  if (add) {
    raise_if_error(fusekit::fused_add_rms_norm_backward(
        view(grad_x, op, "grad_h"), gw, view(grad_out, op, "grad_out"),
        view(*grad_residual_out, op, "grad_residual_out"), view(x, op, "residual_out"),
        view(rstd, op, "rstd"), view(weight, op, "weight"), to_float(weight_offset), wsv, s));
  } else {
    raise_if_error(fusekit::rms_norm_backward(view(grad_x, op, "grad_x"), gw,
                                     view(grad_out, op, "grad_out"), view(x, op, "x"),
                                     view(rstd, op, "rstd"), view(weight, op, "weight"),
                                     to_float(weight_offset), wsv, s));
  }
  return {grad_x, grad_weight};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(Tensor grad_out, Tensor x, Tensor mean,
                                                       Tensor rstd, OptTensor weight,
                                                       OptTensor bias,
                                                       OptTensor grad_residual_out,
                                                       bool weight_grad, bool bias_grad) {
  const bool add = grad_residual_out.has_value();
  const char* op = add ? "fused_add_layer_norm_backward" : "layer_norm_backward";
  Tensor grad_x = empty_like_rows(x, x.scalar_type());
  Tensor grad_weight = param_grad(x, weight_grad, weight);
  Tensor grad_bias = param_grad(x, bias_grad, bias);
  const Tensor ws = workspace_for(x, grad_weight.numel() > 0, grad_bias.numel() > 0);
  const TensorView gw = grad_view(grad_weight, op, "grad_weight");
  const TensorView gb = grad_view(grad_bias, op, "grad_bias");
  const TensorView wsv = ws.numel() > 0 ? view(ws, op, "workspace") : TensorView();
  const Stream s = stream_of(x);
  if (add) {
    raise_if_error(fusekit::fused_add_layer_norm_backward(
        view(grad_x, op, "grad_h"), gw, gb, view(grad_out, op, "grad_out"),
        view(*grad_residual_out, op, "grad_residual_out"), view(x, op, "residual_out"),
        view(mean, op, "mean"), view(rstd, op, "rstd"), view(weight, op, "weight"), wsv, s));
  } else {
    raise_if_error(fusekit::layer_norm_backward(view(grad_x, op, "grad_x"), gw, gb,
                                       view(grad_out, op, "grad_out"), view(x, op, "x"),
                                       view(mean, op, "mean"), view(rstd, op, "rstd"),
                                       view(weight, op, "weight"), wsv, s));
  }
  return {grad_x, grad_weight, grad_bias};
}

}  // namespace

// x: [..., N]; weight, bias: [N]; residual: x's shape; rstd, mean: [M] float32.
void define_norm_ops(Library& m) {
  m.def("rms_norm(Tensor x, Tensor weight, float eps=1e-6, float weight_offset=0.0, "
        "bool weight_after_cast=False) -> Tensor");
  m.def("rms_norm_with_rstd(Tensor x, Tensor weight, float eps=1e-6, float weight_offset=0.0, "
        "bool weight_after_cast=False) -> (Tensor out, Tensor rstd)");
  m.def("rms_norm_out(Tensor(a!) out, Tensor x, Tensor weight, float eps=1e-6, "
        "float weight_offset=0.0, bool weight_after_cast=False, Tensor(b!)? rstd=None) -> ()");
  m.def("fused_add_rms_norm(Tensor x, Tensor residual, Tensor weight, float eps=1e-6, "
        "float weight_offset=0.0, ScalarType? residual_dtype=None, "
        "bool weight_after_cast=False) -> (Tensor out, Tensor residual_out)");
  m.def("fused_add_rms_norm_with_rstd(Tensor x, Tensor residual, Tensor weight, "
        "float eps=1e-6, float weight_offset=0.0, ScalarType? residual_dtype=None, "
        "bool weight_after_cast=False) -> (Tensor out, Tensor residual_out, Tensor rstd)");
  m.def("fused_add_rms_norm_out(Tensor(a!) out, Tensor(b!) residual_out, Tensor x, "
        "Tensor residual, Tensor weight, float eps=1e-6, float weight_offset=0.0, "
        "bool weight_after_cast=False, Tensor(c!)? rstd=None) -> ()");
  m.def("fused_add_rms_norm_(Tensor(a!) x, Tensor(b!) residual, Tensor weight, "
        "float eps=1e-6, float weight_offset=0.0, bool weight_after_cast=False) -> ()");
  // RMSNorm with an fp8 output: see "RMSNorm with an fp8 output" above. The fused-add forms
  // update residual in place.
  m.def("rms_norm_quant_fp8(Tensor x, Tensor weight, float eps, str format, "
        "float weight_offset=0.0, float scale_upper_bound=0.0, bool scale_keepdim=False) -> "
        "(Tensor out, Tensor scale)");
  m.def("rms_norm_quant_fp8_out(Tensor(a!) out, Tensor(b!) scale, Tensor x, Tensor weight, "
        "float eps, str format, float weight_offset=0.0, float scale_upper_bound=0.0) -> ()");
  m.def("rms_norm_quant_fp8_static(Tensor x, Tensor weight, Tensor scale, float eps, str format, "
        "float weight_offset=0.0) -> Tensor");
  m.def("rms_norm_quant_fp8_static_out(Tensor(a!) out, Tensor x, Tensor weight, Tensor scale, "
        "float eps, str format, float weight_offset=0.0) -> ()");
  m.def("fused_add_rms_norm_quant_fp8(Tensor x, Tensor(a!) residual, Tensor weight, float eps, "
        "str format, float weight_offset=0.0, float scale_upper_bound=0.0, "
        "bool scale_keepdim=False) -> (Tensor out, Tensor scale)");
  m.def("fused_add_rms_norm_quant_fp8_out(Tensor(a!) out, Tensor(b!) scale, Tensor x, "
        "Tensor(c!) residual, Tensor weight, float eps, str format, float weight_offset=0.0, "
        "float scale_upper_bound=0.0) -> ()");
  m.def("fused_add_rms_norm_quant_fp8_static(Tensor x, Tensor(a!) residual, Tensor weight, "
        "Tensor scale, float eps, str format, float weight_offset=0.0) -> Tensor");
  m.def("fused_add_rms_norm_quant_fp8_static_out(Tensor(a!) out, Tensor x, Tensor(b!) residual, "
        "Tensor weight, Tensor scale, float eps, str format, float weight_offset=0.0) -> ()");
  m.def("layer_norm(Tensor x, Tensor? weight, Tensor? bias, float eps=1e-5) -> Tensor");
  m.def("layer_norm_with_stats(Tensor x, Tensor? weight, Tensor? bias, float eps=1e-5) -> "
        "(Tensor out, Tensor mean, Tensor rstd)");
  m.def("layer_norm_out(Tensor(a!) out, Tensor x, Tensor? weight, Tensor? bias, "
        "float eps=1e-5, Tensor(b!)? mean=None, Tensor(c!)? rstd=None) -> ()");
  m.def("fused_add_layer_norm(Tensor x, Tensor residual, Tensor? weight, Tensor? bias, "
        "float eps=1e-5, ScalarType? residual_dtype=None) -> (Tensor out, Tensor residual_out)");
  m.def("fused_add_layer_norm_with_stats(Tensor x, Tensor residual, Tensor? weight, "
        "Tensor? bias, float eps=1e-5, ScalarType? residual_dtype=None) -> "
        "(Tensor out, Tensor residual_out, Tensor mean, Tensor rstd)");
  m.def("fused_add_layer_norm_out(Tensor(a!) out, Tensor(b!) residual_out, Tensor x, "
        "Tensor residual, Tensor? weight, Tensor? bias, float eps=1e-5, Tensor(c!)? mean=None, "
        "Tensor(d!)? rstd=None) -> ()");
  m.def("fused_add_layer_norm_(Tensor(a!) x, Tensor(b!) residual, Tensor? weight, "
        "Tensor? bias, float eps=1e-5) -> ()");
  // x is h, the rows the forward pass normalized (residual_out after a fused add); with
  // grad_residual_out the fused-add backward runs and grad_x is the gradient of x and residual.
  m.def("rms_norm_backward(Tensor grad_out, Tensor x, Tensor rstd, Tensor weight, "
        "float weight_offset=0.0, Tensor? grad_residual_out=None, bool weight_grad=True) -> "
        "(Tensor grad_x, Tensor grad_weight)");
  m.def("layer_norm_backward(Tensor grad_out, Tensor x, Tensor mean, Tensor rstd, "
        "Tensor? weight, Tensor? bias, Tensor? grad_residual_out=None, bool weight_grad=True, "
        "bool bias_grad=True) -> (Tensor grad_x, Tensor grad_weight, Tensor grad_bias)");
}

void register_norm_kernels(Library& m) {
  m.impl("rms_norm", TORCH_BOX(&rms_norm));
  m.impl("rms_norm_with_rstd", TORCH_BOX(&rms_norm_with_rstd));
  m.impl("rms_norm_out", TORCH_BOX(&rms_norm_out));
  m.impl("fused_add_rms_norm", TORCH_BOX(&fused_add_rms_norm));
  m.impl("fused_add_rms_norm_with_rstd", TORCH_BOX(&fused_add_rms_norm_with_rstd));
  m.impl("fused_add_rms_norm_out", TORCH_BOX(&fused_add_rms_norm_out));
  m.impl("fused_add_rms_norm_", TORCH_BOX(&fused_add_rms_norm_inplace));
  m.impl("rms_norm_quant_fp8", TORCH_BOX(&rms_norm_quant_fp8));
  m.impl("rms_norm_quant_fp8_out", TORCH_BOX(&rms_norm_quant_fp8_out));
  m.impl("rms_norm_quant_fp8_static", TORCH_BOX(&rms_norm_quant_fp8_static));
  m.impl("rms_norm_quant_fp8_static_out", TORCH_BOX(&rms_norm_quant_fp8_static_out));
  m.impl("fused_add_rms_norm_quant_fp8", TORCH_BOX(&fused_add_rms_norm_quant_fp8));
  m.impl("fused_add_rms_norm_quant_fp8_out", TORCH_BOX(&fused_add_rms_norm_quant_fp8_out));
  m.impl("fused_add_rms_norm_quant_fp8_static", TORCH_BOX(&fused_add_rms_norm_quant_fp8_static));
  m.impl("fused_add_rms_norm_quant_fp8_static_out",
         TORCH_BOX(&fused_add_rms_norm_quant_fp8_static_out));
  m.impl("layer_norm", TORCH_BOX(&layer_norm));
  m.impl("layer_norm_with_stats", TORCH_BOX(&layer_norm_with_stats));
  m.impl("layer_norm_out", TORCH_BOX(&layer_norm_out));
  m.impl("fused_add_layer_norm", TORCH_BOX(&fused_add_layer_norm));
  m.impl("fused_add_layer_norm_with_stats", TORCH_BOX(&fused_add_layer_norm_with_stats));
  m.impl("fused_add_layer_norm_out", TORCH_BOX(&fused_add_layer_norm_out));
  m.impl("fused_add_layer_norm_", TORCH_BOX(&fused_add_layer_norm_inplace));
  m.impl("rms_norm_backward", TORCH_BOX(&rms_norm_backward));
  m.impl("layer_norm_backward", TORCH_BOX(&layer_norm_backward));
}

}  // namespace fusekit::torch_ops
