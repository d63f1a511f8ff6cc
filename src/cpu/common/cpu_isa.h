// Which instructions the CPU backend's row loops run on.
//
// Why: the activation math (core/act_math.h) is written with fmaf, which on the x86-64 baseline
// (SSE2, no fma instruction) is a call into libm for every use: about fifteen calls an element,
// and no loop around them can vectorize. Most x86-64 CPUs in use have AVX2 and FMA (Intel since
// 2013, AMD since 2015), where fmaf is one instruction and the loops vectorize eight floats wide.
//
// How: each row's work is a lambda passed to for_this_cpu, which calls it through one of two
// function templates: one compiled for AVX2 + FMA (GCC / Clang target attribute), taken where the
// CPU has both, and one for the build's own target. Both are `flatten`, so the lambda and
// everything it calls is inlined into them and compiled for their target; the helpers it calls
// keep their ordinary out-of-line copies (baseline code), so no AVX2 instruction can reach a CPU
// without it through a shared inline function. Elsewhere (other architectures or compilers) the
// lambda is called directly.
//
// Same bits either way: fma is exactly fmaf, contraction stays off in the CPU sources
// (CMakeLists.txt: -ffp-contract=off, so no a * b + c is fused on its own), and vectorized loops
// perform each element's operations unchanged (no reassociation without -ffast-math). They also
// build with -fno-trapping-math, which lets the vectorizer turn selects of computed values into
// blends; it changes no value.
#pragma once

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define FUSEKIT_CPU_AVX2_VARIANT 1
#else
#define FUSEKIT_CPU_AVX2_VARIANT 0
#endif

#include <atomic>
#if FUSEKIT_CPU_AVX2_VARIANT
#include <cpuid.h>
#endif

namespace fusekit::detail {

#if FUSEKIT_CPU_AVX2_VARIANT
template <typename Fn>
__attribute__((target("avx2,fma"), flatten)) void call_for_avx2(const Fn& fn) {
  fn();
}

template <typename Fn>
__attribute__((flatten)) void call_for_baseline(const Fn& fn) {
  fn();
}
#endif

// Whether this CPU runs the AVX2 + FMA variant (and this build has one).
inline bool cpu_has_avx2_fma() {
#if FUSEKIT_CPU_AVX2_VARIANT
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

// Whether this CPU has F16C's fp16 conversions (and this build can use them): the fp16 rows'
// conversions (cpu/common/row_convert.cc) take them where it does.
inline bool cpu_has_f16c() {
#if FUSEKIT_CPU_AVX2_VARIANT
  // F16C from CPUID leaf 1 itself: Clang's __builtin_cpu_supports knows no "f16c" (14, at least).
  // "avx" says the OS saves the AVX registers too, which F16C's instructions use.
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
           (ecx & bit_F16C) != 0;
  }();
  return has;
#else
  return false;
#endif
}

// Set by tests to run the baseline variant on a CPU that has the other, so that both are checked
// against each other bit for bit (tests/cpp/test_cpu_isa.cc).
inline std::atomic<bool>& cpu_baseline_forced() {
  static std::atomic<bool> forced{false};
  return forced;
}

// Runs fn() compiled for the best instruction set this CPU has (see above).
template <typename Fn>
void for_this_cpu(const Fn& fn) {
#if FUSEKIT_CPU_AVX2_VARIANT
  if (cpu_has_avx2_fma() && !cpu_baseline_forced().load(std::memory_order_relaxed)) {
    call_for_avx2(fn);
  } else {
    call_for_baseline(fn);
  }
#else
  fn();
#endif
}

}  // namespace fusekit::detail
