// Quantization of a group of float32 values to fp8 codes on the GPU, shared by every kernel with
// an fp8 output: code = fp8(v * inverse_scale) (core/fp8.h's fp8_quantize), converted by the
// hardware where it can (CUDA sm_89+, platform.h: e4m3fn two codes per conversion, four into
// each 32-bit word; e4m3fnuz by the same conversion of twice the value, fixed up: e4m3fnuz_quad)
// and by core/fp8.h's integer conversion otherwise (HIP; CUDA before sm_89). Either way the
// codes equal the CPU reference's bit for bit.
//
// A kernel's format is a template argument: Fp8E4M3FN, the format NVIDIA's GPUs use (CUDA), and
// Fp8FormatInArgs for the others (every format on HIP, e4m3fnuz on CUDA), whose kernels read the
// format from their arguments (an Fp8Spec), so one kernel set serves both: on HIP half the fp8
// kernels to compile, where the two formats' RMSNorm units were nearly half of the build's
// compile time (bench/NOTES.md, "One fp8 kernel set for both formats where the conversion is
// software"). The Fp8E4M3FN kernels keep their format a constant: a test of the format per group
// of codes made their decode calls 1-5% slower (bench/NOTES.md, "e4m3fnuz in hardware on
// NVIDIA").
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/fp8.h"
#include "gpu/common/vec_io.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

// The kernels' format tag for codes in the format the kernel's arguments name (their
// detail::Fp8Spec, made by detail::fp8_spec).
struct Fp8FormatInArgs {};

// Whether the device code being compiled converts fp8 codes in hardware, every format (CUDA
// sm_89+), else in software (a few tens of integer instructions per code).
FUSEKIT_HOST_DEVICE constexpr bool hardware_fp8_codes() { return hardware_e4m3fn_compiled(); }

// e4m3fnuz codes of (v0, v1, v2, v3) in one 32-bit word, v0 in the low byte, by the hardware's
// e4m3fn conversion (hardware_e4m3fn_quad). Each code's e4m3fnuz value is half its e4m3fn value
// (one more exponent bias, the same fields), so for every finite v the e4m3fnuz code rounded to
// nearest even is the e4m3fn code of 2v (doubling is exact, and scales the grid and its ties
// alike), except where the formats part:
// - NaN: e4m3fnuz's NaN is 0x80, which e4m3fn writes for -0: v becomes -0;
// - results that round to zero: +0 in e4m3fnuz (0x80 is its NaN): |2v| <= 2^-10, half the
//   smallest subnormal (a tie, to the even zero), becomes +0;
// - |v| > 232, half-way between 224 (0x7E) and e4m3fnuz's largest, 240 (0x7F, e4m3fn's NaN):
//   e4m3fn saturates 2v to 448 (0x7E, or 0xFE), and the code's low bit is set after.
// Checked equal to core/fp8.h's float_to_fp8 for all 2^32 floats on the GPU
// (tests/cpp/gpu_fp8_conversion_check.cu).
FUSEKIT_DEVICE uint32_t e4m3fnuz_quad(float v0, float v1, float v2, float v3) {
  float v[4] = {v0, v1, v2, v3};
  uint32_t past_largest = 0;
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    float z = v[b] * 2.0f;
    past_largest |= (fabsf(z) > 464.0f ? 1u : 0u) << (8 * b);  // NaN: false
    z = fabsf(z) <= 0x1p-10f ? 0.0f : z;
    v[b] = z != z ? -0.0f : z;
  }
  return hardware_e4m3fn_quad(v[0], v[1], v[2], v[3]) | past_largest;
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

// Calls f(detail::Fp8E4M3FN{}) for e4m3fn on the platform some of whose GPUs convert to it in
// hardware (CUDA: its kernels also hold the software conversion for GPUs before sm_89), else
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
    if constexpr (hardware_fp8_codes()) {
      const float y0 = x[0] * inverse_scale, y1 = x[1] * inverse_scale;
      const float y2 = x[2] * inverse_scale, y3 = x[3] * inverse_scale;
      if (codes_spec<F>(spec_in_args).format == Fp8Format::kE4M3FN) {  // uniform
        q.words[w] = hardware_e4m3fn_quad(y0, y1, y2, y3);
      } else {
        q.words[w] = e4m3fnuz_quad(y0, y1, y2, y3);
      }
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
