// The cluster path of the norm kernels: rows too long for one block's registers, split over the
// blocks of a thread-block cluster (sm_90+), each holding its slice in registers as the registers
// path does (normalize_row_slice, norm_kernel.cuh), the partial sums exchanged through distributed
// shared memory.
#pragma once

#include <cstdint>

#include "gpu/norm/norm_kernel.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

// The cluster path: the cluster_blocks blocks of a cluster share one row, block r taking the
// slice that starts at group r * threads * items. Each block sums its slice (row_sum), publishes
// the partial in its shared memory, and after a cluster barrier every thread adds the blocks'
// partials in rank order (the same tree, hence the same bits, in every block).
//
// The grid is as many clusters as the GPU holds at once (max_resident_clusters), each looping over
// rows cluster, cluster + clusters, ...: a cluster of up to 16 blocks launches only where one GPC
// has that many block slots free together, so one cluster per row left slots idle between rows
// (bench/NOTES.md, "Norm v10"). Each cluster barrier costs about a microsecond at 16 blocks, so a
// row has one per reduction and no more: the partials alternate between two slots by row parity
// (a block writes row i + 2's partial only after the barrier of row i + 1, which every peer
// reaches only after reading row i's). After the last row's last reduction a block arrives at one
// more barrier, saying it has read its peers' partials, and waits on it only at exit, so that its
// shared memory outlives their reads while neither its output stores nor a barrier's release of
// them hold up the others. Same registers budget as the registers kernel (two blocks per SM where
// that fits), so that one block's loads overlap another's reductions and writes.
template <class K, RowFit kFit>
__global__ void __launch_bounds__(K::kMaxThreads, K::kMinBlocksPerSm)
    norm_cluster_kernel(NormKernelArgs a) {
  static_assert(!K::kFp8Out, "fp8 output takes the registers or staged path");
  if constexpr (!warp_size_compiled<K::kWarp>() || !clusters_compiled()) return;
  __shared__ float scratch[2][K::kScratch];
  __shared__ float partial[2][2];  // [row parity][reduction]
  const int blocks = a.cluster_blocks;
  const int rank = static_cast<int>(cluster_block_rank());
  const int64_t clusters = static_cast<int64_t>(gridDim.x) / blocks;
  const int tpr = static_cast<int>(blockDim.x);
  const int t = static_cast<int>(threadIdx.x);
  const int first_col = rank * tpr * a.items * K::kGroup;

  wait_for_prior_grids();
  allow_dependent_grids();

  int parity = 0;
  bool last_row = false;
  auto reduce = [&](float v, int k) {
    const float block_total = row_sum<K::kWarp, K::kMaxWarpsPerRow>(v, tpr, scratch[k]);
    if (t == 0) partial[parity][k] = block_total;
    cluster_barrier();
    // Lane l reads block (l mod blocks)'s partial; the butterfly over `blocks` lanes then leaves
    // the rank-ordered tree sum in every lane.
    const int lane = t % K::kWarp;
    const float total = warp_sum<K::kWarp>(
        cluster_read(&partial[parity][k], static_cast<unsigned>(lane % blocks)), blocks);
    if (last_row && k == (K::kLayer ? 1 : 0)) cluster_arrive();
    return total;
  };
  auto no_max = [](float v) { return v; };  // never called: no fp8 output here
  // One tail (finish_row): two would cost registers here, and a second 512-thread block per SM.
  // h is written out after the reductions (kLateSumStore), so that the cluster barriers release no
  // pending global stores, where one block per SM leaves the registers for it (in 64, LayerNorm
  // with the add spilled 40-170 bytes: ptxas).
  constexpr bool kLateSumStore = K::kMinBlocksPerSm == 1;
  const int64_t first_row = static_cast<int64_t>(blockIdx.x) / blocks;
  for (int64_t row = first_row; row < a.rows; row += clusters) {
    last_row = row + clusters >= a.rows;  // the same in every block of the cluster
    normalize_row_slice<K, kFit, false, kLateSumStore, K::kMaxItems>(
        a, row, true, t, tpr, first_col, a.items, reduce, no_max, t == 0 && rank == 0);
    parity ^= 1;
  }
  if (first_row < a.rows) cluster_wait();
}

}  // namespace fusekit::gpu
