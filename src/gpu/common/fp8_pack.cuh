// Quantization of a group of float32 values to fp8 codes on the GPU, shared by every kernel with
// an fp8 output: code = fp8(v * inverse_scale) (core/fp8.h's fp8_quantize), converted by the
// hardware two at a time where it has the exact same rule (e4m3fn on CUDA sm_89+, platform.h)
// and by core/fp8.h's integer conversion otherwise. Either way the codes equal the CPU
// reference's bit for bit.
#pragma once

#include <cstdint>

#include "core/fp8.h"
#include "gpu/common/vec_io.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

template <class F, int G>
FUSEKIT_DEVICE Packed<uint8_t, G> quantize_group(const float (&v)[G], float inverse_scale) {
  Packed<uint8_t, G> q;
  constexpr bool kHardware = hardware_e4m3fn_compiled() &&
                             F::kFormat == Fp8Format::kE4M3FN && G % 2 == 0;
  if constexpr (kHardware) {
#pragma unroll
    for (int e = 0; e < G; e += 2) {
      const uint16_t pair = hardware_e4m3fn_pair(v[e] * inverse_scale, v[e + 1] * inverse_scale);
      q.elems[e] = static_cast<uint8_t>(pair & 0xFFu);
      q.elems[e + 1] = static_cast<uint8_t>(pair >> 8);
    }
  } else {
#pragma unroll
    for (int e = 0; e < G; ++e) q.elems[e] = detail::fp8_quantize<F>(v[e], inverse_scale);
  }
  return q;
}

}  // namespace fusekit::gpu
