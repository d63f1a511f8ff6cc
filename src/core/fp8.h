// The two e4m3 fp8 formats (fusekit/fp8.h) and their conversions to and from float32, written
// once for host and device code.
//
// Why integer bit manipulation: the CPU backend is the reference the GPU kernels are checked
// against bit for bit, and the formats need the same rounding on NVIDIA, on AMD and on the CPU.
// Hardware conversions exist only for some of them (sm_89+ for e4m3fn, gfx942 for e4m3fnuz) and
// differ in their NaN and saturation rules; a conversion made of integer operations on the
// float's bits (and one float add, rounded to nearest even alike on every IEEE machine) gives
// identical results everywhere, does not depend on denormal flushing, and costs under twenty
// instructions per element, without a branch, which a memory-bound kernel hides.
//
// Encoding (both formats): bit 7 sign, bits 6..3 exponent field e, bits 2..0 mantissa m.
//   e > 0: (-1)^s * (1 + m/8) * 2^(e - bias);   e == 0: (-1)^s * (m/8) * 2^(1 - bias).
//   kE4M3FN:   bias 7; S.1111.111 is NaN, so the largest value is S.1111.110 = 448.
//   kE4M3FNUZ: bias 8; 0x80 (the would-be -0) is the only NaN; the largest value is 0x7F = 240.
// float -> fp8 rounds to nearest, ties to even; finite values and infinities beyond the largest
// value saturate to +-largest; NaN -> NaN (0x7F for kE4M3FN, the canonical pattern the hardware
// conversion writes, and 0x80 for kE4M3FNUZ); results that round to zero are +0 in kE4M3FNUZ and
// keep their sign in kE4M3FN.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "fusekit/fp8.h"

namespace fusekit::detail {

// Compile-time description of one format.
struct Fp8E4M3FN {
  static constexpr Fp8Format kFormat = Fp8Format::kE4M3FN;
  static constexpr int kBias = 7;
  static constexpr uint32_t kMaxCode = 0x7E;  // 1111.110 = 1.75 * 2^8
  static constexpr float kMax = 448.0f;
  static constexpr uint32_t kNaNCode = 0x7F;
  static constexpr bool kSignedZero = true;
  FUSEKIT_HOST_DEVICE static constexpr bool is_nan(uint32_t code) {
    return (code & 0x7Fu) == 0x7Fu;
  }
};

struct Fp8E4M3FNUZ {
  static constexpr Fp8Format kFormat = Fp8Format::kE4M3FNUZ;
  static constexpr int kBias = 8;
  static constexpr uint32_t kMaxCode = 0x7F;  // 1111.111 = 1.875 * 2^7
  static constexpr float kMax = 240.0f;
  static constexpr uint32_t kNaNCode = 0x80;
  static constexpr bool kSignedZero = false;
  FUSEKIT_HOST_DEVICE static constexpr bool is_nan(uint32_t code) { return code == 0x80u; }
};

FUSEKIT_HOST_DEVICE uint32_t fp8_float_bits(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof(u));
  return u;
}

FUSEKIT_HOST_DEVICE float fp8_bits_float(uint32_t u) {
  float f;
  __builtin_memcpy(&f, &u, sizeof(f));
  return f;
}

// float32 bits of the positive value with fp8 exponent field e (>= 1) and mantissa m.
template <class F>
FUSEKIT_HOST_DEVICE constexpr uint32_t fp8_normal_float_bits(uint32_t e, uint32_t m) {
  return ((e + 127u - F::kBias) << 23) | (m << 20);
}

// What the conversion and the dynamic scale need of a format, as plain values. float_to_fp8 and
// fp8_row_scale are written once over it: with fp8_spec_of<F>() every field is a compile-time
// constant the compiler folds into the instructions, and the kernels of the format in their
// arguments (every format on HIP, e4m3fnuz on CUDA) take it from there instead, so one kernel set
// serves both formats (on NVIDIA the fields are constant-bank operands, on AMD scalar registers).
// See gpu/common/fp8_pack.cuh.
struct Fp8Spec {
  Fp8Format format;          // which of the two it describes
  uint32_t rebias;           // (127 - bias) << 3: float exponent field -> fp8's, at code scale
  uint32_t min_normal_bits;  // float bits of the smallest normal fp8 value
  // 2^(min normal exponent - 3 + 23): added to a magnitude below the smallest normal, it rounds it
  // to whole subnormal units, to nearest even (the float add's own rounding), and leaves their
  // count in the sum's low mantissa bits (8 units: the smallest normal, code 8, is right).
  uint32_t subnormal_rounder_bits;
  uint32_t max_bits;        // float bits of the largest finite value
  uint32_t max_code;        // its code
  uint32_t nan_code;        // the NaN code written
  uint32_t zero_sign_mask;  // 0x80 where zero keeps its sign, 0 where it has none
  float max;                // the largest finite value
  float inverse_max;        // 1 / max
  float min_scale;          // a dynamic scale's floor: 1 / (max * 512)
};

