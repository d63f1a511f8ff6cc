// Vectorized, bounds-aware loads and stores of a "group": kGroup consecutive elements of a row.
//
// Kernels assign work in groups whose width depends only on the dtype (16 bytes of x), so the
// split of a row among threads, and with it the reduction order, never depends on alignment. How
// a group is moved is a separate choice, kLoad: kLoad == kGroup when every base pointer and row
// stride is 16-byte aligned (a group is one vector access), 1 when that is not known. Then 16-bit
// elements and fp8 codes move in accesses as wide as each group's address allows, found at run
// time (kAdaptsToAlignment): a group that straddles 16-byte boundaries is read as the aligned
// chunks that hold it, shifted into place, and written in the widest pieces its address allows;
// other groups move one element at a time. The last group of a row may be partial; elements at
// or past n read as 0 and are not written.
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

// Elements [col, col + kGroup) of `row` one at a time; those at or past n become zero.
template <typename T, int kGroup, typename Index>
FUSEKIT_DEVICE Packed<T, kGroup> load_group_elements(const T* row, Index col, Index n) {
  Packed<T, kGroup> v;
#pragma unroll
  for (int e = 0; e < kGroup; ++e) v.elems[e] = col + e < n ? row[col + e] : from_float<T>(0.0f);
  return v;
}

// The first word of a byte string shifted down by `offset` bytes (offset < 4 x kOptions, a
// multiple of sizeof(T)): picked from words[offset / 4] with selects (offset is the same for every
// group of a row, so there is no divergence to save) and joined with the next one.
template <typename T, int kOptions>
FUSEKIT_DEVICE uint32_t shifted_word(const uint32_t* words, int offset) {
  static_assert(sizeof(T) < 4, "elements narrower than a word");
  const int skip = offset / 4;
  uint32_t low = words[0];
  uint32_t high = words[1];
#pragma unroll
  for (int k = 1; k < kOptions; ++k) {
    if (skip == k) {
      low = words[k];
      high = words[k + 1];
    }
  }
  const uint64_t both = (static_cast<uint64_t>(high) << 32) | low;
  return static_cast<uint32_t>(both >> (8 * (offset % 4)));
}

// Whether groups of kGroup T at an address of unknown alignment (kLoad < kGroup) move in the
// widest accesses their address allows, found at run time, rather than one element at a time:
// 16-bit elements in groups of 16 bytes, whose element accesses are 8 requests for half a line
// each (rows so read reached 24-42% of the copy: bench/NOTES.md, "Unaligned rows in aligned
// chunks"), and single bytes (fp8 codes, stored only). Not 4-byte elements, whose element
// accesses already fill whole lines (the choice at run time made float32 rows up to 1.16x
// slower), nor the 8-byte groups of the small-batch act kernels, whose time is their latency
// (silu_and_mul [256, 769] bf16 1.26 -> 2.00 us).
template <typename T, int kGroup>
constexpr bool kAdaptsToAlignment =
    sizeof(T) == 1 || (sizeof(T) == 2 && kGroup * sizeof(T) >= 16);

