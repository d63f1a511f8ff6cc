// The gated activations (SiLU, GELU with tanh, GELU with erf) and their derivatives in float32,
// written once for the CPU backend and the GPU kernels.
//
// Why our own exp and normal CDF. The fp8 forms quantize each row by its largest |y|, and the CPU
// result is the reference the GPU must match bit for bit (output codes and scales). The math
// libraries of glibc, CUDA and ROCm round exp and erfc differently in the last place, which would
// move a value across an fp8 rounding boundary now and then. These versions use only operations
// IEEE 754 defines exactly (+, *, /, fma, comparisons, bit moves; core/host_device.h's
// reciprocal is the IEEE division's result too), so they give the same bits on every backend, as
// long as the compiler neither fuses a * b + c on its own nor flushes subnormals: the sources
// that include this header are compiled with contraction off (CMakeLists.txt: -ffp-contract=off,
// nvcc -fmad=false) and without fast-math. Accuracy: exp within 2 ulp, the normal CDF within about
// 3e-7 relative, so the activations are within a few ulp of the float64 value, far inside the
// output dtype's rounding. The fp8 forms take shorter versions (Fp8Ops), the same bits everywhere
// and within about 1e-5 relative, which 3 mantissa bits cannot see. Cost matters as much: the forward kernels are memory-bound only while
// the math stays under a few dozen instructions per element, so each function here is written
// as straight-line code with the fewest operations that keep that accuracy.
//
// Overflow. Every finite input gives the mathematically right value and never NaN: the sigmoid
// takes the form that cannot overflow for each sign, gelu_tanh uses 0.5 * (1 + tanh(z)) =
// sigmoid(2z) (no tanh of a huge argument, no cancellation of 1 + tanh(z) near -1), gelu's normal
// CDF is never 1 - (something near 1) on the negative side, and products of an infinite
// intermediate with a vanishing factor are never formed (a derivative term that must vanish is
// selected to 0). NaN in gives NaN out.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/fp8.h"  // fp8_float_bits / fp8_bits_float
#include "core/host_device.h"
#include "fusekit/activation.h"

namespace fusekit::detail {

// e^-a for a >= 0, without a branch or a float <-> int conversion. Cody-Waite reduction
// a = n ln2 - r (n = round(a / ln2), |r| <= ln2 / 2, exact with fma), a degree-6 polynomial for
// e^r (a minimax fit of relative error 3.1e-9 with the first two coefficients held at 1; see
// dev/fit_act_math.py), then 2^-n applied so that a result in the subnormal
// range is rounded once. n itself is the low bits of k = a * log2(e) + 1.5 * 2^23, which that
// addition rounds to an integer. The polynomial's coefficients carry a factor 2^64 (exact: a power
// of two commutes with every rounding while nothing overflows), so p * 2^(64 - n) is a normal float
// for every n in 0 .. 150 and is formed by one integer subtraction from p's exponent bits
// (k's bits shifted left by 23 are n << 23: the constant's own bits shift out); the final
// multiply by 2^-64 is the one rounding. Inputs beyond 104 are clamped there: e^-104 already
// rounds to 0. Accuracy: within 2 ulp. NaN in gives NaN out (added back as c - c, since the
// exponent arithmetic would turn a NaN into a number). About 15 instructions, since the forward
// kernels have only a few dozen per element to spend before they stop being memory-bound.
FUSEKIT_HOST_DEVICE float portable_exp_neg(float a) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // 12 bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723e-06f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: k's last bits hold round(a log2e)
  constexpr float kTwo64 = 18446744073709551616.0f;  // 2^64
  constexpr float kTwoMinus64 = 5.42101086242752217e-20f;  // 2^-64
  const float c = a > 104.0f ? 104.0f : a;  // NaN stays NaN
  const float k = fmaf(c, kLog2e, kRoundMagic);
  const float n = k - kRoundMagic;  // 0 .. 150, exact
  float r = fmaf(n, kLn2Hi, -c);
  r = fmaf(n, kLn2Lo, r);
  float p = kTwo64 * 1.381452765e-03f;
  p = fmaf(p, r, kTwo64 * 8.368746367e-03f);
  p = fmaf(p, r, kTwo64 * 4.166839105e-02f);
  p = fmaf(p, r, kTwo64 * 1.666652039e-01f);
  p = fmaf(p, r, kTwo64 * 4.999999343e-01f);
  p = fmaf(p, r, kTwo64);
  p = fmaf(p, r, kTwo64);  // 2^64 e^r
  const float scaled = fp8_bits_float(fp8_float_bits(p) - (fp8_float_bits(k) << 23));
  return fmaf(scaled, kTwoMinus64, c - c);  // c - c: 0, or NaN for NaN
}

