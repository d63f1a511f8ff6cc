// Sums across the threads that share a row, for any warp size.
//
// A row is handled by `threads_per_row` consecutive threads of a block, a power of two. The sum
// combines thread indices from the highest bit to the lowest: warps first (through shared
// memory), then lanes (xor shuffles, which leave the bitwise-same total in every lane). Because
// thread t holds groups t, t + T, t + 2T, ... of its row, that is the same tree over the row's
// groups, highest index bit first, whatever T is (see norm_kernel.cuh). Results are deterministic
// and independent of how many rows a launch holds. The warp size is a template parameter (32 on NVIDIA and AMD RDNA, 64 on AMD CDNA).
#pragma once

#include "gpu/platform.h"

namespace fusekit::gpu {

// Folds v[0..2 * kHalf) onto v[0] as a tree that combines indices from the highest bit down:
// v[i] += v[i + kHalf] for every i < kHalf, then the same on the first half. Template recursion
// keeps every index a compile-time constant, so the array stays in registers.
template <int kHalf, int kSize>
FUSEKIT_DEVICE void fold_high_first(float (&v)[kSize]) {
  if constexpr (kHalf > 0) {
#pragma unroll
    for (int i = 0; i < kHalf; ++i) v[i] += v[i + kHalf];
    fold_high_first<kHalf / 2>(v);
  }
}

// Sum of v[0..kCount) by fold_high_first. A count that is not a power of two is padded with
// zeros to the next one, and the zeros are added, not skipped, as the empty slots of a wider
// layout are: the same operations, so the same bits (x + 0 is not x for x = -0).
template <int kCount>
FUSEKIT_DEVICE float tree_sum(float (&v)[kCount]) {
  if constexpr ((kCount & (kCount - 1)) == 0) {
    fold_high_first<kCount / 2>(v);
    return v[0];
  } else {
    static_assert(kCount < 16, "tree_sum: pad up to 16 slots");
    constexpr int kPadded = kCount < 4 ? 4 : kCount < 8 ? 8 : 16;
    float w[kPadded];
#pragma unroll
    for (int i = 0; i < kPadded; ++i) w[i] = i < kCount ? v[i] : 0.0f;
    fold_high_first<kPadded / 2>(w);
    return w[0];
  }
}

// Butterfly over groups of `lanes` lanes (a power of two <= kWarp), widest exchange first: lanes
// whose indices differ in the highest bit combine first, then the next bit, down to neighbours.
template <int kWarp>
FUSEKIT_DEVICE float warp_sum(float v, int lanes) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    if (offset < lanes) v += shfl_xor<kWarp>(v, offset);
  }
  return v;
}

// The tree sum of `count` per-warp partials (a power of two, 2 <= count <= kCount) that lie
// kWarp floats apart from `p`. Only the partials that exist are read; a tree over them gives the
// same bits as one over kCount slots padded with zeros.
template <int kWarp, int kCount>
FUSEKIT_DEVICE float sum_warp_partials(const float* p, int count) {
  if constexpr (kCount > 2) {
    if (count < kCount) return sum_warp_partials<kWarp, kCount / 2>(p, count);
  }
  float w[kCount];
#pragma unroll
  for (int i = 0; i < kCount; ++i) w[i] = p[i * kWarp];
  return tree_sum(w);
}

// The sum of `v` over the `threads_per_row` threads of each row (a power of two), as a tree that
// combines thread indices from the highest bit down: across warps first (through `scratch`, one
// float per thread of the block), then across the lanes of a warp. Every thread gets the total.
// `scratch` must not be in use by another reduction that can still be reading it (callers
// alternate buffers). Every thread of the block calls this.
template <int kWarp, int kMaxWarpsPerRow>
FUSEKIT_DEVICE float row_sum(float v, int threads_per_row, float* scratch) {
  if (threads_per_row > kWarp) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    const int lane = static_cast<int>(threadIdx.x) % kWarp;
    const int row_first_thread = static_cast<int>(threadIdx.x) & ~(threads_per_row - 1);
    v = sum_warp_partials<kWarp, kMaxWarpsPerRow>(scratch + row_first_thread + lane,
                                                  threads_per_row / kWarp);
  }
  return warp_sum<kWarp>(v, threads_per_row < kWarp ? threads_per_row : kWarp);
}

// max(a, b) where NaN wins: with no NaN present the maximum of a set is the same bits in any
// order, so it can be combined in whatever order a reduction likes.
struct NanMax {
  FUSEKIT_DEVICE float operator()(float a, float b) const { return (b > a || b != b) ? b : a; }
};

// `combine` (commutative and associative, e.g. NanMax) of `v` over the `threads_per_row` threads
// of each row (a power of two): lanes by xor shuffles, then the row's warps through `scratch`
// (one float per thread of the block). Every thread of the row gets the result. `scratch` must
// not be in use by another reduction that can still be reading it. Every thread of the block
// calls this.
template <int kWarp, class Combine>
FUSEKIT_DEVICE float row_reduce(float v, int threads_per_row, float* scratch,
                                const Combine& combine) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    if (offset < threads_per_row) v = combine(v, shfl_xor<kWarp>(v, offset));
  }
  if (threads_per_row > kWarp) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    const int row_first_thread = static_cast<int>(threadIdx.x) & ~(threads_per_row - 1);
    v = scratch[row_first_thread];
    for (int w = kWarp; w < threads_per_row; w += kWarp) v = combine(v, scratch[row_first_thread + w]);
  }
  return v;
}

// The maximum of `v` over the whole block under `combine(a, b)` (commutative and associative,
// e.g. a NaN-propagating max, which gives the same bits in any order): lanes by xor shuffles,
// then warps through `scratch` (one float per warp, at most kMaxWarps). Every thread of the block
// calls this and gets the result; `scratch` may be reused after it returns.
template <int kWarp, int kMaxWarps, class Combine>
FUSEKIT_DEVICE float block_reduce(float v, float* scratch, const Combine& combine) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = combine(v, shfl_xor<kWarp>(v, offset));
  const int warps = static_cast<int>(blockDim.x) / kWarp;
  if (warps > 1) {
    const int warp = static_cast<int>(threadIdx.x) / kWarp;
    if (static_cast<int>(threadIdx.x) % kWarp == 0) scratch[warp] = v;
    __syncthreads();
    v = scratch[0];
    for (int w = 1; w < warps && w < kMaxWarps; ++w) v = combine(v, scratch[w]);
    __syncthreads();  // every thread has read scratch before anyone reuses it
  }
  return v;
}

}  // namespace fusekit::gpu