// A group at an address of unknown alignment (kAdaptsToAlignment). Aligned, it is one vector
// access. Otherwise it is read as the aligned 16-byte chunks that hold it, and shifted: one more
// access than an aligned group. The chunks may reach outside the group, never outside the row: a
// group whose chunks would (a row's first or last), or one that is partial, is read element by
// element.
template <typename T, int kGroup, typename Index>
FUSEKIT_DEVICE Packed<T, kGroup> load_unaligned_group(const T* row, Index col, Index n) {
  constexpr int kBytes = static_cast<int>(sizeof(T)) * kGroup;
  constexpr int kChunk = 16;
  constexpr int kChunkWords = kChunk / 4;
  constexpr int kWords = kBytes / 4;
  static_assert(kAdaptsToAlignment<T, kGroup> && kBytes % kChunk == 0, "16-byte chunks");
  const T* p = row + col;
  const int offset = static_cast<int>(reinterpret_cast<uintptr_t>(p) % kChunk);
  if (col + kGroup <= n) {
    Packed<T, kGroup> v;
    if (offset == 0) {
      v.load(p);
      return v;
    }
    // Pointer arithmetic (not integers): the compiler still knows these are global loads.
    const char* first = reinterpret_cast<const char*>(p) - offset;
    if (first >= reinterpret_cast<const char*>(row) &&
        first + kBytes + kChunk <= reinterpret_cast<const char*>(row + n)) {
      uint32_t words[kWords + kChunkWords];
#pragma unroll
      for (int c = 0; c <= kBytes / kChunk; ++c) {
        Packed<uint32_t, kChunkWords> chunk;
        chunk.load(reinterpret_cast<const uint32_t*>(first + c * kChunk));
#pragma unroll
        for (int w = 0; w < kChunkWords; ++w) words[c * kChunkWords + w] = chunk.words[w];
      }
#pragma unroll
      for (int w = 0; w < kWords; ++w) v.words[w] = shifted_word<T, kChunkWords>(words + w, offset);
      return v;
    }
  }
  return load_group_elements<T, kGroup>(row, col, n);
}

