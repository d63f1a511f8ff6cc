// Normalization ops: RMSNorm and LayerNorm, alone or fused with the residual add that precedes
// them at every transformer layer boundary.
//
// Shapes. x is [..., N] with any rank >= 1; leading dimensions are flattened into M rows. Rows may
// be strided (row stride >= N) but the last dimension must be contiguous. out (and residual_out)
// have x's shape, each with its own strides. weight and bias are [N], contiguous. M == 0 is a
// no-op. Every tensor of a call lives on one device: CPU tensors run on the CPU backend, GPU
// tensors on the GPU backend, on `stream`.
//
// Rows in runs. For rms_norm and layer_norm, the leading dimensions of x and out may also flatten
// into two strides: runs of rows of one stride >= N, the runs one stride apart, each run ending
// before the next begins. A per-head norm (the q / k norms of Qwen3, Gemma 3 or Command R) on a
// view of a fused q/k/v projection's output is such a call: q = qkv[:, :H * D] seen as [T, H, D]
// (strides {(H + 2 * Hkv) * D, D, 1}) is T runs of H rows, normalized where it lies, in place too
// (out = x), with no copy, and with the bits of the same rows laid out one stride apart. x and
// out in runs must have runs of the same length (one of them may be rows of one stride), fewer
// than 2^31 rows, and runs less than 2^31 elements further apart than their rows. The fused adds
// (whose residual stream is rows of one stride), the fp8 forms (whose outputs feed GEMMs) and the
// backward ops take rows of one stride.
//
// Dtypes. x, out, residual and residual_out: float32, float16 or bfloat16; out has x's dtype
// (the fp8 forms' out: see "fp8 output" below).
// weight and bias: x's dtype or float32. residual and residual_out: x's dtype or float32 (an fp32
// residual stream with bf16 activations), and the same as each other. Optional per-row outputs
// rstd and mean are float32 with M elements. Accumulation is in float32, as in PyTorch's norms: a
// row whose sum of squares (of deviations, for LayerNorm) overflows it (elements of magnitude
// ~1.8e19 / sqrt(N) and up) gets rstd 0 and so an output of zeros (LayerNorm: the bias).
//
// Numerics, per row (h is the row being normalized):
//   rms_norm:   y = h * rstd * (w + weight_offset),     rstd = 1 / sqrt(mean(h^2) + eps)
//   layer_norm: y = (h - mean) * rstd * w + b,          rstd = 1 / sqrt(mean((h - mean)^2) + eps)
// weight_offset = 1 gives Gemma's (1 + w). By default the product is formed in float32 and rounded
// once to out's dtype (the order of FlashInfer, Gemma and PyTorch's layer_norm); RMSNorm forms it
// as (h * (w + weight_offset)) * rstd, whose largest magnitude in a row is max|h * (w +
// weight_offset)| * rstd exactly (the fp8 forms' dynamic scale needs no second pass). With
// NormOptions::weight_after_cast the normalized value is first rounded to x's dtype and then
// multiplied by the weight, rounding again: Hugging Face's LlamaRMSNorm order,
// `weight * hidden.to(input_dtype)`.
//
// Fused add. h = x + residual, computed in float32 and rounded to residual's dtype; that rounded
// sum is written to residual_out and is also what gets normalized, exactly as a model that adds
// in its residual dtype and then normalizes.
//
// fp8 output (rms_norm_quant_fp8*, fused_add_rms_norm_quant_fp8*). RMSNorm with its output
// quantized to fp8 in the same pass, for the fp8 GEMM that follows it. y is the float32 value the
// plain op would round to out's dtype, in the default order (weight applied in float32; these
// forms take no NormOptions: no weight_after_cast, no rstd). Then, per row,
//   dynamic: scale[row] = max(min(max|y| / fp8_max, scale_upper_bound), 1 / (fp8_max * 512)),
//            out = fp8(y * (1 / scale[row]))
//   static:  out = fp8(y * (1 / scale[0]))
// with fp8_max = 448 (e4m3fn) or 240 (e4m3fnuz) and scale_upper_bound = 0 meaning no bound: the
// quantization of the fp8 activation ops (fusekit/activation.h), from the same helpers, so the
// conventions (vLLM's scale floor, NaN, saturation, one reciprocal per row or per call) are
// identical. A y beyond float32's range is taken as +-FLT_MAX before it is scaled; the
// float -> fp8 conversion rounds to nearest even and saturates at +-fp8_max (fusekit/fp8.h). A row
// holding NaN gets NaN codes (and a NaN scale when dynamic); an all-zero row gets zero codes (and
// the floor scale when dynamic). The codes and scales are exactly those of quantizing, with these
// rules, the float32 values the plain op computes on the same backend; the CPU and GPU backends
// sum rows in different orders, so their y (and then a code, where y / scale lies at a rounding
// boundary) may differ in the last place.
//   out: x's shape, dtype the fp8 dtype of `format` (always an explicit argument: the two
//        encodings are not interchangeable).
//   dynamic scale: float32 output, one per row: shape [M] or out's shape with the last dimension
//        1, elements contiguous.
//   static scale: float32 input of one element, shape [] or [1], on the tensors' device, read by
//        the op when it runs (not a host float: a CUDA graph replays with whatever it then
//        holds). It should be finite and > 0; its value is not checked (it may live on the GPU).
// Aliasing: out and the dynamic scale overlap nothing; in the fused-add forms residual_out may be
// residual itself (the in-place update of the residual stream, as vLLM does), x is only read, and
// nothing else may overlap an output. Overlap means a shared byte: views of one buffer whose
// rows interleave without meeting (an output in the columns beside the input's) are accepted.
//
// Determinism. A row's result depends only on that row, N, the dtypes and the device: it is
// bitwise the same whether the row is normalized alone or in a batch of any size, at any
// alignment, and from run to run.
#pragma once

