// The fp8 output of the RMSNorm kernels (NormTraits::Fp8 names the format): the row's max|y| for
// a dynamic scale, the scale itself, and the codes of a group. What is computed, bit for bit, is
// core/fp8.h's reference; norm_kernel.cuh says where in a row's life each piece runs.
#pragma once

#include <cstdint>

#include "core/fp8.h"
#include "gpu/common/fp8_pack.cuh"
#include "gpu/norm/norm_kernel_args.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

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

// The row's scale from its max|y| (dynamic) or the static scale; stored when `writes_scale`.
// Returns 1 / scale.
template <class K>
FUSEKIT_DEVICE float fp8_inverse_for_row(const NormKernelArgs& a, int64_t row, float max_abs,
                                         bool writes_scale) {
  if (a.dynamic_scale == nullptr) return detail::fp8_inverse_scale(*a.static_scale);
  const float scale = detail::fp8_row_scale<typename K::Fp8>(max_abs, a.scale_upper_bound);
  if (writes_scale) a.dynamic_scale[row] = scale;
  return detail::fp8_inverse_scale(scale);
}


}  // namespace fusekit::gpu
