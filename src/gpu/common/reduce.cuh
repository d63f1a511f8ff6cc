// Sums (and LayerNorm's moments: row_moments) across the threads that share a row, for any warp
// size.
//
// A row is handled by `threads_per_row` consecutive threads of a block, a power of two. The sum
// combines thread indices from the highest bit to the lowest: warps first (through shared
// memory), then lanes (xor shuffles, which leave the bitwise-same total in every lane). Because
// thread t holds groups t, t + T, t + 2T, ... of its row, that is the same tree over the row's
// groups, highest index bit first, whatever T is (see norm_kernel.cuh). Results are deterministic
// and independent of how many rows a launch holds; a row's threads may also lie in several blocks
// of a cluster (ClusterGather), with the same tree. The warp size is a template parameter (32 on
// NVIDIA and AMD RDNA, 64 on AMD CDNA).
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
// Over a whole warp the steps are unconditional: no step's predicate to compute, which the
// compiler otherwise may place on the uniform datapath, a compare and a predicate copy a step.
template <int kWarp>
FUSEKIT_DEVICE float warp_sum(float v, int lanes) {
  if (lanes >= kWarp) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v += shfl_xor<kWarp>(v, offset);
    return v;
  }
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    if (offset < lanes) v += shfl_xor<kWarp>(v, offset);
  }
  return v;
}

// How the threads of a row hand their values to the fold that follows (row_sum, row_sum_max,
// row_moments, row_magnitude_max): each thread's value lands in slot `thread` of the row's
// scratch, and once the publisher returns every slot of the row is readable by every thread of
// the block.
// BlockPublish is the one-block row's: a store and the block barrier. A row split over a cluster's
// blocks takes ClusterGather (below) instead, and then folds exactly what one block would have.
struct BlockPublish {
  FUSEKIT_DEVICE void operator()(float* s, float v) const {
    s[threadIdx.x] = v;
    __syncthreads();
  }
  FUSEKIT_DEVICE void operator()(float* s0, float v0, float* s1, float v1) const {
    s0[threadIdx.x] = v0;
    s1[threadIdx.x] = v1;
    __syncthreads();
  }
};

// A row whose threads lie in the `blocks` blocks of a cluster, thread `slot` of the row in this
// block: every thread sends its value into its slot of every block's scratch (mailbox_send,
// platform.h), and each block waits on its own `box` until the whole row's values have arrived,
// so each block then holds the scratch a one-block row would have, and folds it to the same
// bits. The block barrier after the wait publishes, as BlockPublish's does, anything the block
// stored to shared memory before the reduction. One box per reduction: each completes its phase
// 0 once (the caller's blocks reduce one row each). The box must have been initialized and
// published before a cluster barrier.
struct ClusterGather {
  ClusterMailbox* box;
  int slot;
  int blocks;
  FUSEKIT_DEVICE void send(float* s, float v) const {
    for (int b = 0; b < blocks; ++b) mailbox_send(s + slot, box, static_cast<unsigned>(b), v);
  }
  FUSEKIT_DEVICE void finish(int values) const {
    if (threadIdx.x == 0) {
      mailbox_expect(box, static_cast<unsigned>(values * blocks) * blockDim.x *
                              unsigned{sizeof(float)});
    }
    mailbox_wait(box, 0);
    __syncthreads();
  }
  FUSEKIT_DEVICE void operator()(float* s, float v) const {
    send(s, v);
    finish(1);
  }
  FUSEKIT_DEVICE void operator()(float* s0, float v0, float* s1, float v1) const {
    send(s0, v0);
    send(s1, v1);
    finish(2);
  }
  // A pair a thread, in one 8-byte store a block (row_sum_pair).
  FUSEKIT_DEVICE void operator()(float2* s, float2 v) const {
    for (int b = 0; b < blocks; ++b) mailbox_send(s + slot, box, static_cast<unsigned>(b), v);
    finish(2);
  }
};

