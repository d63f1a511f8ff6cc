// Quantization of a group of float32 values to fp8 codes on the GPU, shared by every kernel with
// an fp8 output: code = fp8(v * inverse_scale) (core/fp8.h's fp8_quantize), converted by the
// hardware (two codes per conversion, four into each 32-bit word) where it has the exact same
// rule (e4m3fn on CUDA sm_89+, platform.h) and by core/fp8.h's integer conversion otherwise.
// Either way the codes equal the CPU reference's bit for bit.
#pragma once

#include <cstdint>

#include "core/fp8.h"
#include "gpu/common/vec_io.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

// Whether this compilation converts to format F in hardware (else in software, a few tens of
// integer instructions per code).
template <class F>
FUSEKIT_HOST_DEVICE constexpr bool hardware_fp8_codes() {
  return hardware_e4m3fn_compiled() && F::kFormat == Fp8Format::kE4M3FN;
}

template <class F, int G>
FUSEKIT_DEVICE Packed<uint8_t, G> quantize_group(const float (&v)[G], float inverse_scale) {
  static_assert(G % 4 == 0, "groups fill whole 32-bit words of codes");
  Packed<uint8_t, G> q;
  // The codes are assembled a 32-bit word at a time (byte e % 4 of word e / 4): written byte by
  // byte, the compiler built each word with a mask and a shift per code.
#pragma unroll
  for (int w = 0; w < G / 4; ++w) {
    const float* x = v + 4 * w;
    if constexpr (hardware_fp8_codes<F>()) {
      q.words[w] = hardware_e4m3fn_quad(x[0] * inverse_scale, x[1] * inverse_scale,
                                        x[2] * inverse_scale, x[3] * inverse_scale);
    } else {
      uint32_t word = 0;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        word |= uint32_t{detail::fp8_quantize<F>(x[b], inverse_scale)} << (8 * b);
      }
      q.words[w] = word;
    }
  }
  return q;
}

}  // namespace fusekit::gpu