template <class F>
FUSEKIT_HOST_DEVICE constexpr Fp8Spec fp8_spec_of() {
  constexpr int kMinNormalExp = 1 - F::kBias;  // unbiased exponent of the smallest normal
  return Fp8Spec{F::kFormat,
                 (127u - F::kBias) << 3,
                 static_cast<uint32_t>(127 + kMinNormalExp) << 23,
                 static_cast<uint32_t>(127 + kMinNormalExp - 3 + 23) << 23,
                 fp8_normal_float_bits<F>(F::kMaxCode >> 3, F::kMaxCode & 7u),
                 F::kMaxCode,
                 F::kNaNCode,
                 F::kSignedZero ? 0x80u : 0u,
                 F::kMax,
                 1.0f / F::kMax,
                 1.0f / (F::kMax * 512.0f)};
}

// float32 -> fp8 code of the format `spec` describes. See the top of the file.
//
// Straight-line: both candidate codes, normal and subnormal, are computed and the right one
// selected, with no branch. A kernel inlines this once per element (tens of times per thread in
// the norm kernels), and a branchy form multiplied the control flow the compiler works through:
// the fp8 norm kernels took 46% longer to compile for AMD (bench/NOTES.md, "fp8 conversion
// without branches"). It also leaves a GPU no divergent path. Checked equal to the earlier
// branchy form for all 2^32 floats, and against an independent oracle by tests/cpp/test_fp8.cc.
FUSEKIT_HOST_DEVICE uint8_t float_to_fp8(float f, const Fp8Spec& spec) {
  const uint32_t u = fp8_float_bits(f);
  uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  // Normal result: keep 3 of the 23 mantissa bits, rounding the 20 dropped ones to nearest even
  // (a carry into the exponent field is the correct next binade), then rebias the exponent.
  const uint32_t normal = ((a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20) - spec.rebias;
  // Subnormal result (or zero). The add cannot be contracted into an fma: its operand is rebuilt
  // from integer bits, not a product. A float32 denormal `a` flushed to zero by the GPU still
  // gives code 0, its right code.
  const uint32_t subnormal =
      fp8_float_bits(fp8_bits_float(a) + fp8_bits_float(spec.subnormal_rounder_bits)) -
      spec.subnormal_rounder_bits;
  uint32_t code = a >= spec.min_normal_bits ? normal : subnormal;
  code = a >= spec.max_bits ? spec.max_code : code;  // saturate, infinities too
  if (code == 0) sign &= spec.zero_sign_mask;
  return static_cast<uint8_t>(a > 0x7F800000u ? spec.nan_code : (sign | code));
}

template <class F>
FUSEKIT_HOST_DEVICE uint8_t float_to_fp8(float f) {
  return float_to_fp8(f, fp8_spec_of<F>());
}

// fp8 code of format F -> float32 (exact; NaN codes give a quiet NaN).
template <class F>
FUSEKIT_HOST_DEVICE float fp8_to_float(uint8_t code) {
  const uint32_t c = code;
  if (F::is_nan(c)) return fp8_bits_float(0x7FC00000u);
  const uint32_t sign = (c & 0x80u) << 24;
  const uint32_t e = (c >> 3) & 0xFu;
  const uint32_t m = c & 7u;
  if (e != 0) return fp8_bits_float(sign | fp8_normal_float_bits<F>(e, m));
  if (m == 0) return fp8_bits_float(sign);
  // Subnormal m/8 * 2^(1 - bias): normalize the 3-bit mantissa by its leading one.
  const uint32_t lead = m >= 4u ? 2u : (m >= 2u ? 1u : 0u);
  const uint32_t exponent = static_cast<uint32_t>(127 + 1 - F::kBias - 3) + lead;
  return fp8_bits_float(sign | (exponent << 23) | ((m - (1u << lead)) << (23 - lead)));
}

// max(m, |v|) that propagates NaN. Without NaN the maximum of a set does not depend on the order
// it is taken in, so a row's maximum is the same bits for any split of the row among threads.
FUSEKIT_HOST_DEVICE float max_abs_accumulate(float m, float v) {
  return max_propagating_nan(m, fabsf(v));
}

// y clamped to float32's finite range (NaN stays NaN). A product beyond float32 (only possible
// for float32 and bfloat16 inputs near their largest values) is quantized as +-FLT_MAX, so a
// row's scale stays finite and the element saturates to +-fp8_max.
FUSEKIT_HOST_DEVICE float saturate_to_float_range(float y) {
  constexpr float kLargest = 3.40282347e+38f;
  return fabsf(y) > kLargest ? (y > 0.0f ? kLargest : -kLargest) : y;
}

// Quantization with a float32 scale, shared by every op with an fp8 output:
//   out = fp8(y * inverse),  inverse = 1 / scale  (both float32 IEEE operations)
// One reciprocal per row (or per call, for a static scale) and a multiply per element, as vLLM's
// kernels do; the CPU backend follows the same two steps, so GPU codes match it bit for bit.
FUSEKIT_HOST_DEVICE float fp8_inverse_scale(float scale) { return 1.0f / scale; }

// The same 1 / scale for a scale made by fp8_row_scale below, which lies in
// [1 / (fp8_max * 512), FLT_MAX / fp8_max] (or is NaN): there scale and 1 / scale are normal
// floats, so the straight-line reciprocal gives the division's bits
// (tests/cpp/gpu_scale_math_check.cu checks every float of that range on the GPU). A static scale
// is the caller's and may lie anywhere: it takes fp8_inverse_scale.
FUSEKIT_HOST_DEVICE float fp8_inverse_row_scale(float row_scale) {
  return reciprocal_of_normal(row_scale);
}

FUSEKIT_HOST_DEVICE uint8_t fp8_quantize(float y, float inverse_scale, const Fp8Spec& spec) {
  return float_to_fp8(y * inverse_scale, spec);
}

template <class F>
FUSEKIT_HOST_DEVICE uint8_t fp8_quantize(float y, float inverse_scale) {
  return fp8_quantize(y, inverse_scale, fp8_spec_of<F>());
}

// The dynamic scale of a quantized row from its max|y|: max|y| / fp8_max, capped
// by scale_upper_bound when that is > 0, floored at 1 / (fp8_max * 512). NaN gives the canonical
// quiet NaN, so the scale's bits do not depend on which NaN of the row won. A max beyond float32
// (a product act(g) * up that overflowed) counts as FLT_MAX, so the scale stays finite.
//
// With a dynamic scale the row's elements need no such clamp: inverse >= fp8_max / FLT_MAX, so an
// element of +-FLT_MAX and one of +-inf both reach fp8(+-fp8_max) (float_to_fp8 saturates), and
// clamping only the max gives the codes that clamping every element would.
FUSEKIT_HOST_DEVICE float fp8_row_scale(float max_abs, float scale_upper_bound,
                                        const Fp8Spec& spec) {
  // max / fp8_max without the division's slow-path branch on CUDA devices. For every float max
  // it gives the IEEE quotient, except where both are below the floor spec.min_scale, which
  // floors them to the same bits (checked for every float, both formats:
  // tests/cpp/gpu_scale_math_check.cu on the GPU, bench/NOTES.md "Norm v36").
  float s = divide_by_constant(saturate_to_float_range(max_abs), spec.max, spec.inverse_max);
  if (scale_upper_bound > 0.0f && s > scale_upper_bound) s = scale_upper_bound;  // NaN: false
  if (s < spec.min_scale) s = spec.min_scale;                                    // NaN: false
  return s != s ? fp8_bits_float(0x7FC00000u) : s;
}

template <class F>
FUSEKIT_HOST_DEVICE float fp8_row_scale(float max_abs, float scale_upper_bound) {
  return fp8_row_scale(max_abs, scale_upper_bound, fp8_spec_of<F>());
}

// Calls f(Fp8E4M3FN{}) or f(Fp8E4M3FNUZ{}) for a runtime format.
template <typename Fn>
decltype(auto) dispatch_fp8_format(Fp8Format format, Fn&& f) {
  if (format == Fp8Format::kE4M3FNUZ) return f(Fp8E4M3FNUZ{});
  return f(Fp8E4M3FN{});
}

inline Fp8Spec fp8_spec(Fp8Format format) {
  return dispatch_fp8_format(format, [](auto tag) { return fp8_spec_of<decltype(tag)>(); });
}

inline uint8_t float_to_fp8(float f, Fp8Format format) {
  return dispatch_fp8_format(format, [&](auto tag) { return float_to_fp8<decltype(tag)>(f); });
}

inline float fp8_to_float(uint8_t code, Fp8Format format) {
  return dispatch_fp8_format(format, [&](auto tag) { return fp8_to_float<decltype(tag)>(code); });
}

}  // namespace fusekit::detail
