// Division by a divisor fixed for a whole launch, as a multiply-high, an add and a shift.
//
// Why: a GPU has no integer divider. `n / d` with d known only at run time compiles to about
// twenty instructions (a float reciprocal estimate and integer corrections), which a kernel that
// maps its flat thread index to (row, column) pays once per thread. When the work per thread is
// a few dozen instructions (an elementwise op at decode batch sizes), that is a measurable share
// of what the SMs issue. The host computes (magic, shift) once per launch; the kernel then needs
// one multiply-high, one add and one shift, the same bits as the division.
//
// The method (Granlund and Montgomery, "Division by invariant integers using multiplication",
// 1994): with s = ceil(log2 d) and m = floor(2^32 (2^s - d) / d) + 1,
//   n / d = (umulhi(n, m) + n) >> s   for every 0 <= n < 2^31 and 1 <= d < 2^31.
// The bound on n keeps the sum within 32 bits (umulhi(n, m) <= n). tests/cpp/test_fast_divide.cc
// checks it against the division over every divisor up to 2^13, the powers of two and their
// neighbours, the largest divisors, and numerators at and around every multiple's edges.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace fusekit::detail {

// The high 32 bits of the 64-bit product a * b: one instruction on NVIDIA and AMD GPUs
// (IMAD.WIDE.U32 / v_mul_hi_u32), written portably so that this header needs no GPU header.
FUSEKIT_HOST_DEVICE uint32_t multiply_high(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}

struct FastDivider {
  static constexpr uint32_t kMaxNumerator = 0x7fffffffu;  // numerators below 2^31
  uint32_t magic = 1;  // d = 1: (0 + n) >> 0
  uint32_t shift = 0;

  // For 1 <= d < 2^31; host side, once per launch.
  static FastDivider of(uint32_t d) {
    FastDivider f;
    while ((uint64_t{1} << f.shift) < d) ++f.shift;
    f.magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << f.shift) - d)) / d + 1);
    return f;
  }

  // n / d for 0 <= n <= kMaxNumerator.
  FUSEKIT_HOST_DEVICE uint32_t divide(uint32_t n) const {
    return (multiply_high(n, magic) + n) >> shift;
  }
};

}  // namespace fusekit::detail