// `fold(w)` of the `count` per-warp partials (a power of two, 2 <= count <= kCount) that lie
// kWarp slots apart from `p`, w an array of exactly `count` slots (floats, or row_sum_pair's
// pairs): every partial is read at once (independent loads), and only those that exist.
template <int kWarp, int kCount, typename T, class Fold>
FUSEKIT_DEVICE auto fold_warp_partials(const T* p, int count, const Fold& fold) {
  if constexpr (kCount > 2) {
    if (count < kCount) return fold_warp_partials<kWarp, kCount / 2>(p, count, fold);
  }
  T w[kCount];
#pragma unroll
  for (int i = 0; i < kCount; ++i) w[i] = p[i * kWarp];
  return fold(w);
}

// The tree sum of `count` per-warp partials (fold_warp_partials); a tree over the partials that
// exist gives the same bits as one over kCount slots padded with zeros.
template <int kWarp, int kCount>
FUSEKIT_DEVICE float sum_warp_partials(const float* p, int count) {
  return fold_warp_partials<kWarp, kCount>(p, count, [](auto& w) { return tree_sum(w); });
}

// Rows of at least this many warps in one block fold their sums once (row_sum): each warp
// folding every slot of the row itself reads the whole scratch, warps x threads floats of shared
// memory a row, 256 wavefronts at 512 threads, which queue behind one another on the SM's shared
// memory; folded once, rms_norm [2048, 16384] bf16 took 0.98x the time on an H100 (bench/
// NOTES.md, "Norm v66"). Below it the reads are fewer (64 wavefronts at 256 threads) and every
// warp folds as before; so do the blocks of a row split over a cluster (a few warps each, whose
// reads are few), where the second barrier cost more than the reads it saves: split one-row
// calls at N = 8192 and 16384 replayed 0.03-0.06 us slower with it.
constexpr int kFoldOnceWarps = 16;

// The sum of `v` over the `threads_per_row` threads of each row (a power of two), as a tree that
// combines thread indices from the highest bit down: across warps first (through `scratch`, one
// float per thread of the block), then across the lanes of a warp. Every thread gets the total.
// Rows of kFoldOnceWarps warps or more that a block holds whole fold once, in the row's first
// warp, which leaves the total (the same bits in every lane) in the row's first slot for the
// others past a second barrier. `scratch` must not be in use by another reduction that can
// still be reading it (callers alternate buffers). Every thread of the block calls this.
template <int kWarp, int kMaxWarpsPerRow, class Publish = BlockPublish>
FUSEKIT_DEVICE float row_sum(float v, int threads_per_row, float* scratch,
                             const Publish& publish = {}) {
  if (threads_per_row > kWarp) {
    publish(scratch, v);
    const int lane = static_cast<int>(threadIdx.x) % kWarp;
    const int row_first_thread = static_cast<int>(threadIdx.x) & ~(threads_per_row - 1);
    const int warps = threads_per_row / kWarp;
    auto fold = [&] {
      return warp_sum<kWarp>(
          sum_warp_partials<kWarp, kMaxWarpsPerRow>(scratch + row_first_thread + lane, warps),
          kWarp);
    };
    if (kMaxWarpsPerRow >= kFoldOnceWarps && warps >= kFoldOnceWarps &&
        threads_per_row <= static_cast<int>(blockDim.x)) {  // uniform
      if (static_cast<int>(threadIdx.x) - row_first_thread < kWarp) {
        const float total = fold();
        // Lane 0 read this slot above; the warp's other lanes read none of it.
        if (lane == 0) scratch[row_first_thread] = total;
      }
      __syncthreads();
      return scratch[row_first_thread];
    }
    return fold();
  }
  return warp_sum<kWarp>(v, threads_per_row < kWarp ? threads_per_row : kWarp);
}

// Two sums at once (LayerNorm's shifted moments, norm_moments.cuh): row_sum of `a` and of `b`,
// each folded in row_sum's order (so each is row_sum's bits), behind one publish and one barrier
// where row_sum twice would wait on two; rows of kFoldOnceWarps warps fold once, as row_sum's.
// Scratch as row_sum's, one buffer per value; or one buffer of pairs (the overload below).
struct SumPair {
  float a;
  float b;
};