#include "fusekit/fp8.h"
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

// out = fp8(rms_norm(x) * (weight + weight_offset) / scale) with a dynamic per-row scale
// (written to `scale`, [M] or [..., 1] float32). scale_upper_bound: 0 for none, else a positive
// cap on every row's scale.
Status rms_norm_quant_fp8(const TensorView& out, const TensorView& scale, const TensorView& x,
                          const TensorView& weight, float eps, Fp8Format format,
                          float weight_offset = 0.0f, float scale_upper_bound = 0.0f,
                          Stream stream = nullptr);

// The same with a static scale: `scale`, one float32 element ([] or [1]) read by the op.
Status rms_norm_quant_fp8_static(const TensorView& out, const TensorView& x,
                                 const TensorView& weight, const TensorView& scale, float eps,
                                 Fp8Format format, float weight_offset = 0.0f,
                                 Stream stream = nullptr);

// residual_out = x + residual (rounded to residual's dtype); out = fp8(rms_norm(residual_out) *
// (weight + weight_offset) / scale) with a dynamic per-row scale written to `scale`.
// residual_out may be residual (in place); nothing else may overlap.
Status fused_add_rms_norm_quant_fp8(const TensorView& out, const TensorView& scale,
                                    const TensorView& residual_out, const TensorView& x,
                                    const TensorView& residual, const TensorView& weight,
                                    float eps, Fp8Format format, float weight_offset = 0.0f,
                                    float scale_upper_bound = 0.0f, Stream stream = nullptr);

// The same with a static scale (one float32 element read by the op).
Status fused_add_rms_norm_quant_fp8_static(const TensorView& out, const TensorView& residual_out,
                                           const TensorView& x, const TensorView& residual,
                                           const TensorView& weight, const TensorView& scale,
                                           float eps, Fp8Format format,
                                           float weight_offset = 0.0f, Stream stream = nullptr);

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
