// FUSEKIT_HOST_DEVICE: marks a function that must compile, and give the same results, in host
// code built by a plain C++ compiler (the CPU backend, tests) and in GPU code built by nvcc or
// HIP's clang.
//
// The definitions meant for both sides (the fp8 formats in core/fp8.h, the activation math in
// core/act_math.h) live under src/core/ and include no GPU header, so this test is about which
// kind of compiler is running, not about CUDA versus HIP (that difference stays in
// gpu/platform.h, which includes this header). The exceptions are reciprocal_1_to_16 and
// max_propagating_nan below, whose CUDA forms are faster ways to the same bits.
#pragma once

#if defined(__CUDACC__) || defined(__HIP__)
#define FUSEKIT_HOST_DEVICE __host__ __device__ inline __attribute__((always_inline))
#else
#define FUSEKIT_HOST_DEVICE inline
#endif

namespace fusekit::detail {

// 1 / d rounded to nearest even, for 1 <= d <= 16 (and NaN for NaN), the same bits on every
// backend. The activations divide only by such numbers (1 + e^-|t| and erfc's |x| in (1, 10.5]).
// Why not just `1.0f / d` everywhere: nvcc's IEEE division checks each operand pair for the
// ranges its fast path cannot take and branches to a slow path, and that branch, one per element,
// keeps the compiler from interleaving the math of a thread's elements. For d in [1, 16] the fast
// path always applies, so on CUDA devices this is that path alone, straight-line: the hardware
// estimate refined by two Newton steps in fma, whose last rounding gives 1 / d correctly rounded
// (checked on an H100 for every float of [1, 16] against nvcc's division, bench/NOTES.md; the
// GPU tests compare the activations with the CPU's bit for bit, every bfloat16 gate included).
// Elsewhere (host compilers, HIP) it is the IEEE division itself.
FUSEKIT_HOST_DEVICE float reciprocal_1_to_16(float d) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  r = __fmaf_rn(r, __fmaf_rn(-d, r, 1.0f), r);
  return __fmaf_rn(r, __fmaf_rn(-d, r, 1.0f), r);
#else
  return 1.0f / d;
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