// e^-(a s) for a s in [0, 189] (s = log2(e) gives e^-a), accurate to 3e-6 relative: the fp8
// forms' primitive. v = a s is split as n - f with n = round(v) (the low bits of
// k = a s + 1.5 * 2^23) and f = n - a s in [-1/2, 1/2] (one fma, so one rounding; s's own
// rounding adds v 2^-25 at most), 2^f is a degree-4 fit (dev/fit_act_math.py; 2.6e-6) scaled by
// 2^64, and 2^-n is applied as in portable_exp_neg: an integer subtraction from the exponent bits
// (a normal float for every n up to 189) and one rounding multiply by 2^-64, so subnormal results
// are rounded once. About 9 instructions, against 15 for portable_exp_neg. The caller bounds
// a s (no clamp here) and carries NaN itself (a NaN a gives an unspecified number).
FUSEKIT_HOST_DEVICE float short_exp_neg(float a, float s) {
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23
  constexpr float kTwo64 = 18446744073709551616.0f;
  constexpr float kTwoMinus64 = 5.42101086242752217e-20f;
  const float k = fmaf(a, s, kRoundMagic);
  const float n = k - kRoundMagic;
  const float f = fmaf(a, -s, n);
  float p = kTwo64 * 9.570039710e-03f;
  p = fmaf(p, f, kTwo64 * 5.591827013e-02f);
  p = fmaf(p, f, kTwo64 * 2.402474936e-01f);
  p = fmaf(p, f, kTwo64 * 6.931217649e-01f);
  p = fmaf(p, f, kTwo64 * 9.999992591e-01f);  // 2^64 2^f
  return fp8_bits_float(fp8_float_bits(p) - (fp8_float_bits(k) << 23)) * kTwoMinus64;
}

// The primitives the forward activations are built from, as a policy: e^-a for a >= 0,
// e^(-x^2 / 2) from x^2 = xx + xx_err (xx rounded, xx_err its exact error), and 1 / d for d in
// [1, 16]. Three policies, by what the output needs:
// - PortableOps: float32-accurate (a few ulp) and the same bits on every backend. Float32
//   outputs and the backward pass.
// - Fp8Ops: the same bits on every backend, accurate to about 1e-5 relative: an fp8 output keeps
//   3 mantissa bits, so its codes match the float64 value's as often as float32's would (within
//   one step, never worse), and the GPU's codes and scales still match the CPU's bit for bit.
//   A shorter exp (short_exp_neg), gelu's Q of degree 6 and x^2 as rounded: about a quarter fewer
//   instructions per element, which the quantizing kernels, issue-bound on their math, need.
// - ApproxOps (gpu/act/act_kernel.cuh): the special-function units' exp2 and reciprocal, a few
//   1e-6 relative, for 16-bit outputs on the GPU, whose bits need not match the CPU's.
// kFloat32Accurate picks normal_cdf's degree-8 Q; kNeedsUpperClamp says whether normal_cdf must
// clamp x from above (the exact reciprocal's Newton steps and short_exp_neg take no infinity).
struct PortableOps {
  static constexpr bool kFloat32Accurate = true;
  static constexpr bool kNeedsUpperClamp = true;
  FUSEKIT_HOST_DEVICE static float exp_neg(float a) { return portable_exp_neg(a); }
  // e^(-xx / 2) (1 - xx_err / 2): the first-order correction is exact to float precision.
  FUSEKIT_HOST_DEVICE static float exp_neg_half_square(float xx, float xx_err) {
    const float e = portable_exp_neg(0.5f * xx);
    return fmaf(-0.5f * xx_err, e, e);
  }
  FUSEKIT_HOST_DEVICE static float reciprocal(float d) { return reciprocal_of_normal(d); }
};

