// Integer helpers of the launch heuristics (plain C++, host side): how many blocks or threads
// cover a count, and the power-of-two sizes that block reductions take.
#pragma once

#include <cstdint>

namespace fusekit::gpu {

// ceil(a / b) for a >= 0, b > 0.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The smallest power of two >= v (1 for v <= 1).
constexpr int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// floor(log2(v)) for v >= 1.
constexpr int log2_floor(int64_t v) {
  int l = 0;
  while (v > 1) v /= 2, ++l;
  return l;
}

}  // namespace fusekit::gpu
