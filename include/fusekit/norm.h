// Normalization ops: RMSNorm and LayerNorm, alone or fused with the residual add that precedes
// them at every transformer layer boundary.
//
// Shapes. x is [..., N] with any rank >= 1; leading dimensions are flattened into M rows. Rows may
// be strided (row stride >= N) but the last dimension must be contiguous. out (and residual_out)
// have x's shape, each with its own strides. weight and bias are [N], contiguous. M == 0 is a
// no-op. Every tensor of a call lives on one device: CPU tensors run on the CPU backend, GPU
// tensors on the GPU backend, on `stream`.
//
// Dtypes. x, out, residual and residual_out: float32, float16 or bfloat16; out has x's dtype.
// weight and bias: x's dtype or float32. residual and residual_out: x's dtype or float32 (an fp32
// residual stream with bf16 activations), and the same as each other. Optional per-row outputs
// rstd and mean are float32 with M elements. Accumulation is in float32.
//
// Numerics, per row (h is the row being normalized):
//   rms_norm:   y = h * rstd * (w + weight_offset),     rstd = 1 / sqrt(mean(h^2) + eps)
//   layer_norm: y = (h - mean) * rstd * w + b,          rstd = 1 / sqrt(mean((h - mean)^2) + eps)
// weight_offset = 1 gives Gemma's (1 + w). By default the product is formed in float32 and rounded
// once to out's dtype (the order of FlashInfer, Gemma and PyTorch's layer_norm). With
// NormOptions::weight_after_cast the normalized value is first rounded to x's dtype and then
// multiplied by the weight, rounding again: Hugging Face's LlamaRMSNorm order,
// `weight * hidden.to(input_dtype)`.
//
// Fused add. h = x + residual, computed in float32 and rounded to residual's dtype; that rounded
// sum is written to residual_out and is also what gets normalized, exactly as a model that adds
// in its residual dtype and then normalizes.
//
// Determinism. A row's result depends only on that row, N, the dtypes and the device: it is
// bitwise the same whether the row is normalized alone or in a batch of any size, at any
// alignment, and from run to run.
#pragma once

#include "fusekit/status.h"
#include "fusekit/tensor.h"

namespace fusekit {

struct NormOptions {
  // Optional per-row float32 outputs with M elements (for a backward pass): 1/sqrt(var + eps), and
  // for the layer norms the row mean. Leave absent (TensorView()) when not needed.
  TensorView rstd;
  TensorView mean;
  // false: y = round(n * w). true: y = round(round_to_x_dtype(n) * w) (Hugging Face Llama order).
  bool weight_after_cast = false;
};

// out = rms_norm(x) * (weight + weight_offset). out may be x itself (same data and strides).
Status rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps,
                float weight_offset = 0.0f, const NormOptions& options = {},
                Stream stream = nullptr);

// Out of place: residual_out = x + residual; out = rms_norm(residual_out) * (weight + offset).
// out may be x and residual_out may be residual (same data and strides); nothing else may overlap.
Status fused_add_rms_norm(const TensorView& out, const TensorView& residual_out,
                          const TensorView& x, const TensorView& residual,
                          const TensorView& weight, float eps, float weight_offset = 0.0f,
                          const NormOptions& options = {}, Stream stream = nullptr);

// In place (the vLLM / FlashInfer convention): residual <- x + residual; x <- rms_norm(residual).
Status fused_add_rms_norm_inplace(const TensorView& x, const TensorView& residual,
                                  const TensorView& weight, float eps, float weight_offset = 0.0f,
                                  const NormOptions& options = {}, Stream stream = nullptr);

// out = layer_norm(x) * weight + bias; weight and bias may each be absent (TensorView()).
Status layer_norm(const TensorView& out, const TensorView& x, const TensorView& weight,
                  const TensorView& bias, float eps, const NormOptions& options = {},
                  Stream stream = nullptr);

// Out of place: residual_out = x + residual; out = layer_norm(residual_out) * weight + bias.
Status fused_add_layer_norm(const TensorView& out, const TensorView& residual_out,
                            const TensorView& x, const TensorView& residual,
                            const TensorView& weight, const TensorView& bias, float eps,
                            const NormOptions& options = {}, Stream stream = nullptr);

// In place: residual <- x + residual; x <- layer_norm(residual) * weight + bias.
Status fused_add_layer_norm_inplace(const TensorView& x, const TensorView& residual,
                                    const TensorView& weight, const TensorView& bias, float eps,
                                    const NormOptions& options = {}, Stream stream = nullptr);

}  // namespace fusekit
