// Host-side float16 / bfloat16 <-> float32 conversion, bit-exact with the GPU's round-to-nearest-
// even conversions. Used by the CPU backend and by tests; the GPU uses its hardware instructions
// (gpu/common/convert.cuh). 16-bit values are stored as raw uint16_t bits on the host.
#pragma once

#include <cstdint>
#include <cstring>

namespace fusekit::detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>((u + rounding) >> 16);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  // Every range's result is computed and one selected, with no branch (loops over it vectorize).
  const uint32_t normal = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  // A NaN comes out quiet (its payload kept), as the hardware conversions give it.
  const uint32_t inf_nan =
      sign | 0x7f800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u);
  // Subnormal or zero: value = mantissa * 2^-24, exact.
  const uint32_t subnormal =
      sign | float_bits(static_cast<float>(mantissa) * 5.9604644775390625e-8f);
  const uint32_t u = exponent == 0x1fu ? inf_nan : (exponent == 0 ? subnormal : normal);
  return bits_float(u);
}

// Written as selects between the results of each range, all computed, with no branch, so that
// loops over it vectorize (the CPU backend's outputs).
inline uint16_t float_to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  const uint32_t normal = ((abs + 0xfffu + ((abs >> 13) & 1u)) >> 13) - (112u << 10);
  // Subnormal or zero (|f| < 2^-14): adding 0.5 leaves |f| / 2^-24 rounded to nearest even in the
  // low mantissa bits (floats in [0.5, 1) are 2^-24 apart); 2^-14 itself comes out as 0x400.
  const uint32_t subnormal = float_bits(bits_float(abs) + 0.5f) - float_bits(0.5f);
  uint32_t h = abs < 0x38800000u ? subnormal : normal;
  h = abs >= 0x477ff000u ? 0x7c00u : h;  // rounds to >= 65520: inf
  h = abs > 0x7f800000u ? 0x7e00u : h;   // NaN
  return static_cast<uint16_t>(sign | h);
}

}  // namespace fusekit::detail
