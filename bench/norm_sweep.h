// The norm family's GPU-only hooks: the configuration the launch heuristic picks, and the
// alternative launches that --sweep times.
//
// They call the library's internal GPU entry (src/gpu/norm/norm_gpu.h), which exists only in
// builds with a GPU backend, so they come in two files chosen by CMake like gpu_timer:
// norm_sweep_gpu.cc and norm_sweep_none.cc (which reports no configuration and no variants).
#pragma once

#include <string>
#include <vector>

#include "ops.h"

namespace fusekit::bench {

// The norm family's slots (ops.cc declares them in this order) and ops (OpSpec::variant).
enum NormSlot {
  kNormX,
  kNormResidual,
  kNormOut,
  kNormResidualOut,
  kNormWeight,
  kNormBias,
  kNormScale,  // storage of the fp8 forms' float32 scales
  // A float32 residual stream beside 16-bit activations: [M, 2N] of x's dtype, whose storage
  // holds the [M, N] float32 residual (contiguous rows, whatever --row-pad)
  kNormResidualF32,
};
enum class NormOp {
  kRms,             // rms_norm(out, x, weight)
  kAddRms,          // fused_add_rms_norm_inplace(x, residual, weight)
  kAddRmsOop,       // fused_add_rms_norm(out, residual_out, x, residual, weight)
  kLayer,           // layer_norm(out, x, weight, bias)
  kAddLayer,        // fused_add_layer_norm_inplace(x, residual, weight, bias)
  kAddLayerOop,     // fused_add_layer_norm(out, residual_out, x, residual, weight, bias)
  // fp8 (e4m3fn) out, a dynamic per-row or a static scale; the fused-add forms update residual
  // in place (residual_out = residual).
  kRmsFp8,          // rms_norm_quant_fp8(out, scale, x, weight)
  kRmsFp8Static,    // rms_norm_quant_fp8_static(out, x, weight, scale)
  kAddRmsFp8,       // fused_add_rms_norm_quant_fp8(out, scale, residual, x, residual, weight)
  kAddRmsFp8Static, // fused_add_rms_norm_quant_fp8_static(out, residual, x, residual, weight,
                    //                                    scale)
  // The in-place fused adds with a float32 residual (the residual_f32 slot)
  kAddRmsF32Residual,    // fused_add_rms_norm_inplace(x, residual_f32, weight)
  kAddLayerF32Residual,  // fused_add_layer_norm_inplace(x, residual_f32, weight, bias)
};
constexpr float kRmsEps = 1e-6f;
constexpr float kLayerEps = 1e-5f;

Status norm_describe(const OpSpec& op, const OpArgs& args, const GpuFacts& gpu, std::string* text);
Status norm_sweep(const OpSpec& op, const OpArgs& args, const GpuFacts& gpu,
                  std::vector<SweepVariant>* variants);

}  // namespace fusekit::bench