template <int kWarp, int kMaxWarpsPerRow, class Publish = BlockPublish>
FUSEKIT_DEVICE SumPair row_sum_pair(float a, float b, int threads_per_row, float* scratch_a,
                                    float* scratch_b, const Publish& publish = {}) {
  if (threads_per_row > kWarp) {
    publish(scratch_a, a, scratch_b, b);
    const int lane = static_cast<int>(threadIdx.x) % kWarp;
    const int row_first_thread = static_cast<int>(threadIdx.x) & ~(threads_per_row - 1);
    const int warps = threads_per_row / kWarp;
    auto fold = [&]() -> SumPair {
      const float pa = sum_warp_partials<kWarp, kMaxWarpsPerRow>(
          scratch_a + row_first_thread + lane, warps);
      const float pb = sum_warp_partials<kWarp, kMaxWarpsPerRow>(
          scratch_b + row_first_thread + lane, warps);
      return {warp_sum<kWarp>(pa, kWarp), warp_sum<kWarp>(pb, kWarp)};
    };
    // Rows of kFoldOnceWarps warps a block holds whole fold once, as row_sum's (the same folds in
    // one warp, so the same bits): with every warp folding, each of a 512-thread row's threads
    // reads 32 partials from shared memory, twice what row_sum's fold-once rows leave there.
    if (kMaxWarpsPerRow >= kFoldOnceWarps && warps >= kFoldOnceWarps &&
        threads_per_row <= static_cast<int>(blockDim.x)) {  // uniform
      if (static_cast<int>(threadIdx.x) - row_first_thread < kWarp) {
        const SumPair total = fold();
        // Lane 0 read these slots above; the warp's other lanes read none of them.
        if (lane == 0) {
          scratch_a[row_first_thread] = total.a;
          scratch_b[row_first_thread] = total.b;
        }
      }
      __syncthreads();
      return {scratch_a[row_first_thread], scratch_b[row_first_thread]};
    }
    return fold();
  }
  const int lanes = threads_per_row < kWarp ? threads_per_row : kWarp;
  return {warp_sum<kWarp>(a, lanes), warp_sum<kWarp>(b, lanes)};
}

// row_sum_pair with one buffer of (a, b) pairs, a thread's in one 8-byte slot (8-byte aligned),
// for rows split over a cluster (`publish` a ClusterGather): a thread sends its pair in one store
// a block, where two buffers take two, and each partial is read in one load. The same sums in
// the same order, so the same bits as the two buffers'.
template <int kWarp, int kMaxWarpsPerRow, class Publish>
FUSEKIT_DEVICE SumPair row_sum_pair(float a, float b, int threads_per_row, float2* pairs,
                                    const Publish& publish) {
  if (threads_per_row > kWarp) {
    publish(pairs, make_float2(a, b));
    const int column = (static_cast<int>(threadIdx.x) & ~(threads_per_row - 1)) +
                       static_cast<int>(threadIdx.x) % kWarp;
    const SumPair partials = fold_warp_partials<kWarp, kMaxWarpsPerRow>(
        pairs + column, threads_per_row / kWarp, [](auto& w) {
          constexpr int kCount = sizeof(w) / sizeof(w[0]);
          float wa[kCount], wb[kCount];
#pragma unroll
          for (int i = 0; i < kCount; ++i) {
            wa[i] = w[i].x;
            wb[i] = w[i].y;
          }
          return SumPair{tree_sum(wa), tree_sum(wb)};
        });
    return {warp_sum<kWarp>(partials.a, kWarp), warp_sum<kWarp>(partials.b, kWarp)};
  }
  const int lanes = threads_per_row < kWarp ? threads_per_row : kWarp;
  return {warp_sum<kWarp>(a, lanes), warp_sum<kWarp>(b, lanes)};
}

// The sum of a set of values and the sum of their squared deviations from its mean (m2).
struct SumM2 {
  float sum;
  float m2;
};

