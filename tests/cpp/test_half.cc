// Host float16 / bfloat16 conversions (used by the CPU backend and as the tests' oracle): exact
// round trips, round-to-nearest-even at ties, subnormals, overflow and NaN.
#include <cmath>
#include <limits>

#include "core/half.h"
#include "gtest/gtest.h"

namespace fusekit::detail {
namespace {

TEST(Half, Fp16RoundTripsEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float f = fp16_to_float(static_cast<uint16_t>(bits));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(f))));
      continue;
    }
    ASSERT_EQ(float_to_fp16(f), bits) << "pattern " << bits;
  }
}

TEST(Half, Bf16RoundTripsEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float f = bf16_to_float(static_cast<uint16_t>(bits));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f))));
      continue;
    }
    ASSERT_EQ(float_to_bf16(f), bits) << "pattern " << bits;
  }
}

TEST(Half, RoundsToNearestEven) {
  // bf16 around 1: ulp 2^-7. Halfway between 1 and 1 + 2^-7 rounds to even (1).
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie, odd below: up
  // fp16 around 1: ulp 2^-10.
  EXPECT_EQ(float_to_fp16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(float_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);
  // fp16 subnormals: the smallest is 2^-24; half of it rounds to 0, 3/4 of it to it.
  EXPECT_EQ(float_to_fp16(0x1p-24f), 0x0001);
  EXPECT_EQ(float_to_fp16(0x1p-25f), 0x0000);
  EXPECT_EQ(float_to_fp16(0x1.8p-25f), 0x0001);
  EXPECT_EQ(float_to_fp16(-0x1p-24f), 0x8001);
}

TEST(Half, OverflowAndSpecials) {
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);  // rounds up to infinity
  EXPECT_EQ(float_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bf16(3.4e38f), 0x7f80);  // above the largest bf16: rounds to infinity
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(std::nanf("")))));
}

}  // namespace
}  // namespace fusekit::detail
