// The gated activations (SiLU, GELU with tanh, GELU with erf) and their derivatives in float32,
// written once for the CPU backend and the GPU kernels.
//
// Why our own exp and erfc. The fp8 forms quantize each row by its largest |y|, and the CPU
// result is the reference the GPU must match bit for bit (output codes and scales). The math
// libraries of glibc, CUDA and ROCm round exp and erfc differently in the last place, which would
// move a value across an fp8 rounding boundary now and then. These versions use only operations
// IEEE 754 defines exactly (+, *, /, fma, comparisons, bit moves; core/host_device.h's
// reciprocal is the IEEE division's result too), so they give the same bits on every backend, as
// long as the compiler neither fuses a * b + c on its own nor flushes subnormals: the sources
// that include this header are compiled with contraction off (CMakeLists.txt: -ffp-contract=off,
// nvcc -fmad=false) and without fast-math. Accuracy: exp
// within 2 ulp, erfc within about 5e-7 relative, so the activations are within a few ulp of the
// float64 value, far inside the output dtype's rounding.
//
// Overflow. Every finite input gives the mathematically right value and never NaN: the sigmoid
// takes the form that cannot overflow for each sign, gelu_tanh uses 0.5 * (1 + tanh(z)) =
// sigmoid(2z) (no tanh of a huge argument, no cancellation of 1 + tanh(z) near -1), gelu uses
// 0.5 * erfc(-x / sqrt(2)), and products of an infinite intermediate with a vanishing factor are
// never formed (a derivative term that must vanish is selected to 0). NaN in gives NaN out.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/fp8.h"  // fp8_float_bits / fp8_bits_float
#include "core/host_device.h"
#include "fusekit/activation.h"

namespace fusekit::detail {

// e^-a for a >= 0, without a branch or a float <-> int conversion. Cody-Waite reduction
// a = n ln2 - r (n = round(a / ln2), |r| <= ln2 / 2, exact with fma), a degree-7 Taylor
// polynomial for e^r (truncation < 6e-9), then 2^-n applied as two exact power-of-two factors
// built from n's bits, so a result in the subnormal range is rounded once (n itself is the low
// bits of a * log2(e) + 1.5 * 2^23, which that addition rounds to an integer). Inputs beyond 104
// are clamped there: e^-104 already rounds to 0. Accuracy: within 2 ulp. NaN in gives NaN out.
// About 20 instructions, none of them a branch or a conversion, since the forward kernels have
// only a few dozen instructions per element to spend before they stop being memory-bound.
FUSEKIT_HOST_DEVICE float portable_exp_neg(float a) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // 12 bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723e-06f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: k's last bits hold round(a log2e)
  constexpr uint32_t kRoundMagicBits = 0x4B400000u;
  const float c = a > 104.0f ? 104.0f : a;  // NaN stays NaN
  const float k = fmaf(c, kLog2e, kRoundMagic);
  const float n = k - kRoundMagic;  // 0 .. 150, exact
  float r = fmaf(n, kLn2Hi, -c);
  r = fmaf(n, kLn2Lo, r);
  float p = 1.0f / 5040.0f;
  p = fmaf(p, r, 1.0f / 720.0f);
  p = fmaf(p, r, 1.0f / 120.0f);
  p = fmaf(p, r, 1.0f / 24.0f);
  p = fmaf(p, r, 1.0f / 6.0f);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  // 2^-n = 2^-h1 * 2^-h2 with h1, h2 <= 75: both normal floats, so p * 2^-h1 is exact.
  const uint32_t ni = fp8_float_bits(k) - kRoundMagicBits;  // garbage for NaN; p is NaN then
  const uint32_t h1 = ni >> 1;
  const uint32_t h2 = ni - h1;
  const float f1 = fp8_bits_float((127u - h1) << 23);
  const float f2 = fp8_bits_float((127u - h2) << 23);
  return (p * f1) * f2;
}

// x * sigmoid(t) = x / (1 + e^-t), from e = e^-|t| (which cannot overflow) and one reciprocal:
// t >= 0: x * (1 / (1 + e));  t < 0: x e * (1 / (1 + e)). Right for every finite x and t,
// including t = +-inf; NaN in x or t gives NaN.
FUSEKIT_HOST_DEVICE float mul_sigmoid(float x, float t) {
  const float e = portable_exp_neg(fabsf(t));
  const float numerator = t >= 0.0f ? x : x * e;
  return numerator * reciprocal_1_to_16(1.0f + e);
}

// sigmoid(t) and sigmoid(-t) = 1 - sigmoid(t), each computed directly (no cancellation).
struct SigmoidPair {
  float pos;
  float neg;
};
FUSEKIT_HOST_DEVICE SigmoidPair portable_sigmoid_pair(float t) {
  const float e = portable_exp_neg(fabsf(t));
  const float inverse = reciprocal_1_to_16(1.0f + e);
  const bool nonneg = t >= 0.0f || t != t;  // NaN: both NaN through e
  return {nonneg ? inverse : e * inverse, nonneg ? e * inverse : inverse};
}

