// The fp8 conversions of core/fp8.h against an oracle written independently of them: values
// decoded from the bit definition with std::ldexp in double, and float -> fp8 as "the nearest
// representable value, ties to the even code, saturating", found by searching the sorted value
// table. Checked for both formats: all 256 codes, every midpoint between neighbours (ties), the
// floats just above and below each midpoint, saturation, subnormals, NaN, +-0, and a log-uniform
// sweep of random floats across the whole float range.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/fp8.h"
#include "fusekit/fp8.h"
#include "gtest/gtest.h"

namespace fusekit::detail {
namespace {

struct FormatSpec {
  Fp8Format format;
  int bias;
  double max;
  bool signed_zero;
};

// The definition, spelled out without any of fp8.h's constants.
const FormatSpec kFormats[] = {
    {Fp8Format::kE4M3FN, 7, 448.0, true},
    {Fp8Format::kE4M3FNUZ, 8, 240.0, false},
};

bool spec_is_nan(const FormatSpec& s, int code) {
  return s.format == Fp8Format::kE4M3FN ? (code & 0x7F) == 0x7F : code == 0x80;
}

double spec_value(const FormatSpec& s, int code) {
  const int sign = code >> 7, e = (code >> 3) & 15, m = code & 7;
  const double magnitude =
      e == 0 ? std::ldexp(m / 8.0, 1 - s.bias) : std::ldexp(1.0 + m / 8.0, e - s.bias);
  return sign ? -magnitude : magnitude;
}

// Non-negative finite codes in increasing value order (0x00 first).
std::vector<int> positive_codes(const FormatSpec& s) {
  std::vector<int> codes;
  for (int c = 0; c < 0x80; ++c) {
    if (!spec_is_nan(s, c)) codes.push_back(c);
  }
  std::sort(codes.begin(), codes.end(),
            [&](int a, int b) { return spec_value(s, a) < spec_value(s, b); });
  return codes;
}

// What float -> fp8 must give, by search: nearest value, ties to the even code, saturation.
int oracle_encode(const FormatSpec& s, const std::vector<int>& codes, float f) {
  if (std::isnan(f)) return s.format == Fp8Format::kE4M3FN ? 0x7F : 0x80;
  const double a = std::fabs(static_cast<double>(f));
  int best;
  if (a >= s.max) {
    best = codes.back();
  } else {
    auto hi = std::lower_bound(codes.begin(), codes.end(), a,
                               [&](int c, double v) { return spec_value(s, c) < v; });
    const int upper = *hi;
    const int lower = hi == codes.begin() ? upper : *(hi - 1);
    const double du = spec_value(s, upper) - a, dl = a - spec_value(s, lower);
    if (dl < du) best = lower;
    else if (du < dl) best = upper;
    else best = (lower & 1) == 0 ? lower : upper;
  }
  const bool negative = std::signbit(f);
  if (best == 0 && !s.signed_zero) return 0;
  return negative ? (best | 0x80) : best;
}

float bits_of_nan_with_payload() {
  const uint32_t bits = 0xFFC12345u;  // negative, quiet, with a payload
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

int encode(const FormatSpec& s, float f) { return float_to_fp8(f, s.format); }
float decode(const FormatSpec& s, int code) {
  return fp8_to_float(static_cast<uint8_t>(code), s.format);
}

class Fp8Test : public ::testing::TestWithParam<FormatSpec> {};

TEST_P(Fp8Test, PublicQueriesMatchTheDefinition) {
  const FormatSpec& s = GetParam();
  EXPECT_EQ(static_cast<double>(fp8_format_max(s.format)), s.max);
  EXPECT_EQ(spec_value(s, positive_codes(s).back()), s.max);
  EXPECT_EQ(dtype_size(fp8_format_dtype(s.format)), 1u);
  EXPECT_EQ(fp8_format_dtype(s.format),
            s.format == Fp8Format::kE4M3FN ? DType::kFloat8E4M3FN : DType::kFloat8E4M3FNUZ);
}

TEST_P(Fp8Test, EveryCodeDecodesToItsDefinitionAndRoundTrips) {
  const FormatSpec& s = GetParam();
  for (int code = 0; code < 256; ++code) {
    const float f = decode(s, code);
    if (spec_is_nan(s, code)) {
      EXPECT_TRUE(std::isnan(f)) << "code " << code;
      EXPECT_TRUE(spec_is_nan(s, encode(s, f))) << "code " << code;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), spec_value(s, code)) << "code " << code;
    ASSERT_EQ(std::signbit(f), code >= 0x80) << "code " << code;
    ASSERT_EQ(encode(s, f), code) << "code " << code;
  }
}

// Ties go to the even code, and the floats next to a midpoint go to the nearer neighbour; both
// signs. Covers subnormals (the first neighbours are 0 and the smallest subnormal) and the step
// from the largest subnormal to the smallest normal.
TEST_P(Fp8Test, MidpointsRoundToEvenAndNeighboursToTheNearer) {
  const FormatSpec& s = GetParam();
  const std::vector<int> codes = positive_codes(s);
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i + 1 < codes.size(); ++i) {
    const int lo = codes[i], hi = codes[i + 1];
    const double mid = (spec_value(s, lo) + spec_value(s, hi)) / 2;
    const float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid) << "midpoints are exact in float32";
    const int even = (lo & 1) == 0 ? lo : hi;
    for (int sign : {1, -1}) {
      auto with_sign = [&](int code) {
        if (sign > 0) return code;
        return code == 0 && !s.signed_zero ? 0 : (code | 0x80);
      };
      const float ms = sign * m;
      ASSERT_EQ(encode(s, ms), with_sign(even)) << "midpoint " << ms;
      ASSERT_EQ(encode(s, std::nextafter(ms, sign * inf)), with_sign(hi)) << "above " << ms;
      ASSERT_EQ(encode(s, std::nextafter(ms, 0.0f)), with_sign(lo)) << "below " << ms;
    }
  }
}

