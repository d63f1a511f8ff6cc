// The CPU backend's conversions between a row's storage dtype and float32, a run of elements at a
// time.
//
// Why: converted one element at a time in software (core/half.h), fp16 costs a few tens of vector
// instructions per eight elements each way, and an op's rows were taking twice bf16's time for
// it. x86 CPUs with AVX2 also have F16C, whose vcvtph2ps / vcvtps2ph convert eight elements in one
// instruction each. An inline function cannot pick those by the CPU it runs on (cpu_isa.h: one
// inline copy serves both builds of a row's loops), so the fp16 forms are out-of-line functions
// (row_convert.cc) that choose F16C themselves, where the CPU has it and the baseline is not
// forced, with the same bits as core/half.h's (NaN included). The bf16 and float32 forms are
// inline loops, which vectorize in either build.
//
// The ops' loops convert whole rows (a weight once per call), or a row in chunks of
// kConvertChunk elements held in local arrays (in L1 either way). float32 rows are read and
// written in place, with no copy (floats_of, results_for).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/dtype_dispatch.h"

namespace fusekit::detail {

constexpr int64_t kConvertChunk = 256;

// dst[j] = to_float(src[j]) for j < n.
void widen_row(const HostHalf* src, float* dst, int64_t n);
inline void widen_row(const HostBFloat16* src, float* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] = to_float(src[j]);
}
inline void widen_row(const float* src, float* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] = src[j];
}

// dst[j] = from_float<T>(src[j]) for j < n.
void narrow_row(const float* src, HostHalf* dst, int64_t n);
inline void narrow_row(const float* src, HostBFloat16* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] = from_float<HostBFloat16>(src[j]);
}
inline void narrow_row(const float* src, float* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] = src[j];
}

// Calls chunk(j0, count) for consecutive runs [j0, j0 + count) covering [0, n), each at most
// kConvertChunk long.
template <typename Chunk>
void for_each_chunk(int64_t n, const Chunk& chunk) {
  for (int64_t j0 = 0; j0 < n; j0 += kConvertChunk) chunk(j0, std::min(kConvertChunk, n - j0));
}

// The float32 values of src[0, count): src itself where T is float32, else src converted into
// `buffer` (at least count floats).
template <typename T>
const float* floats_of(const T* src, int64_t count, float* buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return src;
  } else {
    widen_row(src, buffer, count);
    return buffer;
  }
}

// Where a run's float32 results are written before store_results(results, dst, count): dst
// itself where T is float32, else `buffer`.
template <typename T>
float* results_for(T* dst, float* buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return dst;
  } else {
    return buffer;
  }
}
template <typename T>
void store_results(const float* results, T* dst, int64_t count) {
  if constexpr (!std::is_same_v<T, float>) narrow_row(results, dst, count);
}

// dst[j] = from_float<T>(v[j]), and v[j] becomes the value stored: v rounded to T's precision.
template <typename T>
void store_rounded(float* v, T* dst, int64_t count) {
  narrow_row(v, dst, count);
  if constexpr (!std::is_same_v<T, float>) widen_row(dst, v, count);
}

// v[j] = to_float(from_float<T>(v[j])): each value rounded to T's precision, kept as a float.
template <typename T>
void round_row(float* v, int64_t n) {
  if constexpr (!std::is_same_v<T, float>) {
    for_each_chunk(n, [&](int64_t j0, int64_t count) {
      T rounded[kConvertChunk];
      store_rounded(v + j0, rounded, count);
    });
  }
}

}  // namespace fusekit::detail
