// The PyTorch operators of fusekit (torch.ops.fusekit.*): the only translation unit that includes
// PyTorch headers.
//
// Why PyTorch's stable ABI (torch/csrc/stable, STABLE_TORCH_LIBRARY): the library it builds talks
// to PyTorch only through a C shim, so one build loads into every PyTorch release from the one it
// was compiled against onwards (TORCH_TARGET_VERSION pins the API to 2.10), it links no Python, and
// these headers compile in seconds instead of the full ATen headers' minutes.
//
// Each operator turns its tensors into fusekit::TensorViews (pointer, dtype, device, sizes,
// strides), allocates outputs through PyTorch (new_empty: the caching allocator, so CUDA-graph
// capture works), and calls the C++ API on the tensors' current stream. Nothing here waits for the
// GPU. A failed fusekit::Status becomes an exception that PyTorch hands to Python:
// invalid-argument and unsupported statuses as std::invalid_argument (Python's ValueError), device
// runtime errors as std::runtime_error (RuntimeError); the message is Status::to_string(), which
// names the op, the argument, the expected and the actual value.
//
// Schemas follow the vLLM convention: mutated arguments are marked (Tensor(a!)), in-place ops end
// in '_', out variants take their outputs first and return nothing; functional ops return fresh
// tensors. Per-row statistics (rstd, mean) are float32 tensors of shape [M], M = x.numel() / N.
//
// The gated activations come once per activation (silu, gelu_tanh, gelu), as C++ templates on
// fusekit::Activation registered under each name: {act}_and_mul on the fused [..., 2N] input,
// {act}_and_mul_split on separate gate and up, their _quant_fp8 forms and their backward passes.
// The fp8 format is an explicit string argument ("e4m3fn" or "e4m3fnuz"), never inferred.
//
// RMSNorm with an fp8 output (rms_norm_quant_fp8, fused_add_rms_norm_quant_fp8, with a dynamic
// per-row scale or, in the _static forms, a one-element scale tensor the kernel reads) follows the
// same conventions; its fused-add forms update residual in place, as fused_add_rms_norm_ does.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "fusekit/fusekit.h"

namespace fusekit::torch_ops {
namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;
using OptTensor = std::optional<Tensor>;

void raise_if_error(const Status& s) {
  if (s.ok()) return;
  if (s.code() == StatusCode::kRuntimeError) throw std::runtime_error(s.to_string());
  throw std::invalid_argument(s.to_string());
}

DType dtype_of(ScalarType t, const char* op, const char* arg) {
  switch (t) {
    case ScalarType::Float: return DType::kFloat32;
    case ScalarType::Half: return DType::kFloat16;
    case ScalarType::BFloat16: return DType::kBFloat16;
    case ScalarType::Double: return DType::kFloat64;
    case ScalarType::Int: return DType::kInt32;
    case ScalarType::Long: return DType::kInt64;
    case ScalarType::Byte: return DType::kUInt8;
    case ScalarType::Float8_e4m3fn: return DType::kFloat8E4M3FN;
    case ScalarType::Float8_e4m3fnuz: return DType::kFloat8E4M3FNUZ;
    default:
      throw std::invalid_argument(std::string("unsupported: ") + op + ": " + arg +
                                  ": expected dtype float32 or float16 or bfloat16 but got " +
                                  torch::headeronly::toString(t));
  }
}

TensorView view(const Tensor& t, const char* op, const char* arg) {
  Device device;
  if (t.is_cpu()) {
    device = Device::cpu();
  } else if (t.is_cuda()) {  // ROCm builds of PyTorch report their GPUs as CUDA devices too
    device = Device::gpu(t.get_device_index());
  } else {
    throw std::invalid_argument(std::string("invalid argument: ") + op + ": " + arg +
                                ": expected a CPU or CUDA tensor but got device type " +
                                std::to_string(static_cast<int>(t.device().type())));
  }
  const int ndim = static_cast<int>(t.dim());
  return TensorView::from_arrays(t.mutable_data_ptr(), dtype_of(t.scalar_type(), op, arg), device,
                                 ndim, t.sizes().data(), t.strides().data());
}

TensorView view(const OptTensor& t, const char* op, const char* arg) {
  return t.has_value() ? view(*t, op, arg) : TensorView();
}

// The current stream of x's GPU (nullptr, unused, for CPU tensors).
Stream stream_of(const Tensor& x) {
  void* stream = nullptr;
#if FUSEKIT_TORCH_GPU
  if (x.is_cuda()) {
    TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(x.get_device_index(), &stream));
  }
#else
  (void)x;
#endif
  return stream;
}

