// Vectorized, bounds-aware loads and stores of a "group": kGroup consecutive elements of a row.
//
// Kernels assign work in groups whose width depends only on the dtype (16 bytes of x), so the
// split of a row among threads, and with it the reduction order, never depends on alignment. How
// a group is moved is a separate choice, kLoad elements per access: 16-byte accesses when the base
// pointers and row strides allow, narrower ones otherwise (an odd offset, an odd row stride). The
// last group of a row may be partial; elements at or past n read as 0 and are not written.
#pragma once

#include <cstdint>

#include "gpu/common/convert.cuh"

namespace fusekit::gpu {

template <int kBytes>
struct RawBytes;
template <>
struct RawBytes<2> {
  using type = uint16_t;
};
template <>
struct RawBytes<4> {
  using type = uint32_t;
};
template <>
struct RawBytes<8> {
  using type = uint2;
};
template <>
struct RawBytes<16> {
  using type = uint4;
};

// kCount elements of T moved as ceil(bytes / 16) accesses of at most 16 bytes. The address must be
// aligned to min(16, kCount * sizeof(T)).
template <typename T, int kCount>
struct Packed {
  static constexpr int kBytes = static_cast<int>(sizeof(T)) * kCount;
  static constexpr int kAccessBytes = kBytes < 16 ? kBytes : 16;
  static constexpr int kAccesses = kBytes / kAccessBytes;
  using Access = typename RawBytes<kAccessBytes>::type;
  union {
    Access raw[kAccesses];
    T elems[kCount];
  };

  FUSEKIT_DEVICE void load(const T* p) {
    const Access* src = reinterpret_cast<const Access*>(p);
#pragma unroll
    for (int i = 0; i < kAccesses; ++i) raw[i] = src[i];
  }
  FUSEKIT_DEVICE void store(T* p) const {
    Access* dst = reinterpret_cast<Access*>(p);
#pragma unroll
    for (int i = 0; i < kAccesses; ++i) dst[i] = raw[i];
  }
};

// Loads elements [col, col + kGroup) of `row` as floats; elements at or past n become 0.
template <typename T, int kGroup, int kLoad>
FUSEKIT_DEVICE void load_group(const T* row, int64_t col, int64_t n, float (&v)[kGroup]) {
  static_assert(kGroup % kLoad == 0, "load width must divide the group");
#pragma unroll
  for (int s = 0; s < kGroup; s += kLoad) {
    const int64_t c = col + s;
    if (c + kLoad <= n) {
      Packed<T, kLoad> p;
      p.load(row + c);
#pragma unroll
      for (int e = 0; e < kLoad; ++e) v[s + e] = to_float(p.elems[e]);
    } else {
#pragma unroll
      for (int e = 0; e < kLoad; ++e) v[s + e] = c + e < n ? to_float(row[c + e]) : 0.0f;
    }
  }
}

// Stores v[0..kGroup) to elements [col, col + kGroup) of `row`, skipping those at or past n.
template <typename T, int kGroup, int kLoad>
FUSEKIT_DEVICE void store_group(T* row, int64_t col, int64_t n, const float (&v)[kGroup]) {
#pragma unroll
  for (int s = 0; s < kGroup; s += kLoad) {
    const int64_t c = col + s;
    if (c + kLoad <= n) {
      Packed<T, kLoad> p;
#pragma unroll
      for (int e = 0; e < kLoad; ++e) p.elems[e] = from_float<T>(v[s + e]);
      p.store(row + c);
    } else {
#pragma unroll
      for (int e = 0; e < kLoad; ++e) {
        if (c + e < n) row[c + e] = from_float<T>(v[s + e]);
      }
    }
  }
}

}  // namespace fusekit::gpu
