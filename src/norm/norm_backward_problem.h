// NormBackwardProblem: one validated backward call of the normalization family, flattened to rows
// and raw pointers, as NormProblem is for the forward ops.
//
// norm_backward_api.cc checks the arguments and builds it; the CPU backend (cpu/norm) and the GPU
// backend (gpu/norm/norm_backward.cu) take it as their only input and never re-validate.
#pragma once

#include <cstdint>

#include "fusekit/status.h"
#include "fusekit/tensor.h"
#include "norm/norm_problem.h"

namespace fusekit::detail {

struct NormBackwardProblem {
  NormKind kind = NormKind::kRms;

  int64_t rows = 0;  // M
  int64_t cols = 0;  // N

  DType grad_out_dtype = DType::kFloat32;    // the forward output's dtype
  DType x_dtype = DType::kFloat32;           // h, grad_x and grad_extra
  DType weight_dtype = DType::kFloat32;      // weight (when present)
  DType param_grad_dtype = DType::kFloat32;  // grad_weight and grad_bias

  const void* grad_out = nullptr;
  int64_t grad_out_stride = 0;  // row strides, in elements
  const void* x = nullptr;      // h: the rows the forward pass normalized
  int64_t x_stride = 0;
  const void* grad_extra = nullptr;  // grad_residual_out of a fused add; may be null
  int64_t grad_extra_stride = 0;
  void* grad_x = nullptr;
  int64_t grad_x_stride = 0;

  const float* rstd = nullptr;  // [M]
  const float* mean = nullptr;  // [M]; layer norms only
  const void* weight = nullptr;  // [N]; may be null for layer norms (then 1)
  float weight_offset = 0.0f;

  void* grad_weight = nullptr;  // [N]; may be null
  void* grad_bias = nullptr;    // [N]; layer norms only, may be null
  float* workspace = nullptr;   // partials x (weight, bias) x N floats, when either is requested
  int64_t partials = 0;         // norm_backward_partials(rows)

  Device device;

  bool param_grads() const { return grad_weight != nullptr || grad_bias != nullptr; }
  // Floats per partial row of the workspace: N for each requested parameter gradient.
  int64_t workspace_row() const {
    return cols * ((grad_weight != nullptr ? 1 : 0) + (grad_bias != nullptr ? 1 : 0));
  }
  // Offsets of the weight and bias sums within a partial row.
  int64_t weight_offset_in_row() const { return 0; }
  int64_t bias_offset_in_row() const { return grad_weight != nullptr ? cols : 0; }
  // The rows of partial p: [first_row(p), first_row(p + 1)).
  int64_t first_row(int64_t p) const { return partials == 0 ? 0 : p * rows / partials; }
};

Status run_norm_backward_cpu(const NormBackwardProblem& p);
// A stub returning kUnsupported in builds without a GPU backend.
Status run_norm_backward_gpu(const NormBackwardProblem& p, Stream stream);

}  // namespace fusekit::detail
