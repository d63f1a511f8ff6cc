// LayerNorm's statistics policies for finish_row (norm_kernel.cuh): how a row's mean and centred
// squares are reduced on the registers path (one reduction of (sum, m2) pairs over the row's tree,
// or two) and on the cluster path (each block's slice centred on its own mean, combined in one
// exchange). Kept apart from the kernels so that the reduction orders, which decide the bits,
// can be read in one place.
#pragma once

#include "gpu/common/reduce.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

// LayerNorm's statistics. By default (the registers path) the row's mean comes from one reduction
// and its squares, centred on that mean, from a second. A policy with kUsed (SliceMoments: the
// cluster path, whose every reduction is an exchange between blocks) instead has each slice of the
// row centre its squares on its own mean, slice_centre, so that both sums are block-local
// (slice_total(v, k)), and combine(slice_sum, slice_squares, &mean, &total) gives the row's mean
// and centred squares from every slice's pair in one exchange.
struct NoSliceMoments {
  static constexpr bool kUsed = false;
  static constexpr bool kTree = false;
  static constexpr bool kShifted = false;
};

template <class SliceTotal, class Combine>
struct SliceMoments {
  static constexpr bool kUsed = true;
  static constexpr bool kTree = false;
  static constexpr bool kShifted = false;
  int slice_elems;  // elements of the row in this block's slice
  SliceTotal slice_total;
  Combine combine;
};

// The registers path's for rows of a power-of-two number of whole groups (norm_registers_kernel
// says which kernels take them): each group's sum and squares about its mean (two passes over
// registers), merged over the row's tree in one reduction, `reduce(v, groups, inv_n)`
// (row_moments: the thread's merged groups in, the row's out), where the default takes two, the
// mean's and then the squares' about it: one barrier and one chain of shuffles fewer, which is
// what a short call waits on. Other rows take the default: their trees have nodes of unequal
// counts, whose merges would each need a division.
template <class ReduceMoments, bool kEmpty>
struct TreeMoments {
  static constexpr bool kUsed = false;
  static constexpr bool kTree = true;
  static constexpr bool kShifted = false;
  static constexpr bool kEmptyNodes = kEmpty;  // row_moments' (exact rows have none)
  int groups;    // the row's, a power of two
  int tpr_log2;  // log2 of the row's threads
  ReduceMoments reduce;
};

// The registers path's for LayerNorm's 16-bit outputs (the fused add's too) on rows that the
// default would reduce twice (norm_registers_kernel says which): the row's sums of h - K and of
// (h - K)^2 in one reduction of plain sums, `reduce(s, q)` (row_sum_pair), K the mean of the row's
// first min(G, N) values of h, which every thread forms the same way; mean = K + s / n, var = q / n
// - (s / n)^2. No merges, so no counts, whatever the row's last slot holds: one barrier and one
// chain of shuffles where the default waits on two. The shift bounds the cancellation: (K -
// mean)^2 <= (N / G) var (Cauchy-Schwarz over the first group), so var loses at most about (N / G)
// log2(N) 2^-24 of itself, in a row whose spread lies in its first group (1-2e-4 of the rstd at
// N = 5120-16384 in a float32 model, bench/NOTES.md): inside a 16-bit output's rounding, not a
// float32 one's, so float32 outputs keep the default.
// `shift` is the row's K, set by the kernel that loads the row (row_shift, norm_group_io.cuh),
// whose loads it issues ahead of the row's: every sum waits on it. The fused add's in-place form
// overwrites the residual that every thread reads for it, so finish_row stores the row's first
// group of residual_out after the reduction.
template <class ReducePair>
struct ShiftedMoments {
  static constexpr bool kUsed = false;
  static constexpr bool kTree = false;
  static constexpr bool kShifted = true;
  ReducePair reduce;
  float shift = 0.0f;
};

// The mean that a slice of `elems` elements summing to `sum` centres its squares on; every block
// computes each slice's the same way (hence the same bits).
FUSEKIT_DEVICE float slice_centre(float sum, int elems) {
  return elems > 0 ? sum / static_cast<float>(elems) : 0.0f;
}

}  // namespace fusekit::gpu