// Two disjoint sets merged, of `count` values each (Chan, Golub and LeVeque's pairwise update):
// sum = sum_a + sum_b, m2 = m2_a + m2_b + d^2 / (2 count) with d = sum_b - sum_a (the means' gap
// is d / count); inv_two_count = 1 / (2 count), a power of two. Symmetric in a and b bit for bit
// (-d * inv is -(d * inv) exactly), so both lanes of a butterfly get the same result; the
// roundings are explicit, so that no kernel's compiler contracts them differently. d * inv first:
// the term overflows only where m2 itself would.
FUSEKIT_DEVICE SumM2 merge_equal_counts(const SumM2& a, const SumM2& b, float inv_two_count) {
  const float d = b.sum - a.sum;
  return {a.sum + b.sum, fmaf(d, mul_unfused(d, inv_two_count), a.m2 + b.m2)};
}

// log2 of a power of two, at compile time where v is known.
__host__ __device__ constexpr int log2_of_power_of_two(int v) {
  return v <= 1 ? 0 : 1 + log2_of_power_of_two(v / 2);
}

// floor(log2(v)) for v >= 1, at run time.
FUSEKIT_DEVICE int floor_log2(int v) { return 31 - __clz(v); }

// 2^k as a float, for -126 <= k <= 127: exact, from the exponent bits.
FUSEKIT_DEVICE float exp2_int(int k) {
  return __uint_as_float(static_cast<uint32_t>(127 + k) << 23);
}

// The moments of a row of n = groups x G values (groups a power of two), combined over the same
// tree as row_sum's: group indices from the highest bit down. Merging the two nodes that differ in
// index bit b joins two sets of n / 2^(b+1) values each, or, where 2^b >= groups, a set with an
// empty one (the node past the row), which leaves the set as it is. So the count of every merge
// follows from b alone, the same for any thread count, and the result is that of one tree over
// the row: bitwise the same whatever the launch shape, as row_sum's. Its sum is row_sum's total,
// bit for bit, and m2 the sum of squares about the mean, without a second pass over the row: one
// reduction (of two values) where LayerNorm took two. inv_n = 1 / n (exact: n is a power of two);
// a merge at bit b takes inv_two_count = 2^b / n.
//
// kEmptyNodes: whether any node can lie past the row (threads x slots > groups); without, the
// tests for it are left out.
//
// fold_moments_high_first: the thread's slots v[0..kCount), slot i holding index first + i * stride
// (stride a power of two, stride_log2 its log2), combined onto v[0].
template <int kHalf, bool kEmptyNodes, int kCount>
FUSEKIT_DEVICE void fold_moments_high_first(SumM2 (&v)[kCount], int stride, int stride_log2,
                                            int groups, float inv_n) {
  if constexpr (kHalf > 0) {
    constexpr int kHalfLog2 = log2_of_power_of_two(kHalf);
    static_assert((1 << kHalfLog2) == kHalf, "fold_moments_high_first: a power of two");
    if (!kEmptyNodes || kHalf * stride < groups) {  // uniform
      const float inv_two_count = inv_n * exp2_int(stride_log2 + kHalfLog2);
#pragma unroll
      for (int i = 0; i < kHalf; ++i) v[i] = merge_equal_counts(v[i], v[i + kHalf], inv_two_count);
    }
    fold_moments_high_first<kHalf / 2, kEmptyNodes>(v, stride, stride_log2, groups, inv_n);
  }
}

// The moments over the `count` warps of a row (a power of two, 2 <= count <= kCount), each warp's
// value for this lane kWarp floats apart in `sum` and `m2`.
template <int kWarp, bool kEmptyNodes, int kCount>
FUSEKIT_DEVICE SumM2 fold_warp_moments(const float* sum, const float* m2, int count, int groups,
                                       float inv_n) {
  if constexpr (kCount > 2) {
    if (count < kCount) {
      return fold_warp_moments<kWarp, kEmptyNodes, kCount / 2>(sum, m2, count, groups, inv_n);
    }
  }
  SumM2 w[kCount];
#pragma unroll
  for (int i = 0; i < kCount; ++i) w[i] = {sum[i * kWarp], m2[i * kWarp]};
  fold_moments_high_first<kCount / 2, kEmptyNodes>(w, kWarp, log2_of_power_of_two(kWarp), groups,
                                                   inv_n);
  return w[0];
}