TEST_P(Fp8Test, SaturatesBeyondTheLargestValue) {
  const FormatSpec& s = GetParam();
  const int max_code = positive_codes(s).back();
  const float max = static_cast<float>(s.max);
  const float inf = std::numeric_limits<float>::infinity();
  // Half a mantissa step above the largest value: a tie that plain rounding would send to the
  // even neighbour above it (464 for e4m3fn, 248 for e4m3fnuz).
  const float tie_above = static_cast<float>(s.max + std::ldexp(1.0 / 16, std::ilogb(s.max)));
  const float huge[] = {max,
                        std::nextafter(max, inf),
                        tie_above,
                        std::nextafter(tie_above, inf),
                        max * 1.125f,
                        max * 2.0f,
                        1e10f,
                        std::numeric_limits<float>::max(),
                        inf};
  for (float f : huge) {
    EXPECT_EQ(encode(s, f), max_code) << f;
    EXPECT_EQ(encode(s, -f), max_code | 0x80) << -f;
  }
  EXPECT_EQ(encode(s, std::nextafter(max, 0.0f)), max_code);
}

TEST_P(Fp8Test, NaNAndZeros) {
  const FormatSpec& s = GetParam();
  const int nan_code = s.format == Fp8Format::kE4M3FN ? 0x7F : 0x80;
  const float nans[] = {std::numeric_limits<float>::quiet_NaN(),
                        -std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::signaling_NaN(),
                        bits_of_nan_with_payload()};
  for (float f : nans) EXPECT_EQ(encode(s, f), nan_code);
  EXPECT_EQ(encode(s, 0.0f), 0x00);
  EXPECT_EQ(encode(s, -0.0f), s.signed_zero ? 0x80 : 0x00);
  // Far below the smallest subnormal, float32 subnormals included: zero of the input's sign
  // (kE4M3FNUZ has no -0, and 0x80 would be its NaN).
  const float tiny[] = {1e-30f, std::numeric_limits<float>::denorm_min(),
                        std::numeric_limits<float>::min()};
  for (float f : tiny) {
    EXPECT_EQ(encode(s, f), 0x00) << f;
    EXPECT_EQ(encode(s, -f), s.signed_zero ? 0x80 : 0x00) << -f;
  }
}

// Exactly half the smallest subnormal is a tie with zero (even): 0; a float more is 1 subnormal.
TEST_P(Fp8Test, SmallestSubnormalBoundary) {
  const FormatSpec& s = GetParam();
  const float smallest = static_cast<float>(spec_value(s, 0x01));
  EXPECT_EQ(static_cast<double>(smallest), std::ldexp(1.0, 1 - s.bias - 3));
  EXPECT_EQ(encode(s, smallest / 2), 0x00);
  EXPECT_EQ(encode(s, std::nextafter(smallest / 2, 1.0f)), 0x01);
  EXPECT_EQ(encode(s, smallest * 1.5f), 0x02);  // tie between 1 and 2: even
  EXPECT_EQ(encode(s, smallest * 2.5f), 0x02);  // tie between 2 and 3: even
  EXPECT_EQ(encode(s, -smallest * 0.75f), 0x81);
}