// Rows M of x: the product of all but the last size.
int64_t rows_of(const Tensor& x) {
  int64_t m = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) m *= x.size(d);
  return m;
}

Tensor empty_like_rows(const Tensor& x, ScalarType dtype) {
  return torch::stable::new_empty(x, x.sizes(), dtype);
}

Tensor empty_vector(const Tensor& like, int64_t n, ScalarType dtype) {
  const std::vector<int64_t> shape{n};
  return torch::stable::new_empty(like, shape, dtype);
}

Tensor row_stats(const Tensor& x) { return empty_vector(x, rows_of(x), ScalarType::Float); }

NormOptions options(const OptTensor& rstd, const OptTensor& mean, bool weight_after_cast,
                    const char* op) {
  NormOptions o;
  o.rstd = view(rstd, op, "rstd");
  o.mean = view(mean, op, "mean");
  o.weight_after_cast = weight_after_cast;
  return o;
}

// The residual in the requested residual dtype (a converted copy when it differs).
Tensor residual_in(const Tensor& residual, std::optional<ScalarType> residual_dtype) {
  if (!residual_dtype.has_value() || *residual_dtype == residual.scalar_type()) return residual;
  return torch::stable::to(residual, *residual_dtype);
}

float to_float(double v) { return static_cast<float>(v); }

// ---- fp8 outputs ---------------------------------------------------------------------------
// The format is a string ("e4m3fn" or "e4m3fnuz"), never inferred; out has its fp8 dtype.

// t's shape with the last dimension replaced by `last` (rank 0 stays rank 0: the C++ check of t
// reports it).
std::vector<int64_t> with_last(const Tensor& t, int64_t last) {
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  if (!shape.empty()) shape.back() = last;
  return shape;
}

int64_t last_dim(const Tensor& t) { return t.dim() > 0 ? t.size(t.dim() - 1) : 0; }

Fp8Format fp8_format_of(const std::string& format, const std::string& op) {
  if (format == "e4m3fn") return Fp8Format::kE4M3FN;
  if (format == "e4m3fnuz") return Fp8Format::kE4M3FNUZ;
  throw std::invalid_argument("invalid argument: " + op +
                              ": format: expected \"e4m3fn\" or \"e4m3fnuz\" but got \"" + format +
                              "\"");
}

ScalarType fp8_scalar_type(Fp8Format format) {
  return format == Fp8Format::kE4M3FNUZ ? ScalarType::Float8_e4m3fnuz : ScalarType::Float8_e4m3fn;
}

// The float32 per-row scales of a quantized out (`like`: the tensor whose rows they are): [M], or
// [..., 1] with keepdim.
Tensor row_scales(const Tensor& like, bool keepdim) {
  if (keepdim) return torch::stable::new_empty(like, with_last(like, 1), ScalarType::Float);
  return empty_vector(like, rows_of(like), ScalarType::Float);
}

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

// ---- Gated activations ---------------------------------------------------------------------
// x: [..., 2N], gate in x[..., :N] and up in x[..., N:]; or gate, up: [..., N] (strided views
// allowed, as the C++ API allows). out: [..., N] in the inputs' dtype, or for the fp8 forms in the
// fp8 dtype of `format`, with a float32 scale per row: [M], or [..., 1] with scale_keepdim.

constexpr Activation kActivations[] = {Activation::kSilu, Activation::kGeluTanh,
                                       Activation::kGelu};

// The operator's name: e.g. act_op_name(kGelu, "_split_out") == "gelu_and_mul_split_out".
std::string act_op_name(Activation act, const char* suffix) {
  return std::string(activation_name(act)) + "_and_mul" + suffix;
}

