// The float32 building blocks of core/act_math.h against float64: e^-a, x * sigmoid(t), the
// sigmoid pair and the normal CDF. The activation tests check the ops end to end; these pin the
// pieces' accuracy and their edge cases (the subnormal range and underflow of e^-a, infinities,
// NaN), which random op inputs rarely reach.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "core/act_math.h"
#include "gtest/gtest.h"

namespace fusekit::detail {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Distance in units in the last place of float32 at `want`, with subnormals counted in units of
// the smallest subnormal (so an error in the subnormal range is measured in absolute terms).
double ulp_error(float got, double want) {
  const double ulp = std::max(std::ldexp(1.0, std::ilogb(want == 0.0 ? 1e-45 : want) - 23),
                              std::ldexp(1.0, -149));
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

TEST(ActMath, ExpNegWithinTwoUlpFromZeroToUnderflow) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(0.0f, 104.0f);
  double worst = 0.0;
  for (int i = 0; i < 200000; ++i) {
    const float a = i < 1000 ? static_cast<float>(i) * 0.104f : dist(rng);
    const float got = portable_exp_neg(a);
    worst = std::max(worst, ulp_error(got, std::exp(-static_cast<double>(a))));
  }
  EXPECT_LE(worst, 2.0);
}

TEST(ActMath, ExpNegEdges) {
  EXPECT_EQ(portable_exp_neg(0.0f), 1.0f);
  EXPECT_EQ(portable_exp_neg(-0.0f), 1.0f);
  // Subnormal results: e^-100 = 3.72e-44 is 26.5 units of 2^-149; rounded once to 27 or 26.
  const float sub = portable_exp_neg(100.0f);
  EXPECT_GT(sub, 0.0f);
  EXPECT_LT(sub, std::numeric_limits<float>::min());
  EXPECT_LE(ulp_error(sub, std::exp(-100.0)), 0.5 + 1e-9);
  // e^-103.9 is about 0.57 of the smallest subnormal: rounds up to it. e^-104 and beyond: 0.
  EXPECT_EQ(portable_exp_neg(103.9f), std::ldexp(1.0f, -149));
  EXPECT_EQ(portable_exp_neg(104.0f), 0.0f);
  EXPECT_EQ(portable_exp_neg(1e30f), 0.0f);
  EXPECT_EQ(portable_exp_neg(kInf), 0.0f);
  EXPECT_TRUE(std::isnan(portable_exp_neg(kNaN)));
}

TEST(ActMath, MulSigmoidMatchesFloat64AndNeverNaNForFiniteInputs) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 8.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = dist(rng);
    const float t = dist(rng);
    const double want = x / (1.0 + std::exp(-static_cast<double>(t)));
    EXPECT_LE(ulp_error(mul_sigmoid(x, t), want), 4.0) << "x=" << x << " t=" << t;
  }
  const float big = std::numeric_limits<float>::max();
  EXPECT_EQ(mul_sigmoid(big, big), big);
  EXPECT_EQ(mul_sigmoid(-big, -big), 0.0f);
  EXPECT_TRUE(std::signbit(mul_sigmoid(-big, -big)));
  EXPECT_EQ(mul_sigmoid(3.0f, kInf), 3.0f);
  EXPECT_EQ(mul_sigmoid(3.0f, -kInf), 0.0f);
  EXPECT_TRUE(std::isnan(mul_sigmoid(kNaN, 1.0f)));
  EXPECT_TRUE(std::isnan(mul_sigmoid(1.0f, kNaN)));
}

TEST(ActMath, SigmoidPairMatchesFloat64AndPropagatesNaN) {
  for (float t : {-200.0f, -30.0f, -1.5f, -0.0f, 0.0f, 0.25f, 17.0f, 200.0f}) {
    const SigmoidPair s = portable_sigmoid_pair(t);
    const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(t)));
    EXPECT_LE(ulp_error(s.pos, want), 4.0) << t;
    EXPECT_LE(ulp_error(s.neg, 1.0 - want), 4.0) << t;
  }
  const SigmoidPair s = portable_sigmoid_pair(kNaN);
  EXPECT_TRUE(std::isnan(s.pos));
  EXPECT_TRUE(std::isnan(s.neg));
}

// Phi(x) against float64 on a fine grid and at random points of [-13, 13] (Phi is a normal float
// there; the fit and the float32 evaluation give ~4e-7), then in the subnormal range below, where
// its error is absolute (a few 2^-149), and at the clamp and the special values.
TEST(ActMath, NormalCdfMatchesFloat64) {
  auto phi = [](float x) { return 0.5 * std::erfc(-static_cast<double>(x) / std::sqrt(2.0)); };
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> dist(-13.0f, 13.0f);
  double worst = 0.0;
  for (int i = 0; i < 300000; ++i) {
    const float x = i <= 104000 ? static_cast<float>(i - 52000) * 0.00025f : dist(rng);
    const double want = phi(x);
    worst = std::max(worst, std::fabs(normal_cdf(x) - want) / want);
  }
  EXPECT_LE(worst, 1e-6);
  for (float x = -13.0f; x >= -15.5f; x -= 0.001f) {
    EXPECT_LE(std::fabs(normal_cdf(x) - phi(x)), 1e-6 * phi(x) + 4 * std::ldexp(1.0, -149)) << x;
  }
  EXPECT_EQ(normal_cdf(0.0f), normal_cdf(-0.0f));
  EXPECT_NEAR(normal_cdf(0.0f), 0.5, 1e-7);
  EXPECT_EQ(normal_cdf(15.5f), 1.0f);
  EXPECT_EQ(normal_cdf(-15.5f), 0.0f);
  EXPECT_EQ(normal_cdf(std::numeric_limits<float>::max()), 1.0f);
  EXPECT_EQ(normal_cdf(-std::numeric_limits<float>::max()), 0.0f);
  EXPECT_EQ(normal_cdf(kInf), 1.0f);
  EXPECT_EQ(normal_cdf(-kInf), 0.0f);
  // NaN: normal_cdf gives a bound of its clamp, and gelu's x carries the NaN.
  EXPECT_TRUE(std::isnan(ActMath<Activation::kGelu>::value(kNaN)));
  EXPECT_TRUE(std::isnan(ActMath<Activation::kGelu>::derivative(kNaN)));
}

