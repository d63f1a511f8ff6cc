// Device-side element types and their conversions to and from float32.
//
// 16-bit floats travel through kernels as raw bits in tiny structs (Half, BFloat16) rather than
// as __half / __nv_bfloat16 / hip_bfloat16, whose definitions differ between CUDA and HIP
// versions; the arithmetic is always float32, and the conversions are the platform's hardware
// round-to-nearest-even instructions (platform.h).
#pragma once

#include <cstdint>

#include "gpu/platform.h"

namespace fusekit::gpu {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

FUSEKIT_DEVICE float to_float(float v) { return v; }
FUSEKIT_DEVICE float to_float(Half v) { return half_bits_to_float(v.bits); }
FUSEKIT_DEVICE float to_float(BFloat16 v) { return bf16_bits_to_float(v.bits); }

template <typename T>
FUSEKIT_DEVICE T from_float(float v);
template <>
FUSEKIT_DEVICE float from_float<float>(float v) {
  return v;
}
template <>
FUSEKIT_DEVICE Half from_float<Half>(float v) {
  return Half{float_to_half_bits(v)};
}
template <>
FUSEKIT_DEVICE BFloat16 from_float<BFloat16>(float v) {
  return BFloat16{float_to_bf16_bits(v)};
}

// Round a float32 to T and back: the value a tensor of dtype T would hold.
template <typename T>
FUSEKIT_DEVICE float round_to(float v) {
  return to_float(from_float<T>(v));
}

}  // namespace fusekit::gpu