// row_sum for moments (above): v is this thread's, its groups already merged; `groups` is the
// row's (a power of two). Every thread of the row gets the row's. Scratch as row_sum's, one
// buffer per value.
template <int kWarp, int kMaxWarpsPerRow, bool kEmptyNodes, class Publish = BlockPublish>
FUSEKIT_DEVICE SumM2 row_moments(SumM2 v, int threads_per_row, int groups, float inv_n,
                                 float* scratch_sum, float* scratch_m2,
                                 const Publish& publish = {}) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  if (threads_per_row > kWarp) {
    publish(scratch_sum, v.sum, scratch_m2, v.m2);
    const int column = (static_cast<int>(threadIdx.x) & ~(threads_per_row - 1)) + lane;
    v = fold_warp_moments<kWarp, kEmptyNodes, kMaxWarpsPerRow>(
        scratch_sum + column, scratch_m2 + column, threads_per_row / kWarp, groups, inv_n);
  }
  const int lanes = threads_per_row < kWarp ? threads_per_row : kWarp;
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    if (offset < lanes) {
      const SumM2 other = {shfl_xor<kWarp>(v.sum, offset), shfl_xor<kWarp>(v.m2, offset)};
      // Where the higher node is past the row, the lower one's set, as it is.
      if (kEmptyNodes && offset >= groups) {
        if (lane & offset) v = other;
      } else {
        v = merge_equal_counts(v, other, inv_n * static_cast<float>(offset));
      }
    }
  }
  return v;
}

// max(a, b) where NaN wins (which NaN is unspecified: the fp8 scales made from it canonicalize
// NaN): with no NaN present the maximum of a set is the same bits in any order, so it can be
// combined in whatever order a reduction likes. core/host_device.h's max_propagating_nan: one
// instruction on sm_80+ (FMNMX.NAN) where the compare-and-select form took three, at each step of
// a row's max reduction (its shuffles and its per-warp partials).
struct NanMax {
  FUSEKIT_DEVICE float operator()(float a, float b) const {
    return detail::max_propagating_nan(a, b);
  }
};

// The NanMax of `count` per-warp partials (a power of two, 2 <= count <= kCount) that lie kWarp
// floats apart from `p`, read four at a time (fold_warp_partials). One at a time, a loop over a
// runtime count kept the row's division and rsqrt behind a chain of dependent shared loads; all
// at once, the partials of sixteen warps beside the sums' took the fused add's four-group fp8
// kernels from 80 to 96 registers (ptxas; bench/NOTES.md, "Norm v34").
template <int kWarp, int kCount>
FUSEKIT_DEVICE float max_warp_partials(const float* p, int count) {
  constexpr int kChunk = kCount < 4 ? kCount : 4;
  auto max_of = [](auto& w) {
    float r = w[0];
#pragma unroll
    for (int i = 1; i < static_cast<int>(sizeof(w) / sizeof(w[0])); ++i) r = NanMax{}(r, w[i]);
    return r;
  };
  float m = fold_warp_partials<kWarp, kChunk>(p, count < kChunk ? count : kChunk, max_of);
  for (int first = kChunk; first < count; first += kChunk) {
    m = NanMax{}(m, fold_warp_partials<kWarp, kChunk>(p + first * kWarp, kChunk, max_of));
  }
  return m;
}

// The NanMax of magnitudes: values of +0 or more, or NaN (a row's max|y| and its partials, which
// start from 0 and take |y|). Read as unsigned integers, such floats order as their values, and
// every NaN (of either sign) lies above +inf, so the integer maximum is the NanMax: the same
// maximum, or a NaN where any value is one (which NaN is unspecified, as with NanMax; the fp8
// scales made from it canonicalize NaN). Over groups of `lanes` lanes, every lane getting its
// group's; over a whole warp one instruction on sm_80+ (warp_max_u32) where a float max takes a
// shuffle and a max at each of five steps.
template <int kWarp>
FUSEKIT_DEVICE float warp_magnitude_max(float v, int lanes = kWarp) {
  return __uint_as_float(warp_max_u32<kWarp>(__float_as_uint(v), lanes));
}