struct Fp8Ops {
  static constexpr bool kFloat32Accurate = false;
  static constexpr bool kNeedsUpperClamp = true;
  static constexpr float kLog2e = 1.44269504088896341f;
  // Past a = 104, e^-a rounds to 0 in float32; the clamp also keeps n within short_exp_neg's range.
  // A NaN a stays NaN through the clamp and gives an unspecified number: the activations take
  // e^-|t| only beside a factor x that carries the NaN (mul_sigmoid).
  FUSEKIT_HOST_DEVICE static float exp_neg(float a) {
    return short_exp_neg(a > 104.0f ? 104.0f : a, kLog2e);
  }
  // xx <= 225 here (normal_cdf's clamp), so n <= 163. xx's rounding error moves the result by
  // xx 2^-25 relative at most (7e-6 at the clamp, where Phi is below 1e-50).
  FUSEKIT_HOST_DEVICE static float exp_neg_half_square(float xx, float /*xx_err*/) {
    return short_exp_neg(xx, 0.5f * kLog2e);
  }
  FUSEKIT_HOST_DEVICE static float reciprocal(float d) { return reciprocal_of_normal(d); }
};

// x * sigmoid(t) = x / (1 + e^-t), from e = e^-|t| (which cannot overflow) and one reciprocal:
// t >= 0: x * (1 / (1 + e));  t < 0: x e * (1 / (1 + e)). Right for every finite x and t,
// including t = +-inf; NaN in x or t gives NaN.
template <class Ops = PortableOps>
FUSEKIT_HOST_DEVICE float mul_sigmoid(float x, float t) {
  const float e = Ops::exp_neg(fabsf(t));
  const float numerator = t >= 0.0f ? x : x * e;
  return numerator * Ops::reciprocal(1.0f + e);
}

// sigmoid(t) and sigmoid(-t) = 1 - sigmoid(t), each computed directly (no cancellation).
struct SigmoidPair {
  float pos;
  float neg;
};
FUSEKIT_HOST_DEVICE SigmoidPair portable_sigmoid_pair(float t) {
  const float e = portable_exp_neg(fabsf(t));
  const float inverse = reciprocal_of_normal(1.0f + e);
  const bool nonneg = t >= 0.0f || t != t;  // NaN: both NaN through e
  return {nonneg ? inverse : e * inverse, nonneg ? e * inverse : inverse};
}

