// The fp8 output of the RMSNorm kernels (NormTraits::Fp8 names the format): the row's max|y| for
// a dynamic scale (and where it is reduced: MaxAfterSum, MaxBesideSum), the scale itself, and the
// codes of a group. What is computed, bit for bit, is core/fp8.h's reference; norm_kernel.cuh
// says where in a row's life each piece runs.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/fp8.h"
#include "gpu/common/fp8_pack.cuh"
#include "gpu/norm/norm_kernel_args.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

// Whether an fp8 output keeps y in registers between its max and its codes, where it replaces
// the packed row and weight it was computed from (ptxas: no spill), so the codes cost only their
// conversion (rms_norm_quant_fp8 [16384, 4096] 92.8 -> 99.3% of copy: bench/NOTES.md, "Norm
// v23"). Not for fp16 at five groups per thread (12-44 bytes spilled), which recomputes y from
// the packed row for the codes.
template <class K, int kItems>
inline constexpr bool kFp8KeepsY =
    K::kFp8Out && (kItems <= 4 || !std::is_same_v<typename K::TX, Half>);

// Where an fp8 output's dynamic scale gets its row max|y| (RMSNorm). y = (h * w) * rstd
// (output_values), and rounding is monotone with rstd > 0 (or 0, or NaN, which give 0 or NaN
// either way), so max|y| = max|h * w| * rstd bit for bit: max|h * w| is known before the sum of
// squares is reduced and can travel beside it, one reduction a row (MaxBesideSum: `reduce(v, m)`
// gives the row's total of v, as finish_row's reduce, and the NanMax of m; the registers path,
// where y stays in registers). MaxAfterSum, the cluster path's, and kernels that form y again
// for the codes: max|y| over the formed y in a second reduction, finish_row's reduce_max; the
// same bits. Measured on an H100 (bench/NOTES.md, "Norm v32"), beside the sum: rms_norm_quant_fp8
// [2048, 8192] 75 -> 81% of copy, [16384, 16384] 92 -> 96%; after it: the cluster path at N =
// 32768 (89% against 75% beside) and fp16 at five groups a thread (94% against 82%).
struct MaxAfterSum {
  static constexpr bool kUsed = false;
};

template <class Reduce>
struct MaxBesideSum {
  static constexpr bool kUsed = true;
  Reduce reduce;
};

// max|y| over one group's elements in the row (all of them when kWholeGroup). The quantized
// values are y saturated to float32's range; that saturation is left to the row's scale
// (fp8_row_scale saturates max|y|), which gives the same bits: the largest saturated magnitude is
// the saturated largest magnitude, NaN included.
template <class K, bool kWholeGroup, typename Index>
FUSEKIT_DEVICE float group_max_abs(float m, const float (&y)[K::kGroup], Index col, Index n) {
#pragma unroll
  for (int e = 0; e < K::kGroup; ++e) {
    if (kWholeGroup || col + e < n) m = detail::max_abs_accumulate(m, y[e]);
  }
  return m;
}

// The fp8 codes of one group of y. Saturating y to float32's range first only changes +-inf,
// which the hardware's satfinite conversion turns into +-fp8_max either way (y * 1 / scale is
// then +-inf or beyond fp8_max: 1 / scale is finite and positive), so only the integer
// conversion needs it.
template <class K>
FUSEKIT_DEVICE Packed<uint8_t, K::kGroup> quantize_output(const float (&y)[K::kGroup],
                                                          float inverse_scale) {
  using F = typename K::Fp8;
  if constexpr (hardware_e4m3fn_compiled() && F::kFormat == Fp8Format::kE4M3FN) {
    return quantize_group<F>(y, inverse_scale);
  } else {
    float v[K::kGroup];
#pragma unroll
    for (int e = 0; e < K::kGroup; ++e) v[e] = detail::saturate_to_float_range(y[e]);
    return quantize_group<F>(v, inverse_scale);
  }
}

// Where a kernel reads a static scale (a float in device memory; fp8_inverse_for_row calls
// `static_scale()`): where the codes need it, after the row's reduction (StaticScaleAtCodes), or
// as the row's loads are issued (StaticScaleBesideLoads), whose latency then hides under theirs,
// at the cost of a register held across the reduction. The registers kernels without the add
// read it beside the loads; the fused add's four-group kernels took 96 registers instead of 80
// that way (ptxas), two blocks an SM where three fit (bench/NOTES.md, "Norm v33").
struct StaticScaleAtCodes {
  const float* scale;
  FUSEKIT_DEVICE float operator()() const { return *scale; }
};
struct StaticScaleBesideLoads {
  float value;  // 0 where the scale is dynamic
  FUSEKIT_DEVICE float operator()() const { return value; }
};
template <class K, bool kBesideLoads>
FUSEKIT_DEVICE auto static_scale_reader(const NormKernelArgs& a) {
  if constexpr (K::kFp8Out && kBesideLoads) {
    return StaticScaleBesideLoads{a.dynamic_scale == nullptr ? *a.static_scale : 0.0f};
  } else {
    return StaticScaleAtCodes{a.static_scale};
  }
}

// The row's scale from its max|y| (dynamic) or the static scale (`static_scale()`: see
// StaticScaleAtCodes); stored when `writes_scale`. Returns 1 / scale.
template <class K, class StaticScale>
FUSEKIT_DEVICE float fp8_inverse_for_row(const NormKernelArgs& a, int64_t row, float max_abs,
                                         const StaticScale& static_scale, bool writes_scale) {
  if (a.dynamic_scale == nullptr) return detail::fp8_inverse_scale(static_scale());
  const float scale = detail::fp8_row_scale<typename K::Fp8>(max_abs, a.scale_upper_bound);
  if (writes_scale) a.dynamic_scale[row] = scale;
  return detail::fp8_inverse_scale(scale);
}

}  // namespace fusekit::gpu
