// Turning runtime values (dtype, flags, load width, warp size) into compile-time constants.
//
// Each helper calls a generic lambda with a tag type or std::integral_constant and returns what
// the lambda returns, so a launcher reads as nested dispatches ending in one templated launch,
// with no macro tables and no numbered kernel copies.
#pragma once

#include <type_traits>

#include "core/dtype_dispatch.h"
#include "fusekit/tensor.h"
#include "gpu/common/convert.cuh"

namespace fusekit::gpu {

using detail::TypeTag;

// float32 / float16 / bfloat16 -> float / Half / BFloat16. Callers validate the dtype first.
template <typename F>
decltype(auto) dispatch_float_dtype(DType dtype, F&& f) {
  return detail::dispatch_float_dtype_as<Half, BFloat16>(dtype, f);
}

// For tensors whose dtype is either x's (TX) or float32: instantiates only those two.
template <typename TX, typename F>
decltype(auto) dispatch_x_or_float(DType dtype, F&& f) {
  if (dtype == DType::kFloat32) return f(TypeTag<float>{});
  return f(TypeTag<TX>{});
}

template <typename F>
decltype(auto) dispatch_bool(bool value, F&& f) {
  if (value) return f(std::true_type{});
  return f(std::false_type{});
}

// Calls f(std::integral_constant<int, v>) for v among the listed values; callers pass only listed
// values (anything else takes the last one).
template <int kFirst, int... kRest, typename F>
decltype(auto) dispatch_int(int v, F&& f) {
  if constexpr (sizeof...(kRest) == 0) {
    return f(std::integral_constant<int, kFirst>{});
  } else {
    if (v == kFirst) return f(std::integral_constant<int, kFirst>{});
    return dispatch_int<kRest...>(v, f);
  }
}

// The access forms kernels are instantiated for (vec_io.cuh's kLoad): whole 16-byte groups, where
// every pointer and row stride allows them (width >= kGroup), else 1: accesses as wide as each
// group's address allows, found at run time, or one element at a time (kAdaptsToAlignment).
template <int kGroup, typename F>
decltype(auto) dispatch_load_width(int width, F&& f) {
  if (width >= kGroup) return f(std::integral_constant<int, kGroup>{});
  return f(std::integral_constant<int, 1>{});
}

// Warp sizes this build can run: 32 on CUDA; 32 (RDNA) and 64 (CDNA) on HIP.
template <typename F>
decltype(auto) dispatch_warp(int warp_size, F&& f) {
  if constexpr (kBuildsWave64) {
    if (warp_size == 64) return f(std::integral_constant<int, 64>{});
  }
  (void)warp_size;
  return f(std::integral_constant<int, 32>{});
}

}  // namespace fusekit::gpu
