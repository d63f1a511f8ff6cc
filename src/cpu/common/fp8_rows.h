// The CPU backend's fp8 forms' two loops over a row of float32 values y, written to vectorize.
//
// row_max_abs: the largest |y|, for the row's scale, as an unsigned integer max over the
// magnitudes' bits. For floats without their sign bit the integer order is the numeric order, and
// a NaN's bits lie above infinity's, so the result is the largest |y| where the row has no NaN
// (the value a scan with max_abs_accumulate gives; max does not depend on the order) and a NaN
// where it has one (not necessarily the scan's NaN; fp8_row_scale turns every NaN into its one
// NaN scale). The GPU kernels take the row max the same way (bench/NOTES.md, "fp8 row max as an
// integer max").
#pragma once

#include <cstdint>

#include "core/fp8.h"

namespace fusekit::detail {

inline float row_max_abs(const float* y, int64_t n) {
  uint32_t m = 0;
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t magnitude = fp8_float_bits(y[j]) & 0x7fffffffu;
    m = magnitude > m ? magnitude : m;
  }
  return fp8_bits_float(m);
}

// codes[j] = fp8 code of format F of y[j] * inverse_scale. (Taken as parameters, the pointers and
// the scale are locals: in a lambda's body, read through its references, the byte stores might
// alias them as far as the compiler knows, and the loop would not vectorize.)
template <class F>
void quantize_row_codes(const float* y, int64_t n, float inverse_scale, uint8_t* codes) {
  for (int64_t j = 0; j < n; ++j) codes[j] = fp8_quantize<F>(y[j], inverse_scale);
}

}  // namespace fusekit::detail