// erfc(x). |x| <= 1: 1 - x P(x^2). 1 < |x| <= 10.5: e^(-x^2) Q(1/x) / x, with e^(-x^2) corrected
// for the rounding of x^2. Beyond 10.5 erfc underflows to 0 (2 for negative x). P and Q are
// least-squares fits (relative error ~1e-7) of erf(x)/x in x^2 and of x e^(x^2) erfc(x) in 1/x.
// Both forms are computed for every x (the second on |x| clamped into its range) and one is
// selected: a branch per element would serialize a GPU thread's elements, and a warp whose
// inputs straddle 1 runs both sides anyway.
FUSEKIT_HOST_DEVICE float portable_erfc(float x) {
  const float a = fabsf(x);
  // |x| <= 1
  const float s = a * a;
  float p = -5.625396152e-04f;
  p = fmaf(p, s, 4.916023463e-03f);
  p = fmaf(p, s, -2.670994960e-02f);
  p = fmaf(p, s, 1.128013059e-01f);
  p = fmaf(p, s, -3.761231899e-01f);
  p = fmaf(p, s, 1.128379107e+00f);
  const float erf_a = a * p;
  const float near = x < 0.0f ? 1.0f + erf_a : 1.0f - erf_a;
  // 1 < |x| <= 10.5, on b = |x| clamped into that range (NaN stays NaN)
  const float b = a < 1.0f ? 1.0f : (a > 10.5f ? 10.5f : a);
  const float u = reciprocal_1_to_16(b);
  float q = -4.892137274e-02f;
  q = fmaf(q, u, 2.404636592e-01f);
  q = fmaf(q, u, -4.184852242e-01f);
  q = fmaf(q, u, 1.251434237e-01f);
  q = fmaf(q, u, 6.519162655e-01f);
  q = fmaf(q, u, -1.148213863e+00f);
  q = fmaf(q, u, 8.139593601e-01f);
  q = fmaf(q, u, -7.939058542e-02f);
  q = fmaf(q, u, -2.724549472e-01f);
  q = fmaf(q, u, -6.405509193e-04f);
  q = fmaf(q, u, 5.642073750e-01f);
  const float sq = b * b;
  const float sq_error = fmaf(b, b, -sq);  // b^2 = sq + sq_error exactly
  const float e = portable_exp_neg(sq);
  float tail = fmaf(-sq_error, e, e) * (q * u);  // erfc(b) = e^(-sq) (1 - sq_error) Q(u) / b
  if (a > 10.5f) tail = 0.0f;                   // underflow
  const float far = x < 0.0f ? 2.0f - tail : tail;
  return a <= 1.0f ? near : far;
}

// Value and derivative of each activation. `value` is what the forward kernels multiply by up.
template <Activation kAct>
struct ActMath;

// silu(x) = x sigmoid(x); silu'(x) = s + x s (1 - s), with 1 - s = sigmoid(-x) computed directly.
template <>
struct ActMath<Activation::kSilu> {
  FUSEKIT_HOST_DEVICE static float value(float x) { return mul_sigmoid(x, x); }
  FUSEKIT_HOST_DEVICE static float derivative(float x) {
    const SigmoidPair s = portable_sigmoid_pair(x);
    return s.pos + (x * s.pos) * s.neg;  // x s is finite; s_neg -> 0 where x s is large
  }
};

// gelu_tanh(x) = 0.5 x (1 + tanh(z)) = x sigmoid(2z), z = sqrt(2/pi) (x + 0.044715 x^3).
// Derivative: sigmoid(2z) + x 2z' sigmoid(2z) sigmoid(-2z), z' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <>
struct ActMath<Activation::kGeluTanh> {
  static constexpr float kTwoSqrt2OverPi = 1.59576912160573071f;  // 2 sqrt(2 / pi)
  static constexpr float kCubic = 0.044715f;
  // 2z, which is +-inf (never NaN) when x^3 overflows.
  FUSEKIT_HOST_DEVICE static float two_z(float x) {
    return (kTwoSqrt2OverPi * x) * fmaf(kCubic * x, x, 1.0f);
  }
  FUSEKIT_HOST_DEVICE static float value(float x) { return mul_sigmoid(x, two_z(x)); }
  FUSEKIT_HOST_DEVICE static float derivative(float x) {
    const float t = two_z(x);
    const SigmoidPair sp = portable_sigmoid_pair(t);
    const float s = sp.pos;
    const float s_s_neg = s * sp.neg;
    // x * d(2z)/dx can overflow where s (1 - s) has already vanished: select 0 there.
    const float dt = kTwoSqrt2OverPi * fmaf(3.0f * kCubic * x, x, 1.0f);
    const float term = s_s_neg > 0.0f ? (x * dt) * s_s_neg : 0.0f;
    return s + term;
  }
};

// gelu(x) = 0.5 x erfc(-x / sqrt(2)); gelu'(x) = 0.5 erfc(-x / sqrt(2)) + x e^(-x^2/2) / sqrt(2 pi).
template <>
struct ActMath<Activation::kGelu> {
  static constexpr float kInvSqrt2 = 0.707106781186547524f;
  static constexpr float kInvSqrt2Pi = 0.398942280401432678f;
  FUSEKIT_HOST_DEVICE static float cdf(float x) { return 0.5f * portable_erfc(-x * kInvSqrt2); }
  FUSEKIT_HOST_DEVICE static float value(float x) { return x * cdf(x); }
  FUSEKIT_HOST_DEVICE static float derivative(float x) {
    const float half_sq = 0.5f * x * x;  // may be inf: e^-inf = 0, and x stays finite
    return cdf(x) + x * (kInvSqrt2Pi * portable_exp_neg(half_sq));
  }
};

}  // namespace fusekit::detail
