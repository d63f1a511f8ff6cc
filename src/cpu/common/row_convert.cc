// fp16 rows to float32 and back (row_convert.h): F16C's conversions where the CPU has them, else
// core/half.h's, one element at a time. Both give the same bits for every input:
// - vcvtph2ps is exact, as is the software form, and quiets a signaling NaN as fp16_to_float does;
// - vcvtps2ph is told to round to nearest even (not MXCSR's mode), which is float_to_fp16's
//   rounding, overflow to infinity included; its NaN results (which keep the sign and the payload's
//   top bits) are replaced with float_to_fp16's one NaN of that sign, 0x7e00.
// tests/cpp/test_cpu_isa.cc checks every fp16 pattern, and floats around each rounding boundary,
// both ways.
#include "cpu/common/row_convert.h"

#include "cpu/common/cpu_isa.h"

#if FUSEKIT_CPU_AVX2_VARIANT
#include <immintrin.h>
#endif

namespace fusekit::detail {
namespace {

void widen_software(const HostHalf* src, float* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] = to_float(src[j]);
}

void narrow_software(const float* src, HostHalf* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] = from_float<HostHalf>(src[j]);
}

#if FUSEKIT_CPU_AVX2_VARIANT
__attribute__((target("avx,f16c"))) void widen_f16c(const HostHalf* src, float* dst, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + j));
    _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(halves));
  }
  widen_software(src + j, dst + j, n - j);
}

__attribute__((target("avx,f16c"))) void narrow_f16c(const float* src, HostHalf* dst, int64_t n) {
  const __m128i magnitude_bits = _mm_set1_epi16(0x7fff);
  const __m128i sign_bit = _mm_set1_epi16(static_cast<int16_t>(0x8000));
  const __m128i infinity = _mm_set1_epi16(0x7c00);
  const __m128i quiet_nan = _mm_set1_epi16(0x7e00);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m128i halves =
        _mm256_cvtps_ph(_mm256_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    // NaN: a magnitude above infinity's (a signed compare: magnitudes are at most 0x7fff).
    const __m128i is_nan = _mm_cmpgt_epi16(_mm_and_si128(halves, magnitude_bits), infinity);
    const __m128i canonical = _mm_or_si128(_mm_and_si128(halves, sign_bit), quiet_nan);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j),
                     _mm_blendv_epi8(halves, canonical, is_nan));
  }
  narrow_software(src + j, dst + j, n - j);
}

bool use_f16c() {
  return cpu_has_f16c() && !cpu_baseline_forced().load(std::memory_order_relaxed);
}
#endif

}  // namespace

void widen_row(const HostHalf* src, float* dst, int64_t n) {
#if FUSEKIT_CPU_AVX2_VARIANT
  if (use_f16c()) return widen_f16c(src, dst, n);
#endif
  widen_software(src, dst, n);
}

void narrow_row(const float* src, HostHalf* dst, int64_t n) {
#if FUSEKIT_CPU_AVX2_VARIANT
  if (use_f16c()) return narrow_f16c(src, dst, n);
#endif
  narrow_software(src, dst, n);
}

}  // namespace fusekit::detail