template <Activation kAct>
void act_and_mul_out(Tensor out, Tensor x) {
  const std::string op = act_op_name(kAct, "_out");
  raise_if_error(fusekit::act_and_mul(kAct, view(out, op.c_str(), "out"),
                                      view(x, op.c_str(), "x"), stream_of(x)));
}

template <Activation kAct>
Tensor act_and_mul(Tensor x) {
  Tensor out = torch::stable::new_empty(x, with_last(x, last_dim(x) / 2), x.scalar_type());
  act_and_mul_out<kAct>(out, x);
  return out;
}

template <Activation kAct>
void act_and_mul_split_out(Tensor out, Tensor gate, Tensor up) {
  const std::string op = act_op_name(kAct, "_split_out");
  raise_if_error(fusekit::act_and_mul(kAct, view(out, op.c_str(), "out"),
                                      view(gate, op.c_str(), "gate"), view(up, op.c_str(), "up"),
                                      stream_of(gate)));
}

template <Activation kAct>
Tensor act_and_mul_split(Tensor gate, Tensor up) {
  Tensor out = empty_like_rows(gate, gate.scalar_type());
  act_and_mul_split_out<kAct>(out, gate, up);
  return out;
}

template <Activation kAct>
void act_and_mul_quant_fp8_out(Tensor out, Tensor scale, Tensor x, std::string format,
                               double scale_upper_bound) {
  const std::string op = act_op_name(kAct, "_quant_fp8_out");
  const char* o = op.c_str();
  raise_if_error(fusekit::act_and_mul_quant_fp8(
      kAct, view(out, o, "out"), view(scale, o, "scale"), view(x, o, "x"),
      fp8_format_of(format, op), to_float(scale_upper_bound), stream_of(x)));
}

template <Activation kAct>
std::tuple<Tensor, Tensor> act_and_mul_quant_fp8(Tensor x, std::string format,
                                                 double scale_upper_bound, bool scale_keepdim) {
  const Fp8Format f = fp8_format_of(format, act_op_name(kAct, "_quant_fp8"));
  Tensor out = torch::stable::new_empty(x, with_last(x, last_dim(x) / 2), fp8_scalar_type(f));
  Tensor scale = row_scales(out, scale_keepdim);
  act_and_mul_quant_fp8_out<kAct>(out, scale, x, format, scale_upper_bound);
  return {out, scale};
}

template <Activation kAct>
void act_and_mul_split_quant_fp8_out(Tensor out, Tensor scale, Tensor gate, Tensor up,
                                     std::string format, double scale_upper_bound) {
  const std::string op = act_op_name(kAct, "_split_quant_fp8_out");
  const char* o = op.c_str();
  raise_if_error(fusekit::act_and_mul_quant_fp8(
      kAct, view(out, o, "out"), view(scale, o, "scale"), view(gate, o, "gate"),
      view(up, o, "up"), fp8_format_of(format, op), to_float(scale_upper_bound),
      stream_of(gate)));
}

template <Activation kAct>
std::tuple<Tensor, Tensor> act_and_mul_split_quant_fp8(Tensor gate, Tensor up,
                                                       std::string format,
                                                       double scale_upper_bound,
                                                       bool scale_keepdim) {
  const Fp8Format f = fp8_format_of(format, act_op_name(kAct, "_split_quant_fp8"));
  Tensor out = empty_like_rows(gate, fp8_scalar_type(f));
  Tensor scale = row_scales(out, scale_keepdim);
  act_and_mul_split_quant_fp8_out<kAct>(out, scale, gate, up, format, scale_upper_bound);
  return {out, scale};
}

template <Activation kAct>
Tensor act_and_mul_backward(Tensor grad_out, Tensor x) {
  const std::string op = act_op_name(kAct, "_backward");
  const char* o = op.c_str();
  Tensor grad_x = empty_like_rows(x, x.scalar_type());
  raise_if_error(fusekit::act_and_mul_backward(kAct, view(grad_x, o, "grad_x"),
                                               view(grad_out, o, "grad_out"), view(x, o, "x"),
                                               stream_of(x)));
  return grad_x;
}

