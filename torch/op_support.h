// What every file of fusekit's PyTorch operators shares: PyTorch's stable-ABI headers, tensors
// turned into fusekit::TensorViews, the current stream, output allocation, and fusekit::Status
// turned into the exception PyTorch hands to Python. fusekit_ops.cc says how the operators are
// built and registered; norm_ops.cc and act_ops.cc hold the two families' operators.
#pragma once

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

// What the registration blocks of fusekit_ops.cc hand to each family.
using Library = torch::stable::detail::StableLibrary;

using torch::headeronly::ScalarType;
using torch::stable::Tensor;
using OptTensor = std::optional<Tensor>;

inline void raise_if_error(const Status& s) {
  if (s.ok()) return;
  if (s.code() == StatusCode::kRuntimeError) throw std::runtime_error(s.to_string());
  throw std::invalid_argument(s.to_string());
}

inline DType dtype_of(ScalarType t, const char* op, const char* arg) {
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

inline TensorView view(const Tensor& t, const char* op, const char* arg) {
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

inline TensorView view(const OptTensor& t, const char* op, const char* arg) {
  return t.has_value() ? view(*t, op, arg) : TensorView();
}

// The current stream of x's GPU (nullptr, unused, for CPU tensors).
inline Stream stream_of(const Tensor& x) {
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
inline int64_t rows_of(const Tensor& x) {
  int64_t m = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) m *= x.size(d);
  return m;
}

inline Tensor empty_like_rows(const Tensor& x, ScalarType dtype) {
  return torch::stable::new_empty(x, x.sizes(), dtype);
}

inline Tensor empty_vector(const Tensor& like, int64_t n, ScalarType dtype) {
  const std::vector<int64_t> shape{n};
  return torch::stable::new_empty(like, shape, dtype);
}

inline Tensor row_stats(const Tensor& x) {
  return empty_vector(x, rows_of(x), ScalarType::Float);
}

inline NormOptions options(const OptTensor& rstd, const OptTensor& mean, bool weight_after_cast,
                           const char* op) {
  NormOptions o;
  o.rstd = view(rstd, op, "rstd");
  o.mean = view(mean, op, "mean");
  o.weight_after_cast = weight_after_cast;
  return o;
}

// The residual in the requested residual dtype (a converted copy when it differs).
inline Tensor residual_in(const Tensor& residual, std::optional<ScalarType> residual_dtype) {
  if (!residual_dtype.has_value() || *residual_dtype == residual.scalar_type()) return residual;
  return torch::stable::to(residual, *residual_dtype);
}

inline float to_float(double v) { return static_cast<float>(v); }

// ---- fp8 outputs ---------------------------------------------------------------------------
// The format is a string ("e4m3fn" or "e4m3fnuz"), never inferred; out has its fp8 dtype.

// t's shape with the last dimension replaced by `last` (rank 0 stays rank 0: the C++ check of t
// reports it).
inline std::vector<int64_t> with_last(const Tensor& t, int64_t last) {
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  if (!shape.empty()) shape.back() = last;
  return shape;
}

inline int64_t last_dim(const Tensor& t) { return t.dim() > 0 ? t.size(t.dim() - 1) : 0; }

inline Fp8Format fp8_format_of(const std::string& format, const std::string& op) {
  if (format == "e4m3fn") return Fp8Format::kE4M3FN;
  if (format == "e4m3fnuz") return Fp8Format::kE4M3FNUZ;
  throw std::invalid_argument("invalid argument: " + op +
                              ": format: expected \"e4m3fn\" or \"e4m3fnuz\" but got \"" + format +
                              "\"");
}

inline ScalarType fp8_scalar_type(Fp8Format format) {
  return format == Fp8Format::kE4M3FNUZ ? ScalarType::Float8_e4m3fnuz : ScalarType::Float8_e4m3fn;
}

// The float32 per-row scales of a quantized out (`like`: the tensor whose rows they are): [M], or
// [..., 1] with keepdim.
inline Tensor row_scales(const Tensor& like, bool keepdim) {
  if (keepdim) return torch::stable::new_empty(like, with_last(like, 1), ScalarType::Float);
  return empty_vector(like, rows_of(like), ScalarType::Float);
}

// Each family's schemas (define_*) and kernels for one dispatch key (register_*).
void define_norm_ops(Library& m);
void register_norm_kernels(Library& m);
void define_act_ops(Library& m);
void register_act_kernels(Library& m);

}  // namespace fusekit::torch_ops
