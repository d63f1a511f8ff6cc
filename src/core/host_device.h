// FUSEKIT_HOST_DEVICE: marks a function that must compile, and give the same results, in host
// code built by a plain C++ compiler (the CPU backend, tests) and in GPU code built by nvcc or
// HIP's clang.
//
// The definitions meant for both sides (the fp8 formats in core/fp8.h, the activation math in
// core/act_math.h) live under src/core/ and include no GPU header, so this test is about which
// kind of compiler is running, not about CUDA versus HIP (that difference stays in
// gpu/platform.h, which includes this header). The exceptions are reciprocal_of_normal,
// divide_by_constant and max_propagating_nan below, whose CUDA forms are faster ways to the same
// bits (where their callers use them), and max_dropping_nan and clamp_dropping_nan, whose host
// forms are compares and selects that a vectorizing compiler takes where it cannot take fminf /
// fmaxf.
#pragma once

#if defined(__CUDACC__) || defined(__HIP__)
#define FUSEKIT_HOST_DEVICE __host__ __device__ inline __attribute__((always_inline))
#else
#define FUSEKIT_HOST_DEVICE inline
#endif

namespace fusekit::detail {

// 1 / d rounded to nearest even, for d such that d and 1 / d are normal floats (and NaN for NaN),
// the same bits on every backend. The callers stay in that range: the activations divide by
// 1 + e^-|t| and by erfc's |x| in (1, 10.5], the fp8 ops by a row's dynamic scale (core/fp8.h).
// Why not just `1.0f / d` everywhere: nvcc's IEEE division checks each operand pair for the
// ranges its fast path cannot take and branches to a slow path, and that branch keeps the
// compiler from interleaving the math around it (one per element in the activations; on the
// path from a row's max to its codes in the fp8 ops). For such d the fast path always applies, so
// on CUDA devices this is that path alone, straight-line: the hardware estimate refined by two
// Newton steps in fma, whose last rounding gives 1 / d correctly rounded. Checked against nvcc's
// division for every float of [1, 16] on an H100 and of a dynamic fp8 scale's range on an H200
// (tests/cpp/gpu_scale_math_check.cu; bench/NOTES.md); the steps scale by powers of two exactly
// while d and 1 / d stay normal. Elsewhere (host compilers, HIP) it is the IEEE division itself.
FUSEKIT_HOST_DEVICE float reciprocal_of_normal(float d) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  r = __fmaf_rn(r, __fmaf_rn(-d, r, 1.0f), r);
  return __fmaf_rn(r, __fmaf_rn(-d, r, 1.0f), r);
#else
  return 1.0f / d;
#endif
}

// x / d for a constant d, given z = 1 / d rounded: the quotient estimate x * z corrected once by
// its exact residual x - q * d (an fma). That is not the IEEE quotient for every x and d; each
// caller names the range where it is, checked for every float. On CUDA devices it replaces the
// division's slow-path branch with three straight-line instructions; elsewhere it is x / d.
FUSEKIT_HOST_DEVICE float divide_by_constant(float x, float d, float z) {
#if defined(__CUDA_ARCH__)
  const float q = __fmul_rn(x, z);
  return __fmaf_rn(__fmaf_rn(-q, d, x), z, q);
#else
  (void)z;
  return x / d;
#endif
}

// fmaxf(x, lo) and fminf(fmaxf(x, lo), hi) for lo <= hi, neither NaN: lo for a NaN x. GPUs
// execute these as one instruction each. Host compilers keep fminf and fmaxf as calls or scalar
// code (no vector instruction has their NaN rule), so the host forms are the same functions as
// compares and selects, which vectorize: a NaN fails the compare and gives lo.
FUSEKIT_HOST_DEVICE float max_dropping_nan(float x, float lo) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return fmaxf(x, lo);
#else
  return x > lo ? x : lo;
#endif
}

FUSEKIT_HOST_DEVICE float clamp_dropping_nan(float x, float lo, float hi) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return fminf(fmaxf(x, lo), hi);
#else
  const float low = x > lo ? x : lo;
  return low < hi ? low : hi;
#endif
}

// max(a, b), NaN if either is NaN (which NaN is unspecified). The portable form is a compare and
// a select, two to three instructions per element on a GPU; sm_80+ has it as one (max.NaN), which
// matters in the per-element max of the fp8 kernels.
FUSEKIT_HOST_DEVICE float max_propagating_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float m;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(m) : "f"(a), "f"(b));
  return m;
#else
  return (b > a || b != b) ? b : a;
#endif
}

}  // namespace fusekit::detail
