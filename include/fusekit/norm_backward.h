// Backward passes of the normalization ops: the gradients of RMSNorm and LayerNorm (alone or after
// a fused residual add) with respect to their input, weight and bias.
//
// The forward pass saves what the backward needs: its input h (x, or residual_out for a fused
// add) and the per-row statistics that NormOptions::rstd / NormOptions::mean return. With
// xhat = (h - mean) * rstd (mean = 0 for RMSNorm), w' = weight + weight_offset (1 when there is
// no weight), g = grad_out * w' and means taken over the N elements of a row:
//
//   rms_norm:    grad_h = rstd * (g - xhat * mean(g * xhat))
//   layer_norm:  grad_h = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   grad_weight = sum over rows of grad_out * xhat;   grad_bias = sum over rows of grad_out
//
// For a fused add (residual_out = x + residual, out = norm(residual_out)) the gradient that
// reaches residual_out from later layers is added: grad_h += grad_residual_out. grad_h is then
// the gradient of both x and residual (the caller casts it for whichever dtype differs).
// NormOptions::weight_after_cast is not differentiated separately: its intermediate rounding is
// treated as the identity, as is usual for rounding in mixed-precision training.
//
// Dtypes. grad_out: the forward output's dtype (float32, float16 or bfloat16). h: grad_out's dtype
// or float32 (the fp32 residual stream); grad_h and grad_residual_out: h's dtype. weight:
// grad_out's dtype or float32; grad_weight and grad_bias: weight's dtype (without a weight,
// grad_bias is grad_out's dtype or float32). rstd, mean: float32 with M elements. Shapes and
// strides follow norm.h: [..., N] with rows of any stride >= N and a contiguous last dimension.
//
// Determinism. grad_weight and grad_bias are sums over rows. They are formed without atomics:
// rows are split into norm_backward_partials(M) consecutive ranges (the CPU backend: fewer, longer
// ones, about 32 rows each), each range's float32 sum goes to its own row of `workspace`, and a
// second pass adds those rows in a fixed order. The result depends only on the inputs, M, N and
// the device's warp size, and is bitwise the same run to run.
// `workspace` is a contiguous float32 buffer of at least norm_backward_workspace_size(...)
// elements, on the tensors' device; it is needed only when grad_weight or grad_bias is requested.
//
// Validation and errors are as for the forward ops: every argument is checked before anything is
// written, and a failed Status names the argument, the expected and the actual value. Outputs
// (grad_h, grad_weight, grad_bias, workspace) must not overlap each other or any input.
#pragma once

#include <cstdint>

#include "fusekit/status.h"
#include "fusekit/tensor.h"

namespace fusekit {

// How many row ranges (partial sums) the weight and bias gradients of an M-row call use.
int64_t norm_backward_partials(int64_t rows);

// float32 elements of `workspace` needed by a backward call of M rows of N elements; 0 when
// neither gradient is requested.
int64_t norm_backward_workspace_size(int64_t rows, int64_t cols, bool weight_grad,
                                     bool bias_grad);

// grad_x (and grad_weight, when given) of out = rms_norm(x) * (weight + weight_offset).
Status rms_norm_backward(const TensorView& grad_x, const TensorView& grad_weight,
                         const TensorView& grad_out, const TensorView& x, const TensorView& rstd,
                         const TensorView& weight, float weight_offset = 0.0f,
                         const TensorView& workspace = TensorView(), Stream stream = nullptr);

// The same for out, residual_out = fused_add_rms_norm(x, residual, ...): grad_h, the gradient of
// x and of residual, from grad_out and grad_residual_out (the gradient that reached residual_out).
Status fused_add_rms_norm_backward(const TensorView& grad_h, const TensorView& grad_weight,
                                   const TensorView& grad_out,
                                   const TensorView& grad_residual_out,
                                   const TensorView& residual_out, const TensorView& rstd,
                                   const TensorView& weight, float weight_offset = 0.0f,
                                   const TensorView& workspace = TensorView(),
                                   Stream stream = nullptr);

// grad_x, grad_weight and grad_bias (each of the last two optional) of
// out = layer_norm(x) * weight + bias. weight may be absent (then it is 1 and grad_weight must
// be absent too).
Status layer_norm_backward(const TensorView& grad_x, const TensorView& grad_weight,
                           const TensorView& grad_bias, const TensorView& grad_out,
                           const TensorView& x, const TensorView& mean, const TensorView& rstd,
                           const TensorView& weight, const TensorView& workspace = TensorView(),
                           Stream stream = nullptr);

// The same after a fused add, as fused_add_rms_norm_backward.
Status fused_add_layer_norm_backward(const TensorView& grad_h, const TensorView& grad_weight,
                                     const TensorView& grad_bias, const TensorView& grad_out,
                                     const TensorView& grad_residual_out,
                                     const TensorView& residual_out, const TensorView& mean,
                                     const TensorView& rstd, const TensorView& weight,
                                     const TensorView& workspace = TensorView(),
                                     Stream stream = nullptr);

}  // namespace fusekit
