// The fp8 output of the RMSNorm kernels (NormTraits::Fp8 names the format, or says the kernel's
// arguments do): the row's max|y| for
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

// Whether K's kernels leave out the outputs of weight_after_cast, which the fp8 forms never take
// (fusekit/norm.h; launch_norm_fp8 refuses it): those of the format in the arguments (e4m3fnuz
// on CUDA; on HIP both formats), and e4m3fn's where converted in software. There that second tail
// (finish_row_impl) held half of each kernel's code, its conversions: the fp8 translation units'
// compile time is 21-35% shorter without it. With the hardware's e4m3fn conversion the kernels
// keep it: without it, ptxas allocated the kept tail differently (bf16 rms_norm_quant_fp8's
// four-group kernels spilled 8 bytes), 0.92-1.06x the time across the fp8 forms on an H200
// (bench/NOTES.md, "fp8 norm kernels without their untaken tail").
template <class K>
FUSEKIT_HOST_DEVICE constexpr bool without_cast_first_outputs() {
  if constexpr (K::kFp8Out) {
    return !(std::is_same_v<typename K::Fp8, detail::Fp8E4M3FN> && hardware_fp8_codes());
  } else {
    return false;
  }
}

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
FUSEKIT_DEVICE Packed<uint8_t, K::kGroup> quantize_output(const NormKernelArgs& a,
                                                          const float (&y)[K::kGroup],
                                                          float inverse_scale) {
  using F = typename K::Fp8;
  if constexpr (hardware_fp8_codes()) {
    return quantize_group<F>(y, inverse_scale, a.fp8);
  } else {
    float v[K::kGroup];
#pragma unroll
    for (int e = 0; e < K::kGroup; ++e) v[e] = detail::saturate_to_float_range(y[e]);
    return quantize_group<F>(v, inverse_scale, a.fp8);
  }
}

// Where a kernel reads a static scale (a float in device memory; fp8_inverse_for_row takes
// `static_scale.inverse()`, its 1 / scale):
// - StaticScaleAtCodes: where the codes need it, after the row's reduction: an L2 round trip and
//   a division on the row's path (the cluster and staged kernels).
// - StaticScaleBesideLoads: as the row's loads are issued, whose latency then hides under theirs,
//   at the cost of a register held across the reduction (the registers kernels without the add).
// - StaticScaleStaged: thread 0 of the block reads it beside its loads and leaves it in shared
//   memory (stage_static_scale) before the row's reduction, whose block barrier (row_sum, rows
//   of more than one warp) publishes it to every thread: no register held across the reduction,
//   no L2 round trip after it. For the fused add's registers kernels, whose four-group kernels
//   took 96 registers instead of 80 with the scale beside the loads (ptxas), two blocks an SM
//   where three fit (bench/NOTES.md, "Norm v33", "Norm v34"). Rows of one warp or less have no
//   such barrier and read it at the codes. Thread 0 stages the scale, not 1 / scale: the
//   division's branch (its slow path) there took the same kernels to 96 registers too.
// Each gives the same bits: 1 / scale is the one division, wherever it runs.
struct StaticScaleAtCodes {
  const float* scale;
  FUSEKIT_DEVICE float inverse() const { return detail::fp8_inverse_scale(*scale); }
};
struct StaticScaleBesideLoads {
  float value;  // 0 where the scale is dynamic
  FUSEKIT_DEVICE float inverse() const { return detail::fp8_inverse_scale(value); }
};
// The block's staged scale: one float of shared memory in each kernel that stages it.
FUSEKIT_DEVICE float& staged_static_scale() {
  __shared__ float scale;
  return scale;
}
struct StaticScaleStaged {
  const float* scale;
  bool staged;  // uniform: the row's reduction has a block barrier
  FUSEKIT_DEVICE float inverse() const {
    return detail::fp8_inverse_scale(staged ? staged_static_scale() : *scale);
  }
};

// Where a registers kernel reads a static scale (see above): beside the loads without the add,
// staged with it; kAtCodes for the paths of a dynamic scale (MaxBesideSum), which read none.
enum class StaticScaleRead { kAtCodes, kBesideLoads, kStaged };
template <class K, class MaxRule>
inline constexpr StaticScaleRead kRegistersScaleRead = MaxRule::kUsed ? StaticScaleRead::kAtCodes
                                                       : K::kAdd ? StaticScaleRead::kStaged
                                                                 : StaticScaleRead::kBesideLoads;

template <class K, StaticScaleRead kRead>
FUSEKIT_DEVICE auto static_scale_reader(const NormKernelArgs& a, int tpr) {
  if constexpr (K::kFp8Out && kRead == StaticScaleRead::kBesideLoads) {
    return StaticScaleBesideLoads{a.dynamic_scale == nullptr ? *a.static_scale : 0.0f};
  } else if constexpr (K::kFp8Out && kRead == StaticScaleRead::kStaged) {
    return StaticScaleStaged{a.static_scale, tpr > K::kWarp};
  } else {
    return StaticScaleAtCodes{a.static_scale};
  }
}

// StaticScaleStaged's store, by thread 0 of the block once its row's loads are issued: its load
// of the scale then waits beside them.
template <class StaticScale>
FUSEKIT_DEVICE void stage_static_scale(const NormKernelArgs& a, const StaticScale& reader) {
  if constexpr (std::is_same_v<StaticScale, StaticScaleStaged>) {
    if (reader.staged && a.dynamic_scale == nullptr && threadIdx.x == 0) {
      staged_static_scale() = *a.static_scale;
    }
  }
}

// The row's scale from its max|y| (dynamic) or the static scale (`static_scale.inverse()`: see
// StaticScaleAtCodes); stored when `writes_scale`. Returns 1 / scale.
template <class K, class StaticScale>
FUSEKIT_DEVICE float fp8_inverse_for_row(const NormKernelArgs& a, int64_t row, float max_abs,
                                         const StaticScale& static_scale, bool writes_scale) {
  if (a.dynamic_scale == nullptr) return static_scale.inverse();
  const float scale = detail::fp8_row_scale(max_abs, a.scale_upper_bound,
                                            codes_spec<typename K::Fp8>(a.fp8));
  if (writes_scale) a.dynamic_scale[row] = scale;
  return detail::fp8_inverse_row_scale(scale);
}

}  // namespace fusekit::gpu
