// The CPU backend's row sums (src/cpu/common/lane_sum.h): their fixed order, and their accuracy on
// the long rows the ops accept (N up to 262144 and beyond), where one chain of adds per lane
// would lose about 1e-4 of the sum.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/common/lane_sum.h"
#include "gtest/gtest.h"

namespace fusekit::detail {
namespace {

// The order the header states for one pass: lane l adds every term j = l (mod 32) from j = 0,
// then the lanes are combined by halving.
float one_pass_sum(const std::vector<float>& v) {
  float lanes[kSumLanes] = {};
  for (std::size_t j = 0; j < v.size(); ++j) lanes[j % kSumLanes] += v[j];
  for (int half = kSumLanes / 2; half > 0; half /= 2) {
    for (int l = 0; l < half; ++l) lanes[l] += lanes[l + half];
  }
  return lanes[0];
}

float sum_of(const std::vector<float>& v) {
  return lane_sum(static_cast<int64_t>(v.size()), [&](int64_t j) { return v[j]; });
}

TEST(LaneSum, RowsOfOneBlockSumInOnePassBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(3.0f, 1.0f);
  for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{33}, int64_t{769}, int64_t{4096},
                    kSumBlock - 1, kSumBlock}) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    const float got = sum_of(v);
    const float want = one_pass_sum(v);
    EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0) << "n = " << n;
  }
  // A row of -0 sums to +0, as one pass gives (its lanes start at +0).
  const std::vector<float> zeros(100, -0.0f);
  EXPECT_FALSE(std::signbit(sum_of(zeros)));
  EXPECT_EQ(sum_of({}), 0.0f);
}

TEST(LaneSum, LongRowsStayWithinAHundredThousandthOfTheSum) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (int64_t n : {kSumBlock + 1, int64_t{262144}, int64_t{1} << 20, int64_t{1} << 22}) {
    // A constant row (every add rounds the same way, so the errors add up) and a row of a large
    // mean (LayerNorm's mean of such rows is what its output's accuracy hangs on).
    std::vector<float> constant(n, 0.1f), shifted(n);
    for (float& x : shifted) x = 1000.0f + unit(rng);
    for (const std::vector<float>* row : {&constant, &shifted}) {
      double exact = 0.0;
      for (float x : *row) exact += x;
      const double error = std::fabs(sum_of(*row) - exact) / exact;
      EXPECT_LT(error, 1e-5) << "n = " << n << (row == &constant ? ", constant" : ", shifted");
    }
  }
}

}  // namespace
}  // namespace fusekit::detail