// The standard normal CDF Phi(x) = erfc(-x / sqrt(2)) / 2, in one form for every x. With
// a = |x| / sqrt(2):
//   erfc(a) = e^(-a^2) t Q(t),  t = 1 / (1 + a / 2),
//   Phi(x) = erfc(a) / 2 for x <= 0, and 1 - erfc(a) / 2 for x > 0.
// t Q(t) stands for h(a) = e^(a^2) erfc(a), which is smooth and slowly varying (1 at 0, about
// 1 / (a sqrt(pi)) for large a): Q is a degree-8 fit in t over a in [0, 15 / sqrt(2)]
// (dev/fit_act_math.py; relative error 4.4e-8; degree 6 and 1.6e-6 for Fp8Ops and ApproxOps),
// reached with one reciprocal, so no branch and no second form. The fast-varying factor
// e^(-a^2) = e^(-x^2 / 2) is taken from x^2 = xx + xx_err (exact with fma; Fp8Ops and ApproxOps
// leave xx_err out), not from the rounded a, whose rounding the exponent would magnify about 2a^2
// times (1e-5 relative at x = -13). x is clamped to [-15, 15], where e^(-x^2 / 2) = e^-112.5
// rounds to 0 (Phi(-15) = 0, Phi(15) = 1), so infinite x forms no inf - inf (x^2's error term)
// and no inf * 0 (the reciprocal's Newton steps); approximate Ops take only the lower bound. A
// NaN x gives the clamp's bound here (min and max drop NaN, one instruction each): the
// activations multiply by x, which carries the NaN. Relative error about 4e-7 for x in
// [-13, 13]; below -13.1 Phi is subnormal, and off by a few 2^-149 at most.
template <class Ops = PortableOps>
FUSEKIT_HOST_DEVICE float normal_cdf(float x) {
  constexpr float kInvTwoSqrt2 = 0.353553390593273762f;  // a / 2 = |x| / (2 sqrt 2)
  // Approximate Ops need no upper clamp: for x = +inf (or x^2 past float's range) their
  // reciprocal gives t = 0 and their exp 0, so half_tail is 0 and Phi is 1.
  const float c = Ops::kNeedsUpperClamp ? clamp_dropping_nan(x, -15.0f, 15.0f)
                                         : max_dropping_nan(x, -15.0f);
  const float t = Ops::reciprocal(fmaf(fabsf(c), kInvTwoSqrt2, 1.0f));  // 1 + a / 2 in [1, 6.31]
  float q;  // Q(t) / 2
  if constexpr (Ops::kFloat32Accurate) {
    q = -2.960787436e-02f;
    q = fmaf(q, t, 1.426459868e-01f);
    q = fmaf(q, t, -2.443431523e-01f);
    q = fmaf(q, t, 1.398848468e-01f);
    q = fmaf(q, t, -1.389993937e-02f);
    q = fmaf(q, t, 1.015921184e-01f);
    q = fmaf(q, t, 1.214889683e-01f);
    q = fmaf(q, t, 1.411963087e-01f);
    q = fmaf(q, t, 1.410427153e-01f);
  } else {  // degree 6, 1.6e-6: no more than the shorter exps' own error
    q = 4.357175698e-02f;
    q = fmaf(q, t, -1.765082235e-01f);
    q = fmaf(q, t, 1.920190400e-01f);
    q = fmaf(q, t, 2.077042320e-02f);
    q = fmaf(q, t, 1.400725713e-01f);
    q = fmaf(q, t, 1.389169717e-01f);
    q = fmaf(q, t, 1.411566803e-01f);
  }
  const float xx = c * c;
  const float xx_err = fmaf(c, c, -xx);  // x^2 = xx + xx_err exactly
  const float half_tail = Ops::exp_neg_half_square(xx, xx_err) * (t * q);  // erfc(a) / 2
  return c > 0.0f ? 1.0f - half_tail : half_tail;
}

// Value and derivative of each activation. `value` is what the forward kernels multiply by up,
// with the primitives of Ops; the derivatives (backward pass) always take the portable ones.
template <Activation kAct>
struct ActMath;

// silu(x) = x sigmoid(x); silu'(x) = s + x s (1 - s), with 1 - s = sigmoid(-x) computed directly.
template <>
struct ActMath<Activation::kSilu> {
  template <class Ops = PortableOps>
  FUSEKIT_HOST_DEVICE static float value(float x) {
    return mul_sigmoid<Ops>(x, x);
  }
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
  template <class Ops = PortableOps>
  FUSEKIT_HOST_DEVICE static float value(float x) {
    return mul_sigmoid<Ops>(x, two_z(x));
  }
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

// gelu(x) = x Phi(x); gelu'(x) = Phi(x) + x e^(-x^2/2) / sqrt(2 pi).
template <>
struct ActMath<Activation::kGelu> {
  static constexpr float kInvSqrt2Pi = 0.398942280401432678f;
  template <class Ops = PortableOps>
  FUSEKIT_HOST_DEVICE static float value(float x) {
    return x * normal_cdf<Ops>(x);
  }
  FUSEKIT_HOST_DEVICE static float derivative(float x) {
    const float half_sq = 0.5f * x * x;  // may be inf: e^-inf = 0, and x stays finite
    return normal_cdf(x) + x * (kInvSqrt2Pi * portable_exp_neg(half_sq));
  }
};

// The gate's gradient, dy * up * act'(gate), in the order that overflows only where the result
// does: dy * up can overflow for large finite inputs where act' is small (the negative side) and
// the gradient is finite, or 0 (inf * 0 would be NaN). So where |act'| <= 1, up * act' (which
// cannot overflow) comes first; where |act'| > 1 (at most ~1.13), dy * up, whose overflow the
// product keeps. An infinite or NaN input still gives inf or NaN.
template <Activation kAct>
FUSEKIT_HOST_DEVICE float gate_gradient(float dy, float up, float gate) {
  const float d = ActMath<kAct>::derivative(gate);
  return fabsf(d) <= 1.0f ? dy * (up * d) : (dy * up) * d;
}

}  // namespace fusekit::detail