// The fp8 forms' primitives (Fp8Ops): the same bits on every backend, accurate to about 1e-5
// relative. e^-a over [0, 87] (normal results) within 5e-6 relative and in the subnormal range
// within a few units of 2^-149; the half-square form up to normal_cdf's clamp.
TEST(ActMath, Fp8ExpNegWithinFiveMillionthsFromZeroToUnderflow) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(0.0f, 87.0f);
  double worst = 0.0;
  for (int i = 0; i < 200000; ++i) {
    const float a = i < 1000 ? static_cast<float>(i) * 0.087f : dist(rng);
    const double want = std::exp(-static_cast<double>(a));
    worst = std::max(worst, std::fabs(Fp8Ops::exp_neg(a) - want) / want);
  }
  EXPECT_LE(worst, 5e-6);
  for (float a = 87.0f; a <= 110.0f; a += 0.01f) {
    const double want = std::exp(-static_cast<double>(a));
    EXPECT_LE(std::fabs(Fp8Ops::exp_neg(a) - want), 5e-6 * want + std::ldexp(1.0, -149)) << a;
  }
  EXPECT_EQ(Fp8Ops::exp_neg(1e30f), 0.0f);
  EXPECT_EQ(Fp8Ops::exp_neg(kInf), 0.0f);
  double worst_half = 0.0;
  for (float x = 0.0f; x <= 13.0f; x += 0.0007f) {
    const float xx = x * x;
    const double want = std::exp(-0.5 * static_cast<double>(x) * x);
    worst_half = std::max(worst_half, std::fabs(Fp8Ops::exp_neg_half_square(xx, 0.0f) - want) / want);
  }
  EXPECT_LE(worst_half, 1e-5);
  EXPECT_EQ(Fp8Ops::exp_neg_half_square(225.0f, 0.0f), 0.0f);
}

// The three activations with Fp8Ops against float64 within 1e-5 relative (fp8 keeps 3 mantissa
// bits), and within 8 units of 2^-149 where y is subnormal (large negative x: the products of
// subnormal factors round in absolute terms, as the portable math's do); the largest
// finite inputs, infinities and NaN as with the portable math.
TEST(ActMath, Fp8ActivationsWithinOneHundredThousandth) {
  auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  auto silu = [](double x) { return x / (1.0 + std::exp(-x)); };
  auto gelu_tanh = [](double x) {
    const double z = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1.0 + std::exp(-2.0 * z));
  };
  std::mt19937 rng(19);
  std::uniform_real_distribution<float> dist(-12.0f, 12.0f);
  double worst[3] = {0.0, 0.0, 0.0};
  for (int i = 0; i < 200000; ++i) {
    const float x = dist(rng);
    if (x == 0.0f) continue;
    const double want[3] = {silu(x), gelu_tanh(x), x * phi(x)};
    const float got[3] = {ActMath<Activation::kSilu>::value<Fp8Ops>(x),
                          ActMath<Activation::kGeluTanh>::value<Fp8Ops>(x),
                          ActMath<Activation::kGelu>::value<Fp8Ops>(x)};
    for (int k = 0; k < 3; ++k) {
      const double excess = std::fabs(got[k] - want[k]) - std::ldexp(8.0, -149);
      worst[k] = std::max(worst[k], excess / std::fabs(want[k]));
    }
  }
  EXPECT_LE(worst[0], 1e-5);
  // gelu_tanh: 2z's own float32 rounding, magnified |2z| times by the exponential, is 8e-6 of
  // y near 2z = -80 with the portable math too; the shorter exp adds its 3e-6.
  EXPECT_LE(worst[1], 2e-5);
  EXPECT_LE(worst[2], 1e-5);
  const float big = std::numeric_limits<float>::max();
  EXPECT_EQ((ActMath<Activation::kSilu>::value<Fp8Ops>(big)), big);
  EXPECT_EQ((ActMath<Activation::kGeluTanh>::value<Fp8Ops>(big)), big);
  EXPECT_EQ((ActMath<Activation::kGelu>::value<Fp8Ops>(big)), big);
  EXPECT_EQ((ActMath<Activation::kSilu>::value<Fp8Ops>(-big)), 0.0f);
  EXPECT_EQ((ActMath<Activation::kGeluTanh>::value<Fp8Ops>(-big)), 0.0f);
  EXPECT_EQ((ActMath<Activation::kGelu>::value<Fp8Ops>(-big)), 0.0f);
  EXPECT_EQ((ActMath<Activation::kSilu>::value<Fp8Ops>(kInf)), kInf);
  EXPECT_EQ((ActMath<Activation::kGelu>::value<Fp8Ops>(kInf)), kInf);
  EXPECT_TRUE(std::isnan(ActMath<Activation::kSilu>::value<Fp8Ops>(kNaN)));
  EXPECT_TRUE(std::isnan(ActMath<Activation::kGeluTanh>::value<Fp8Ops>(kNaN)));
  EXPECT_TRUE(std::isnan(ActMath<Activation::kGelu>::value<Fp8Ops>(kNaN)));
}

}  // namespace
}  // namespace fusekit::detail
