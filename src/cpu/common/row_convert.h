// The CPU backend's conversions between a row's storage dtype and float32.
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
// The ops' loops convert whole rows (a weight once per call), or read and write a row through
// RunReader and RunWriter: fp16 a run of kConvertChunk elements at a time through local float32
// arrays (in L1), other dtypes converted inline where each element is used, as one run of the
// whole row (for_each_run), so that their loops stay as they would be written by hand.
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

// Whether T's conversions are made a run at a time (fp16: calls into row_convert.cc) rather than
// inline, each fused into the loop that uses the value (float32, bf16: a few instructions).
template <typename T>
inline constexpr bool kConvertsInRuns = std::is_same_v<T, HostHalf>;

// Calls run(j0, count) for consecutive runs [j0, j0 + count) covering [0, n): each at most
// kConvertChunk long where any of Ts converts in runs (the local arrays' size), else one run.
template <typename... Ts, typename Run>
void for_each_run(int64_t n, const Run& run) {
  if constexpr ((kConvertsInRuns<Ts> || ...)) {
    for (int64_t j0 = 0; j0 < n; j0 += kConvertChunk) run(j0, std::min(kConvertChunk, n - j0));
  } else if (n > 0) {
    run(0, n);
  }
}

// Run [0, count) of src as float32, reader[k]: fp16 converted into a local array first, other
// dtypes converted where each element is read.
template <typename T>
class RunReader {
 public:
  RunReader(const T* src, int64_t count) : src_(src) {
    if constexpr (kConvertsInRuns<T>) widen_row(src, values_, count);
  }
  float operator[](int64_t k) const {
    if constexpr (kConvertsInRuns<T>) {
      return values_[k];
    } else {
      return to_float(src_[k]);
    }
  }

 private:
  const T* src_;
  float values_[kConvertsInRuns<T> ? kConvertChunk : 1];
};

// Run [0, count) of dst written from float32: set(k, v) for each k, then finish(). fp16 goes
// through a local array that finish() converts; other dtypes are converted and stored in set.
template <typename T>
class RunWriter {
 public:
  RunWriter(T* dst, int64_t count) : dst_(dst), count_(count) {}
  void set(int64_t k, float v) {
    if constexpr (kConvertsInRuns<T>) {
      values_[k] = v;
    } else {
      dst_[k] = from_float<T>(v);
    }
  }
  void finish() {
    if constexpr (kConvertsInRuns<T>) narrow_row(values_, dst_, count_);
  }

 private:
  T* dst_;
  int64_t count_;
  float values_[kConvertsInRuns<T> ? kConvertChunk : 1];
};

// v[j] = to_float(from_float<T>(v[j])): each value rounded to T's precision, kept as a float.
template <typename T>
void round_row(float* v, int64_t n) {
  if constexpr (kConvertsInRuns<T>) {
    for_each_run<T>(n, [&](int64_t j0, int64_t count) {
      T rounded[kConvertChunk];
      narrow_row(v + j0, rounded, count);
      widen_row(rounded, v + j0, count);
    });
  } else {
    for (int64_t j = 0; j < n; ++j) v[j] = to_float(from_float<T>(v[j]));
  }
}

}  // namespace fusekit::detail
