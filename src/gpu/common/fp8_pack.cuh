// Quantization of a group of float32 values to fp8 codes on the GPU, shared by every kernel with
// an fp8 output: code = fp8(v * inverse_scale) (core/fp8.h's fp8_quantize), converted by the
// hardware (two codes per conversion, four into each 32-bit word) where it has the exact same
// rule (e4m3fn on CUDA sm_89+, platform.h) and by core/fp8.h's integer conversion otherwise.
// Either way the codes equal the CPU reference's bit for bit.
//
// A kernel's format is a template argument: Fp8E4M3FN where the hardware converts to it (CUDA),
// and Fp8FormatInArgs everywhere the conversion is core/fp8.h's integer one (every format on
// HIP, e4m3fnuz on CUDA). There the two formats differ only in constants, which the kernel reads
// from its arguments (an Fp8Spec), so one kernel set serves both: on HIP half the fp8 kernels
// to compile, where the two formats' RMSNorm units were nearly half of the build's compile time
// (bench/NOTES.md, "One fp8 kernel set for both formats where the conversion is software").
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/fp8.h"
#include "gpu/common/vec_io.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

// The kernels' format tag for codes converted in software in the format the kernel's arguments
// name (their detail::Fp8Spec, made by detail::fp8_spec).
struct Fp8FormatInArgs {};

// Whether kernels of format tag F convert in hardware where this compilation can (else in
// software, a few tens of integer instructions per code).
template <class F>
FUSEKIT_HOST_DEVICE constexpr bool hardware_fp8_codes() {
  return hardware_e4m3fn_compiled() && std::is_same_v<F, detail::Fp8E4M3FN>;
}

// What kernels of format tag F convert with: their arguments' spec (Fp8FormatInArgs), else F's
// own constants.
template <class F>
FUSEKIT_HOST_DEVICE detail::Fp8Spec codes_spec(const detail::Fp8Spec& from_args) {
  if constexpr (std::is_same_v<F, Fp8FormatInArgs>) {
    return from_args;
  } else {
    return detail::fp8_spec_of<F>();
  }
}

// Calls f(detail::Fp8E4M3FN{}) for the format some GPU of the platform converts in hardware
// (e4m3fn on CUDA: its kernels also hold the software conversion for GPUs before sm_89), else
// f(Fp8FormatInArgs{}). Kernels of the second kind read the format from their arguments.
template <typename Fn>
decltype(auto) dispatch_codes_format(Fp8Format format, Fn&& f) {
  if constexpr (platform_has_hardware_e4m3fn()) {
    if (format == Fp8Format::kE4M3FN) return f(detail::Fp8E4M3FN{});
  }
  return f(Fp8FormatInArgs{});
}

// Codes of v * inverse_scale; spec_in_args is read only by Fp8FormatInArgs kernels.
template <class F, int G>
FUSEKIT_DEVICE Packed<uint8_t, G> quantize_group(const float (&v)[G], float inverse_scale,
                                                 const detail::Fp8Spec& spec_in_args) {
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
      const detail::Fp8Spec spec = codes_spec<F>(spec_in_args);
      uint32_t word = 0;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        word |= uint32_t{detail::fp8_quantize(x[b], inverse_scale, spec)} << (8 * b);
      }
      q.words[w] = word;
    }
  }
  return q;
}

}  // namespace fusekit::gpu