// The NanMax of magnitudes over each row's `threads_per_row` threads (a power of two) once each
// warp's share is in `warp_max` (warp_magnitude_max over min(threads_per_row, kWarp) lanes) and
// `slots` holds every thread's warp_max from the same publish (one float per thread of the row,
// from the row's first thread on): lane l of each warp reads warp l's (its first lane's) slot,
// and one more warp maximum combines the row's warps. Every thread of the row gets the result.
template <int kWarp>
FUSEKIT_DEVICE float row_magnitude_max_of_warps(float warp_max, const float* slots,
                                                int threads_per_row) {
  if (threads_per_row <= kWarp) return warp_max;
  const int warps = threads_per_row / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  return warp_magnitude_max<kWarp>(slots[(lane & (warps - 1)) * kWarp]);
}

// How a row's NanMax of magnitudes is reduced (row_sum_max, row_magnitude_max):
//   kCompact: each warp's maximum first, in one integer instruction (warp_magnitude_max), so that
//     the row's warps leave one value each to read after the barrier: the fewest instructions,
//     for the kernels of a runtime thread count (the large batches'), where the fp8 forms are
//     bound by their issue rate.
//   kShuffles: xor shuffles, the row's warps read by every thread beside the sum's: the kernels
//     of a row's thread count fixed at compile time, whose steps unroll and whose one-row calls
//     measured 1-9% slower in the compact form (bench/NOTES.md, "fp8 row max as an integer max").
// Both give the same bits.
enum class RowMaxForm { kCompact, kShuffles };

// A row's sum and, taken beside it, a NaN-propagating max (RMSNorm's fp8 output with a dynamic
// scale: the sum of squares and max|h * w|, norm_kernel.cuh).
struct SumMax {
  float sum;
  float max;
};

// row_sum of `v` and, in the same pass, the NanMax of magnitudes `m` (warp_magnitude_max) over
// the `threads_per_row` threads of each row, in form kMaxForm: one barrier for both. The sum is
// row_sum's, bit for bit (the same tree); the max is the same bits in any order. Scratch as
// row_sum's, one buffer per value.
template <int kWarp, int kMaxWarpsPerRow, RowMaxForm kMaxForm, class Publish = BlockPublish>
FUSEKIT_DEVICE SumMax row_sum_max(float v, float m, int threads_per_row, float* scratch_sum,
                                  float* scratch_max, const Publish& publish = {}) {
  constexpr bool kCompact = kMaxForm == RowMaxForm::kCompact;
  const int lanes = threads_per_row < kWarp ? threads_per_row : kWarp;
  if constexpr (kCompact) m = warp_magnitude_max<kWarp>(m, lanes);
  if (threads_per_row > kWarp) {
    publish(scratch_sum, v, scratch_max, m);
    const int lane = static_cast<int>(threadIdx.x) % kWarp;
    const int row_first_thread = static_cast<int>(threadIdx.x) & ~(threads_per_row - 1);
    const int warps = threads_per_row / kWarp;
    v = sum_warp_partials<kWarp, kMaxWarpsPerRow>(scratch_sum + row_first_thread + lane, warps);
    if constexpr (kCompact) {
      m = row_magnitude_max_of_warps<kWarp>(m, scratch_max + row_first_thread, threads_per_row);
    } else {
      m = max_warp_partials<kWarp, kMaxWarpsPerRow>(scratch_max + row_first_thread + lane, warps);
    }
  }
  v = warp_sum<kWarp>(v, lanes);
  if constexpr (!kCompact) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      if (offset < lanes) m = NanMax{}(m, shfl_xor<kWarp>(m, offset));
    }
  }
  return {v, m};
}