template <Activation kAct>
std::tuple<Tensor, Tensor> act_and_mul_split_backward(Tensor grad_out, Tensor gate, Tensor up) {
  const std::string op = act_op_name(kAct, "_split_backward");
  const char* o = op.c_str();
  Tensor grad_gate = empty_like_rows(gate, gate.scalar_type());
  Tensor grad_up = empty_like_rows(gate, gate.scalar_type());
  raise_if_error(fusekit::act_and_mul_backward(
      kAct, view(grad_gate, o, "grad_gate"), view(grad_up, o, "grad_up"),
      view(grad_out, o, "grad_out"), view(gate, o, "gate"), view(up, o, "up"), stream_of(gate)));
  return {grad_gate, grad_up};
}

template <Activation kAct, typename Library>
void register_act_kernels(Library& m) {
  const auto impl = [&](const char* suffix, auto boxed) {
    m.impl(act_op_name(kAct, suffix).c_str(), boxed);
  };
  impl("", TORCH_BOX(&act_and_mul<kAct>));
  impl("_out", TORCH_BOX(&act_and_mul_out<kAct>));
  impl("_split", TORCH_BOX(&act_and_mul_split<kAct>));
  impl("_split_out", TORCH_BOX(&act_and_mul_split_out<kAct>));
  impl("_quant_fp8", TORCH_BOX(&act_and_mul_quant_fp8<kAct>));
  impl("_quant_fp8_out", TORCH_BOX(&act_and_mul_quant_fp8_out<kAct>));
  impl("_split_quant_fp8", TORCH_BOX(&act_and_mul_split_quant_fp8<kAct>));
  impl("_split_quant_fp8_out", TORCH_BOX(&act_and_mul_split_quant_fp8_out<kAct>));
  impl("_backward", TORCH_BOX(&act_and_mul_backward<kAct>));
  impl("_split_backward", TORCH_BOX(&act_and_mul_split_backward<kAct>));
}

// The schemas of one activation's operators.
template <typename Library>
void define_act_ops(Library& m, Activation act) {
  const std::string name = act_op_name(act, "");
  const std::string fp8 = "str format, float scale_upper_bound=0.0";
  for (const std::string& schema : {
           name + "(Tensor x) -> Tensor",
           name + "_out(Tensor(a!) out, Tensor x) -> ()",
           name + "_split(Tensor gate, Tensor up) -> Tensor",
           name + "_split_out(Tensor(a!) out, Tensor gate, Tensor up) -> ()",
           name + "_quant_fp8(Tensor x, " + fp8 + ", bool scale_keepdim=False) -> "
                  "(Tensor out, Tensor scale)",
           name + "_quant_fp8_out(Tensor(a!) out, Tensor(b!) scale, Tensor x, " + fp8 + ") -> ()",
           name + "_split_quant_fp8(Tensor gate, Tensor up, " + fp8 +
               ", bool scale_keepdim=False) -> (Tensor out, Tensor scale)",
           name + "_split_quant_fp8_out(Tensor(a!) out, Tensor(b!) scale, Tensor gate, "
                  "Tensor up, " + fp8 + ") -> ()",
           name + "_backward(Tensor grad_out, Tensor x) -> Tensor grad_x",
           name + "_split_backward(Tensor grad_out, Tensor gate, Tensor up) -> "
                  "(Tensor grad_gate, Tensor grad_up)",
       }) {
    m.def(schema.c_str());
  }
}

template <typename Library>
void register_kernels(Library& m) {
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
  register_act_kernels<Activation::kSilu>(m);
  register_act_kernels<Activation::kGeluTanh>(m);
  register_act_kernels<Activation::kGelu>(m);
}

}  // namespace
}  // namespace fusekit::torch_ops

// x: [..., N]; weight, bias: [N]; residual: x's shape; rstd, mean: [M] float32.
STABLE_TORCH_LIBRARY(fusekit, m) {
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
  // Gated activations: see "Gated activations" above for the shapes.
  for (const fusekit::Activation act : fusekit::torch_ops::kActivations) {
    fusekit::torch_ops::define_act_ops(m, act);
  }
}

STABLE_TORCH_LIBRARY_IMPL(fusekit, CPU, m) { fusekit::torch_ops::register_kernels(m); }

#if FUSEKIT_TORCH_GPU
STABLE_TORCH_LIBRARY_IMPL(fusekit, CUDA, m) { fusekit::torch_ops::register_kernels(m); }
#endif
