// The 8-bit float formats fusekit writes, named explicitly.
//
// Two encodings share the name "e4m3" (1 sign, 4 exponent, 3 mantissa bits) and disagree on what
// almost every bit pattern means:
//
//   kE4M3FN    NVIDIA (sm_89+) and the OCP standard: exponent bias 7, largest value 448,
//              NaN = S.1111.111 (0x7F / 0xFF), no infinity, +0 and -0.
//   kE4M3FNUZ  AMD MI300 (gfx942): exponent bias 8, largest value 240, one NaN encoding (0x80,
//              the pattern that would be -0), no infinity, no negative zero.
//
// The same byte read in the other format is off by a factor of two (or is NaN), so every fusekit
// API that writes fp8 takes the format as an explicit argument, and fp8 tensors carry a dtype
// (DType::kFloat8E4M3FN / kFloat8E4M3FNUZ) that must match it. Nothing is inferred from the
// device.
//
// Conversion from float32 rounds to nearest, ties to even, and saturates: finite values and
// infinities beyond the largest value become +-largest, NaN becomes NaN (0x7F for kE4M3FN, 0x80
// for kE4M3FNUZ), and values below the smallest subnormal round to zero exactly as the bit
// definition says. CPU and GPU produce the same bits.
#pragma once

#include <cstdint>

#include "fusekit/tensor.h"

namespace fusekit {

enum class Fp8Format : int32_t {
  kE4M3FN = 0,
  kE4M3FNUZ = 1,
};

const char* fp8_format_name(Fp8Format format);  // "e4m3fn", "e4m3fnuz"
float fp8_format_max(Fp8Format format);          // 448, 240
DType fp8_format_dtype(Fp8Format format);        // kFloat8E4M3FN, kFloat8E4M3FNUZ

}  // namespace fusekit
