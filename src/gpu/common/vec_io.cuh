// Vectorized, bounds-aware loads and stores of a "group": kGroup consecutive elements of a row.
//
// Kernels assign work in groups whose width depends only on the dtype (16 bytes of x), so the
// split of a row among threads, and with it the reduction order, never depends on alignment. How
// a group is moved is a separate choice, kLoad elements per access: 16-byte accesses when the base
// pointers and row strides allow, narrower ones otherwise (an odd offset, an odd row stride). The
// last group of a row may be partial; elements at or past n read as 0 and are not written.
#pragma once

#include <cstdint>
#include <type_traits>

#include "gpu/common/convert.cuh"

namespace fusekit::gpu {

template <int kBytes>
struct RawBytes;
template <>
struct RawBytes<1> {
  using type = uint8_t;
};
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
  using type = Bytes8;  // platform.h
};
template <>
struct RawBytes<16> {
  using type = Bytes16;  // platform.h
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
    uint32_t words[(kBytes + 3) / 4];  // for opaque_register
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

// Loads elements [col, col + kGroup) of `row` in their storage type; elements at or past n become
// zero. Keeping data packed until it is used halves the registers 16-bit rows need.
template <typename T, int kGroup, int kLoad, typename Index>
FUSEKIT_DEVICE Packed<T, kGroup> load_group(const T* row, Index col, Index n) {
  static_assert(kGroup % kLoad == 0, "load width must divide the group");
  Packed<T, kGroup> v;
  if (col + kGroup <= n && kLoad == kGroup) {
    v.load(row + col);
    return v;
  }
#pragma unroll
  for (int s = 0; s < kGroup; s += kLoad) {
    const Index c = col + s;
    if (c + kLoad <= n) {
      Packed<T, kLoad> p;
      p.load(row + c);
#pragma unroll
      for (int e = 0; e < kLoad; ++e) v.elems[s + e] = p.elems[e];
    } else {
#pragma unroll
      for (int e = 0; e < kLoad; ++e) v.elems[s + e] = c + e < n ? row[c + e] : from_float<T>(0.0f);
    }
  }
  return v;
}

// Element e of p as a float. A bfloat16 element is the low or the high half of one of p's 32-bit
// words, and its float is that word shifted or masked: one instruction, where converting the
// 16-bit element takes an extract and a shift (and now and then a register move). The same bits;
// on the normalization's short calls, whose time follows their instruction count, it removed
// about a tenth of the instructions (bench/NOTES.md, "Norm v18").
template <typename T, int kCount>
FUSEKIT_DEVICE float element_float(const Packed<T, kCount>& p, int e) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    const uint32_t word = p.words[e / 2];
    return __uint_as_float(e % 2 == 0 ? word << 16 : word & 0xFFFF0000u);
  } else {
    return to_float(p.elems[e]);
  }
}

template <typename T, int kGroup>
FUSEKIT_DEVICE void to_floats(const Packed<T, kGroup>& p, float (&v)[kGroup]) {
#pragma unroll
  for (int e = 0; e < kGroup; ++e) v[e] = element_float(p, e);
}

// v rounded to T and packed; 16-bit types a pair of elements at a time (platform.h).
template <typename T, int kCount>
FUSEKIT_DEVICE Packed<T, kCount> pack_floats(const float (&v)[kCount]) {
  Packed<T, kCount> p;
  constexpr bool kBf16 = std::is_same_v<T, BFloat16>;
  if constexpr ((kBf16 || std::is_same_v<T, Half>) && kCount % 2 == 0) {
#pragma unroll
    for (int w = 0; w < kCount / 2; ++w) {
      p.words[w] = kBf16 ? floats_to_bf16_pair_bits(v[2 * w], v[2 * w + 1])
                         : floats_to_half_pair_bits(v[2 * w], v[2 * w + 1]);
    }
  } else {
#pragma unroll
    for (int e = 0; e < kCount; ++e) p.elems[e] = from_float<T>(v[e]);
  }
  return p;
}

// Loads elements [col, col + kGroup) of `row` as floats; elements at or past n become 0.
template <typename T, int kGroup, int kLoad, typename Index>
FUSEKIT_DEVICE void load_group(const T* row, Index col, Index n, float (&v)[kGroup]) {
  to_floats(load_group<T, kGroup, kLoad>(row, col, n), v);
}

// Stores p to elements [col, col + kGroup) of `row`, skipping those at or past n, in accesses of
// kLoad elements. Bytes (fp8 codes) are read out of p's 32-bit words: had the byte view of the
// union been read here, the compiler would keep every byte of p apart, and rebuild the words even
// for the whole group's store.
template <typename T, int kGroup, int kLoad, typename Index>
FUSEKIT_DEVICE void store_packed(T* row, Index col, Index n, const Packed<T, kGroup>& p) {
  if (col + kGroup <= n && kLoad == kGroup) {
    p.store(row + col);
    return;
  }
  auto element = [&](int e) -> T {
    if constexpr (sizeof(T) == 1) {
      return static_cast<T>(p.words[e / 4] >> (8 * (e % 4)));
    } else {
      return p.elems[e];
    }
  };
#pragma unroll
  for (int s = 0; s < kGroup; s += kLoad) {
    const Index c = col + s;
    if (c + kLoad <= n) {
      Packed<T, kLoad> q;
#pragma unroll
      for (int e = 0; e < kLoad; ++e) q.elems[e] = element(s + e);
      q.store(row + c);
    } else {
#pragma unroll
      for (int e = 0; e < kLoad; ++e) {
        if (c + e < n) row[c + e] = element(s + e);
      }
    }
  }
}

// Stores v[0..kGroup) to elements [col, col + kGroup) of `row`, skipping those at or past n.
template <typename T, int kGroup, int kLoad, typename Index>
FUSEKIT_DEVICE void store_group(T* row, Index col, Index n, const float (&v)[kGroup]) {
  Packed<T, kGroup> p;
#pragma unroll
  for (int e = 0; e < kGroup; ++e) p.elems[e] = from_float<T>(v[e]);
  store_packed<T, kGroup, kLoad>(row, col, n, p);
}

}  // namespace fusekit::gpu
