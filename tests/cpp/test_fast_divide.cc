// FastDivider (core/fast_divide.h) against the integer division it replaces in GPU kernels. The
// same code runs on the device; the act GPU tests cover it there through every row and column
// they check.
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/fast_divide.h"

namespace fusekit::detail {
namespace {

constexpr uint32_t kMaxN = FastDivider::kMaxNumerator;

// Numerators where a wrong magic number shows first: around multiples of d (q d - 1, q d, q d + 1)
// for small and large q, and the top of the range.
std::vector<uint32_t> edge_numerators(uint32_t d, std::mt19937& rng) {
  std::vector<uint32_t> n = {0, 1, kMaxN, kMaxN - 1};
  const uint64_t last_q = kMaxN / d;
  std::uniform_int_distribution<uint64_t> any_q(0, last_q);
  std::vector<uint64_t> qs = {0, 1, 2, 3, last_q, last_q - (last_q > 0 ? 1 : 0)};
  for (int i = 0; i < 24; ++i) qs.push_back(any_q(rng));
  for (uint64_t q : qs) {
    for (int64_t delta : {-1, 0, 1}) {
      const int64_t v = static_cast<int64_t>(q * d) + delta;
      if (v >= 0 && v <= static_cast<int64_t>(kMaxN)) n.push_back(static_cast<uint32_t>(v));
    }
  }
  std::uniform_int_distribution<uint32_t> any_n(0, kMaxN);
  for (int i = 0; i < 64; ++i) n.push_back(any_n(rng));
  return n;
}

void expect_divides(uint32_t d, std::mt19937& rng) {
  const FastDivider f = FastDivider::of(d);
  for (uint32_t n : edge_numerators(d, rng)) {
    ASSERT_EQ(f.divide(n), n / d) << "n = " << n << ", d = " << d;
  }
}

TEST(FastDivide, EveryDivisorUpTo8192) {
  std::mt19937 rng(1);
  for (uint32_t d = 1; d <= 8192; ++d) expect_divides(d, rng);
}

TEST(FastDivide, PowersOfTwoAndNeighbours) {
  std::mt19937 rng(2);
  for (int b = 0; b < 31; ++b) {
    const uint32_t p = uint32_t{1} << b;
    for (uint32_t d : {p - 1, p, p + 1}) {
      if (d >= 1 && d <= kMaxN) expect_divides(d, rng);
    }
  }
}

TEST(FastDivide, LargeAndRandomDivisors) {
  std::mt19937 rng(3);
  for (uint32_t d : {kMaxN, kMaxN - 1, 1u << 30, (1u << 30) + 12345, 1000000007u % kMaxN}) {
    expect_divides(d, rng);
  }
  std::uniform_int_distribution<uint32_t> any_d(1, kMaxN);
  for (int i = 0; i < 2000; ++i) expect_divides(any_d(rng), rng);
}

TEST(FastDivide, AllNumeratorsForTheLaunchSizesOfOneRow) {
  // Threads per row of the act kernels at common widths (N / 8 and N / 4 for 16-bit types),
  // over a contiguous run of numerators: every slot a grid of a few thousand rows numbers.
  for (uint32_t d : {1376u, 1792u, 2752u, 3584u, 896u, 3u, 7u}) {
    const FastDivider f = FastDivider::of(d);
    for (uint32_t n = 0; n < (1u << 22); ++n) ASSERT_EQ(f.divide(n), n / d) << n << " / " << d;
  }
}

}  // namespace
}  // namespace fusekit::detail
