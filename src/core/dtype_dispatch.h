// Host-side storage types for the float dtypes, and the helper that turns a runtime DType into a
// compile-time type: with the host's types for the CPU backend, with the GPU's for the GPU code
// (gpu/common/dispatch.h).
#pragma once

#include <cstdint>

#include "core/half.h"
#include "fusekit/tensor.h"

namespace fusekit::detail {

struct HostHalf {
  uint16_t bits;
};
struct HostBFloat16 {
  uint16_t bits;
};

inline float to_float(float v) { return v; }
inline float to_float(HostHalf v) { return fp16_to_float(v.bits); }
inline float to_float(HostBFloat16 v) { return bf16_to_float(v.bits); }

template <typename T>
inline T from_float(float v);
template <>
inline float from_float<float>(float v) {
  return v;
}
template <>
inline HostHalf from_float<HostHalf>(float v) {
  return HostHalf{float_to_fp16(v)};
}
template <>
inline HostBFloat16 from_float<HostBFloat16>(float v) {
  return HostBFloat16{float_to_bf16(v)};
}

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with T = float, THalf or TBFloat16 for a float32, float16 or bfloat16
// dtype: the storage types of the caller's side. Callers validate the dtype first; any other
// value maps to float.
template <typename THalf, typename TBFloat16, typename F>
decltype(auto) dispatch_float_dtype_as(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat16: return f(TypeTag<THalf>{});
    case DType::kBFloat16: return f(TypeTag<TBFloat16>{});
    default: return f(TypeTag<float>{});
  }
}

// The same with the host storage types (float32, float16, bfloat16).
template <typename F>
decltype(auto) dispatch_float_dtype(DType dtype, F&& f) {
  return dispatch_float_dtype_as<HostHalf, HostBFloat16>(dtype, f);
}

}  // namespace fusekit::detail