// Random floats of every magnitude from 2^-140 to 2^10, both signs, against the search oracle.
TEST_P(Fp8Test, RandomFloatsMatchTheNearestValueOracle) {
  const FormatSpec& s = GetParam();
  const std::vector<int> codes = positive_codes(s);
  std::mt19937 rng(12345 + static_cast<int>(s.format));
  std::uniform_real_distribution<double> exponent(-140.0, 10.0);
  std::uniform_int_distribution<uint32_t> mantissa(0, (1u << 23) - 1);
  for (int i = 0; i < 400000; ++i) {
    // A random float32: random exponent (log-uniform magnitude), random mantissa bits, sign.
    const float magnitude = static_cast<float>(std::ldexp(1.0, static_cast<int>(exponent(rng))));
    const float f = magnitude * (1.0f + std::ldexp(static_cast<float>(mantissa(rng)), -23));
    const float v = (i & 1) ? -f : f;
    ASSERT_EQ(encode(s, v), oracle_encode(s, codes, v)) << "input " << v;
  }
}

// A quantized row's max: NaN wins whichever side it is on, and otherwise it is the largest |v|.
TEST(Fp8RowMax, PropagatesNaNAndTakesTheLargestMagnitude) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(max_abs_accumulate(0.0f, -3.5f), 3.5f);
  EXPECT_EQ(max_abs_accumulate(3.5f, 2.0f), 3.5f);
  EXPECT_EQ(max_abs_accumulate(2.0f, -std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(max_abs_accumulate(1.0f, nan)));
  EXPECT_TRUE(std::isnan(max_abs_accumulate(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(max_abs_accumulate(nan, 0.0f)));
}

// The dynamic scale clamps an overflowed row max (an act(g) * up beyond float32) to FLT_MAX, so it
// stays finite; and with any dynamic scale an element of +-inf gets the same code as one clamped
// to +-FLT_MAX, which is why the kernels clamp only the max, not every element.
TEST_P(Fp8Test, DynamicScaleTreatsInfinityAsFltMax) {
  const FormatSpec& s = GetParam();
  const float inf = std::numeric_limits<float>::infinity();
  const float flt_max = std::numeric_limits<float>::max();
  dispatch_fp8_format(s.format, [&](auto format_tag) {
    using F = decltype(format_tag);
    EXPECT_EQ(fp8_row_scale<F>(inf, 0.0f), flt_max / static_cast<float>(s.max));
    EXPECT_EQ(fp8_row_scale<F>(inf, 0.0f), fp8_row_scale<F>(flt_max, 0.0f));
    EXPECT_TRUE(std::isnan(fp8_row_scale<F>(std::numeric_limits<float>::quiet_NaN(), 0.0f)));
    const int max_code = positive_codes(s).back();
    // Scales a row can get: from its max (an overflowed one included), capped by a bound, or
    // raised to the floor.
    for (float row_max : {inf, flt_max, 3e38f, 1e30f, 448.0f, 1.0f, 1e-30f, 0.0f}) {
      for (float bound : {0.0f, 1e-3f, 1.0f, 1e30f}) {
        const float scale = fp8_row_scale<F>(row_max, bound);
        EXPECT_TRUE(std::isfinite(scale) && scale > 0.0f) << row_max << " " << bound;
        const float inverse = fp8_inverse_scale(scale);
        for (float sign : {1.0f, -1.0f}) {
          const int want = sign > 0 ? max_code : (max_code | 0x80);
          EXPECT_EQ(fp8_quantize<F>(sign * inf, inverse), want) << row_max << " " << bound;
          EXPECT_EQ(fp8_quantize<F>(sign * flt_max, inverse), want) << row_max << " " << bound;
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Test, ::testing::ValuesIn(kFormats),
                         [](const ::testing::TestParamInfo<FormatSpec>& info) {
                           return std::string(fp8_format_name(info.param.format));
                         });

}  // namespace
}  // namespace fusekit::detail
