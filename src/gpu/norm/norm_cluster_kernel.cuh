// The cluster path of the norm kernels: rows too long for one block's registers, split over the
// blocks of a thread-block cluster (sm_90+), each holding its slice in registers and finishing it
// as the registers path does (finish_row, norm_kernel.cuh), the partial sums exchanged through
// distributed shared memory; with an fp8 output and a dynamic scale, the row's max|y| too.
#pragma once

#include <cstdint>

#include "gpu/norm/norm_kernel.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

// The cluster path: the cluster_blocks blocks of a cluster (any count up to kMaxClusterBlocks)
// share one row, block r taking the slice that starts at group r * threads * items. Each block
// sums its slice (row_sum) and sends the partial to every block of the cluster (mailbox_send,
// platform.h); each block waits for the cluster's partials in its own mailbox and adds them in
// rank order (the same tree, hence the same bits, in every block). LayerNorm sends two values in
// one exchange: its slice's sum and its squares about the slice's own mean (SliceMoments,
// norm_kernel.cuh), so a row of either kind costs one exchange. RMSNorm's fp8 output with a
// dynamic scale adds a second, of max|y|: every warp sends its maximum to every block, with no
// block reduction first, and each block takes the max of what its mailbox received
// (cluster_nan_max, reduce.cuh, as the gated activations' cluster kernel does). A max gives the
// same bits in any order, so the scale and codes are the registers path's.
//
// The grid is as many clusters as the GPU holds at once (max_resident_clusters), each looping over
// rows cluster, cluster + clusters, ...: a cluster of up to 16 blocks launches only where one GPC
// has that many block slots free together, so one cluster per row left slots idle between rows
// (bench/NOTES.md, "Norm v10").
// Such a grid lets the next one launch only after its last row where it has more rows than SMs
// (NormConfig::trigger_after_writes): launched at its start, the next grid's clusters made back
// to back calls 1.2-1.4x slower at some N (bench/NOTES.md, "Norm v39").
//
// Why mailboxes and not cluster barriers. A cluster barrier's release waits for the block's memory
// operations in flight, and at 16 blocks one cost about a microsecond; every thread reading its
// peers' partials from their shared memory adds one remote request per peer and warp. A mailbox
// costs one asynchronous store per peer and block, and a wait on local shared memory; nothing
// fences, so the next row's slice, loaded before this row's reductions (kPrefetch), stays in
// flight through them (bench/NOTES.md, "Norm v11": N = 262144 at 51-78% of copy -> 88-93%).
//
// Slot reuse. Partials, their mailboxes and the block's scratch alternate between two sets by row
// parity: a peer sends row i + 2's partial only after every block has sent row i + 1's, which a
// block does only after all its threads have read row i's (row_sum's block barrier lies between).
// The maxima likewise: a peer sends row i + 2's only after it has every block's row i + 2 sum,
// which a block sends only after row_sum's barrier of row i + 2, past all its reads of row i's.
// A block exits only after its last row's partials have arrived, so no send is outstanding into
// shared memory that is gone.
template <class K, RowFit kFit, bool kPlain = false>
__global__ void __launch_bounds__(K::kMaxThreads, K::kMinBlocksPerSm)
    norm_cluster_kernel(NormKernelArgs a) {
  if constexpr (!warp_size_compiled<K::kWarp>() || !clusters_compiled()) return stub_launched();
  using TX = typename K::TX;
  using TW = typename K::TW;
  using TR = typename K::TR;
  constexpr int G = K::kGroup;
  constexpr int kItems = K::kMaxItems;
  // Values each block sends per row: RMSNorm its sum of squares; LayerNorm its slice's sum and
  // squares about the slice's mean (SliceMoments, norm_kernel.cuh), in one exchange.
  constexpr int kValues = K::kLayer ? 2 : 1;
  // The next row's slice in registers beside the current one, except where two blocks per SM and
  // two inputs (LayerNorm with the add) leave no registers for it.
  constexpr bool kPrefetch = K::kMinBlocksPerSm == 1 || !K::kAdd;
  // RMSNorm's exact rows take the weight_after_cast branch once per row, as the registers kernels
  // do. Tested per element, the flag put a branch around each element's output in the row's tail
  // (ptxas of CUDA 13, 16 x 512 threads, four groups, bf16: rms_norm 98 branches, 58 with the
  // flag taken once; the fused add 97 -> 58 and 113 -> 101 registers). The outputs are the same
  // bits either way. Elsewhere the per-element flag compiled to selects (LayerNorm, the rows of
  // whole groups: two tails only added code), and the fp8 forms' two tails beside the codes'
  // math spill at the 64 registers of two blocks an SM (96 bytes against 4).
  constexpr bool kFlagOncePerRow = kFit == RowFit::kExact && !K::kLayer && !K::kFp8Out;
  // kPlain (exact rows of a plain call, cluster_takes_plain in norm_launch.cuh): the plain form,
  // one tail with no weight offset, no weight_after_cast and no stats (OutputForm::kPlain), 60-150
  // instructions a row shorter than the general tails (bench/NOTES.md, "Norm v62"). RMSNorm alone
  // keeps its row packed through the reductions there (kPackedRow), as its general kernel does:
  // left to ptxas, its floats spilled 44 bytes at the 64 registers of two blocks an SM.
  static_assert(!kPlain || (kFit == RowFit::kExact && K::kPlainBuilt), "plain: exact rows");
  constexpr bool kPackedRow =
      kPlain && !K::kLayer && !K::kAdd && sizeof(typename K::TR) == 2;
  constexpr OutputForm kForm = kPlain            ? OutputForm::kPlain
                               : kFlagOncePerRow ? OutputForm::kSplitTails
                                                 : OutputForm::kFlagPerElement;

  __shared__ float scratch[2][kValues][K::kScratch];        // [row parity][value]
  __shared__ float partial[2][kValues][kMaxClusterBlocks];  // [row parity][value][sender rank]
  __shared__ ClusterMailbox mailbox[2];                     // [row parity]
  // fp8 output: each warp's max|y|, [row parity][sender rank * warps + sender warp], and the
  // mailboxes that count them.
  constexpr int kMaxSlots = K::kFp8Out ? kMaxClusterBlocks * K::kMaxWarpsPerRow : 1;
  __shared__ float warp_max[2][kMaxSlots];
  __shared__ ClusterMailbox max_mailbox[2];
  const int blocks = a.cluster_blocks;
  const auto rank = cluster_block_rank();
  const int64_t clusters = static_cast<int64_t>(gridDim.x) / blocks;
  const int tpr = static_cast<int>(blockDim.x);
  const int t = static_cast<int>(threadIdx.x);
  const int slice_width = tpr * a.items * G;
  const int first_col = static_cast<int>(rank) * slice_width;
  const int n = static_cast<int>(a.cols);

  if (t == 0) {
    mailbox_init(&mailbox[0]);
    mailbox_init(&mailbox[1]);
    if constexpr (K::kFp8Out) {
      mailbox_init(&max_mailbox[0]);
      mailbox_init(&max_mailbox[1]);
    }
    mailbox_publish_init();
  }
  cluster_barrier();  // every block's mailboxes are ready before any peer sends
  wait_for_prior_grids();
  // The next grid may launch now, or after this block's last row (NormConfig::
  // trigger_after_writes).
  if (!a.trigger_after_writes) allow_dependent_grids();

  int parity = 0;      // row parity: which set of slots this row uses
  unsigned phase = 0;  // the mailboxes' phase parity for this row (flips every second row)
  const int lane = t % K::kWarp;
  // The block whose values this lane combines: the lanes form groups of the next power of two
  // of the block count, and a lane past the cluster's blocks adds zeros (clusters of 3, 5, 6 or
  // 7 blocks cover rows of 3, 5, 6 or 7 x 2^k groups exactly; choose_norm_config).
  int lanes_per_sum = 1;
  while (lanes_per_sum < blocks) lanes_per_sum *= 2;
  const int lane_block = lane % lanes_per_sum;
  const bool lane_has_block = lane_block < blocks;
  auto block_total = [&](float v, int k) {
    return row_sum<K::kWarp, K::kMaxWarpsPerRow>(v, tpr, scratch[parity][k]);
  };
  // Sends this block's values (the first kValues of v0, v1) to every block of the cluster and
  // waits for theirs.
  auto exchange = [&](float v0, float v1) {
    if (t == 0) mailbox_expect(&mailbox[parity], blocks * kValues * unsigned{sizeof(float)});
    if (t < blocks) {
      const auto to = static_cast<unsigned>(t);
      mailbox_send(&partial[parity][0][rank], &mailbox[parity], to, v0);
      if (kValues == 2) mailbox_send(&partial[parity][kValues - 1][rank], &mailbox[parity], to, v1);
    }
    mailbox_wait(&mailbox[parity], phase);
  };
  // RMSNorm: lane l takes block lane_block's partial; the butterfly over lanes_per_sum lanes
  // then leaves the rank-ordered tree sum (padded with zeros) in every lane.
  auto reduce = [&](float v, int) {
    exchange(block_total(v, 0), 0.0f);
    return warp_sum<K::kWarp>(lane_has_block ? partial[parity][0][lane_block] : 0.0f,
                              lanes_per_sum);
  };
  // LayerNorm: the row's mean from the slices' sums, as RMSNorm's total; its centred squares from
  // each slice's squares about its own centre c_b (Chan et al.'s pairwise update:
  // Q_b + 2 (c_b - m)(S_b - n_b c_b) + n_b (c_b - m)^2, which does not cancel), in rank order.
  auto combine = [&](float slice_sum, float slice_squares, float* mean, float* total) {
    exchange(slice_sum, slice_squares);
    const float s_b = lane_has_block ? partial[parity][0][lane_block] : 0.0f;
    const float q_b = lane_has_block ? partial[parity][kValues - 1][lane_block] : 0.0f;
    const int elems_b = min(max(n - lane_block * slice_width, 0), slice_width);
    const float n_b = static_cast<float>(elems_b);
    const float c_b = slice_centre(s_b, elems_b);
    // + 0.0f: see finish_row.
    *mean = warp_sum<K::kWarp>(s_b, lanes_per_sum) / static_cast<float>(n) + 0.0f;
    const float d = c_b - *mean;
    const float centred = q_b + 2.0f * d * (s_b - n_b * c_b) + n_b * d * d;
    *total = warp_sum<K::kWarp>(lane_has_block ? centred : 0.0f, lanes_per_sum);
  };
  const SliceMoments<decltype(block_total), decltype(combine)> moments{
      min(max(n - first_col, 0), slice_width), block_total, combine};
  // The row's max|y| (fp8 output with a dynamic scale; finish_row calls it in every thread).
  auto cluster_max = [&](float v) {
    if constexpr (K::kFp8Out) {
      v = cluster_nan_max<K::kWarp>(v, warp_max[parity], &max_mailbox[parity], blocks, rank,
                                    tpr / K::kWarp, phase);
    }
    return v;
  };

  auto item_present = [&](int i, int col) {
    return item_in_row<kFit, kItems>(i, a.items, col, n);
  };
  auto item_col = [&](int i) { return first_col + (t + i * tpr) * G; };
  const float weight_offset = weight_offset_of(a);
  const TW* weight = static_cast<const TW*>(a.weight);
  const TW* bias = static_cast<const TW*>(a.bias);
  // Weight and bias come from cache: every row reads them. The plain form's weight is present and
  // has no offset.
  auto affine = [&](int, int col, float (&wv)[G], float (&bv)[G]) {
    if constexpr (kPlain) {
      affine_values<K>(load_item<K>(weight, col, n, kEveryItemVector<K, kFit>),
                       bias_group<K, kFit>(bias, col, n), wv, bv);
    } else {
      affine_values<K>(weight_group<K, kFit>(weight, col, n), bias_group<K, kFit>(bias, col, n),
                       weight_offset, wv, bv);
    }
  };

  Packed<TX, G> x[kItems], next_x[kPrefetch ? kItems : 1];
  Packed<TR, G> h[kItems], next_h[kPrefetch ? kItems : 1];
  auto load_slice = [&](int64_t row, auto& xs, auto& hs) {
    const TX* x_row = static_cast<const TX*>(a.x) + row_offset<K, RowTensor::kX>(a, row);
    const TR* r_row = static_cast<const TR*>(a.residual) +
                        row_offset<K, RowTensor::kResidual>(a, row);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      load_row_item<K, kFit>(x_row, r_row, item_col(i), n, item_present(i, item_col(i)), xs[i],
                             hs[i]);
    }
  };
  int64_t row = static_cast<int64_t>(blockIdx.x) / blocks;
  if (kPrefetch && row < a.rows) load_slice(row, x, h);
  for (int64_t i = 0; row < a.rows; ++i, row += clusters) {
    parity = static_cast<int>(i & 1);
    phase = static_cast<unsigned>(i >> 1) & 1u;
    const int64_t next = row + clusters;
    if constexpr (kPrefetch) {
      if (next < a.rows) load_slice(next, next_x, next_h);
    } else {
      load_slice(row, x, h);
    }
    finish_row<K, kFit, kForm, kPackedRow>(a, row, true, t, tpr, first_col, a.items, x, h,
                                           affine, reduce, cluster_max, t == 0 && rank == 0,
                                           StaticScaleAtCodes{a.static_scale}, moments);
    if constexpr (kPrefetch) {
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        x[j] = next_x[j];
        h[j] = next_h[j];
      }
    }
  }
  if (a.trigger_after_writes) allow_dependent_grids();
}

}  // namespace fusekit::gpu