// The NanMax of magnitudes `v` (warp_magnitude_max) over the `threads_per_row` threads of each
// row (a power of two), in form kMaxForm: the warp's lanes, then the row's warps through
// `scratch` (one float per thread of the block). Every thread of the row gets the result.
// `scratch` must not be in use by another reduction that can still be reading it. Every thread
// of the block calls this.
template <int kWarp, RowMaxForm kMaxForm, class Publish = BlockPublish>
FUSEKIT_DEVICE float row_magnitude_max(float v, int threads_per_row, float* scratch,
                                       const Publish& publish = {}) {
  constexpr bool kCompact = kMaxForm == RowMaxForm::kCompact;
  if constexpr (kCompact) {
    v = warp_magnitude_max<kWarp>(v, threads_per_row < kWarp ? threads_per_row : kWarp);
  } else {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      if (offset < threads_per_row) v = NanMax{}(v, shfl_xor<kWarp>(v, offset));
    }
  }
  if (threads_per_row > kWarp) {
    publish(scratch, v);
    const int row_first_thread = static_cast<int>(threadIdx.x) & ~(threads_per_row - 1);
    if constexpr (kCompact) {
      v = row_magnitude_max_of_warps<kWarp>(v, scratch + row_first_thread, threads_per_row);
    } else {
      v = scratch[row_first_thread];
      for (int w = kWarp; w < threads_per_row; w += kWarp) {
        v = NanMax{}(v, scratch[row_first_thread + w]);
      }
    }
  }
  return v;
}

// The NanMax of magnitudes `v` (warp_magnitude_max) over the whole block: a warp maximum, then
// the warps' through `scratch` (one float per warp, at most kMaxWarps <= kWarp), lane w reading
// warp w's. Every thread of the block calls this and gets the result; `scratch` may be reused
// after it returns.
template <int kWarp, int kMaxWarps>
FUSEKIT_DEVICE float block_magnitude_max(float v, float* scratch) {
  static_assert(kMaxWarps <= kWarp, "one warp reads every warp's maximum");
  v = warp_magnitude_max<kWarp>(v);
  const int warps = static_cast<int>(blockDim.x) / kWarp;
  if (warps > 1) {
    const int lane = static_cast<int>(threadIdx.x) % kWarp;
    if (lane == 0) scratch[threadIdx.x / kWarp] = v;
    __syncthreads();
    v = warp_magnitude_max<kWarp>(scratch[lane < warps && lane < kMaxWarps ? lane : 0]);
    __syncthreads();  // every thread has read scratch before anyone reuses it
  }
  return v;
}

// The NaN-propagating max of magnitudes `v` (warp_magnitude_max) over every thread of a
// thread-block cluster of `blocks` blocks (at most kWarp) of `warps` warps each. Each warp's max
// goes straight to every block, with no block reduction first: into `slots` ([blocks * warps]
// floats of the receiver's shared memory, at sender rank * warps + sender warp) by a send counted
// on the receiver's `box` (mailbox_send, platform.h). Each block waits for its box's phase
// `phase`, and a warp max over the slots leaves the cluster's max in every thread. Every thread
// of every block calls this; the boxes must have been initialized and published, and the caller
// keeps a box and its slots unused by others until every peer's sends of this phase have arrived.
template <int kWarp>
FUSEKIT_DEVICE float cluster_nan_max(float v, float* slots, ClusterMailbox* box, int blocks,
                                     unsigned rank, int warps, unsigned phase) {
  v = warp_magnitude_max<kWarp>(v);
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  if (threadIdx.x == 0) mailbox_expect(box, blocks * warps * unsigned{sizeof(float)});
  if (lane < blocks) {
    mailbox_send(&slots[static_cast<int>(rank) * warps + warp], box, static_cast<unsigned>(lane),
                 v);
  }
  mailbox_wait(box, phase);
  v = 0.0f;
  for (int s = lane; s < blocks * warps; s += kWarp) v = NanMax{}(v, slots[s]);
  return warp_magnitude_max<kWarp>(v);
}

}  // namespace fusekit::gpu