// Loads elements [col, col + kGroup) of `row` in their storage type; elements at or past n become
// zero. Keeping data packed until it is used halves the registers 16-bit rows need.
template <typename T, int kGroup, int kLoad, typename Index>
FUSEKIT_DEVICE Packed<T, kGroup> load_group(const T* row, Index col, Index n) {
  static_assert(kLoad == kGroup || kLoad == 1, "aligned groups, or alignment found at run time");
  if constexpr (kLoad == kGroup) {
    if (col + kGroup <= n) {
      Packed<T, kGroup> v;
      v.load(row + col);
      return v;
    }
    return load_group_elements<T, kGroup>(row, col, n);
  } else if constexpr (kAdaptsToAlignment<T, kGroup>) {
    return load_unaligned_group<T, kGroup>(row, col, n);
  } else {
    return load_group_elements<T, kGroup>(row, col, n);
  }
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

// x + r element by element for two groups of the same 16-bit type, each sum rounded to nearest
// even: round_to<T>(float(x) + float(r)), bit for bit, by the platform's pairwise add
// (platform.h), and still packed: one instruction a pair where the floats' sums take an unpack of
// each input, an add and a pack, and the sum, stored, no unpack and pack again (bench/NOTES.md,
// "The fused add's h by packed adds").
template <typename T, int kCount>
FUSEKIT_DEVICE Packed<T, kCount> pairwise_sum(const Packed<T, kCount>& x,
                                              const Packed<T, kCount>& r) {
  constexpr bool kBf16 = std::is_same_v<T, BFloat16>;
  static_assert((kBf16 || std::is_same_v<T, Half>) && kCount % 2 == 0, "pairs of 16-bit floats");
  Packed<T, kCount> sum;
#pragma unroll
  for (int w = 0; w < kCount / 2; ++w) {
    sum.words[w] = kBf16 ? bf16_pair_sum_bits(x.words[w], r.words[w])
                         : half_pair_sum_bits(x.words[w], r.words[w]);
  }
  return sum;
}

// Loads elements [col, col + kGroup) of `row` as floats; elements at or past n become 0.
template <typename T, int kGroup, int kLoad, typename Index>
FUSEKIT_DEVICE void load_group(const T* row, Index col, Index n, float (&v)[kGroup]) {
  to_floats(load_group<T, kGroup, kLoad>(row, col, n), v);
}

// kSize bytes of p's byte string from byte kOffset (kSize < 4 or kOffset a multiple of 4), as one
// access word. Bytes are read out of p's 32-bit words: had the byte view of the union been read,
// the compiler would keep every byte of p apart, and rebuild the words even for a whole group.
template <int kSize, typename T, int kGroup>
FUSEKIT_DEVICE typename RawBytes<kSize>::type bytes_at(const Packed<T, kGroup>& p, int offset) {
  constexpr int kWords = static_cast<int>(sizeof(p.words) / 4);
  const int w = offset / 4;
  if constexpr (kSize <= 4) {
    uint64_t both = p.words[w];
    if (w + 1 < kWords) both |= static_cast<uint64_t>(p.words[w + 1]) << 32;
    return static_cast<typename RawBytes<kSize>::type>(both >> (8 * (offset % 4)));
  } else {
    Packed<uint32_t, kSize / 4> piece;
#pragma unroll
    for (int k = 0; k < kSize / 4; ++k) piece.words[k] = p.words[w + k];
    return piece.raw[0];
  }
}

template <int kSize, typename T, int kGroup>
FUSEKIT_DEVICE void store_bytes(char* dst, const Packed<T, kGroup>& p, int offset) {
  *reinterpret_cast<typename RawBytes<kSize>::type*>(dst + offset) = bytes_at<kSize>(p, offset);
}

// A whole group to an address of unknown alignment, in the widest pieces that address allows,
// kPiece bytes down to two elements; at a one-element alignment, one element, pairs of elements
// (aligned to two), one element.
template <int kPiece, typename T, int kGroup>
FUSEKIT_DEVICE void store_widest_pieces(char* dst, const Packed<T, kGroup>& p) {
  constexpr int kElem = static_cast<int>(sizeof(T));
  constexpr int kBytes = kElem * kGroup;
  if constexpr (kPiece > kElem) {
    if (reinterpret_cast<uintptr_t>(dst) % kPiece == 0) {
#pragma unroll
      for (int b = 0; b < kBytes; b += kPiece) store_bytes<kPiece>(dst, p, b);
      return;
    }
    store_widest_pieces<kPiece / 2>(dst, p);
  } else {
    store_bytes<kElem>(dst, p, 0);
#pragma unroll
    for (int b = kElem; b + kElem < kBytes; b += 2 * kElem) store_bytes<2 * kElem>(dst, p, b);
    store_bytes<kElem>(dst, p, kBytes - kElem);
  }
}

// A whole group to an address of unknown alignment (kAdaptsToAlignment): one vector access where
// the address allows it, else store_widest_pieces.
template <typename T, int kGroup>
FUSEKIT_DEVICE void store_unaligned_group(T* dst, const Packed<T, kGroup>& p) {
  static_assert(kAdaptsToAlignment<T, kGroup>, "groups that move in accesses of any width");
  constexpr int kBytes = static_cast<int>(sizeof(T)) * kGroup;
  constexpr int kWidest = kBytes < 16 ? kBytes : 16;
  if (reinterpret_cast<uintptr_t>(dst) % kWidest == 0) {
    p.store(dst);
  } else {
    store_widest_pieces<kWidest / 2>(reinterpret_cast<char*>(dst), p);
  }
}

// Stores p to elements [col, col + kGroup) of `row`, skipping those at or past n (kLoad: as in
// load_group).
template <typename T, int kGroup, int kLoad, typename Index>
FUSEKIT_DEVICE void store_packed(T* row, Index col, Index n, const Packed<T, kGroup>& p) {
  static_assert(kLoad == kGroup || kLoad == 1, "aligned groups, or alignment found at run time");
  if (col + kGroup <= n) {
    if constexpr (kLoad == kGroup) {
      p.store(row + col);
      return;
    } else if constexpr (kAdaptsToAlignment<T, kGroup>) {
      store_unaligned_group(row + col, p);
      return;
    }
  }
#pragma unroll
  for (int e = 0; e < kGroup; ++e) {
    if (col + e < n) {
      if constexpr (sizeof(T) == 1) {
        row[col + e] = static_cast<T>(p.words[e / 4] >> (8 * (e % 4)));
      } else {
        row[col + e] = p.elems[e];
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
