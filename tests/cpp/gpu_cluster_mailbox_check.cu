// fusekit's cluster mailboxes (platform.h: mailbox_init, mailbox_expect, mailbox_send,
// mailbox_wait: st.async into a peer block's shared memory, counted on its mbarrier) in a kernel
// of a few lines: every block of a cluster sends a value to every block, over several rounds
// through two alternating mailboxes, as the norm cluster kernel does (norm_cluster_kernel.cuh).
// ctest runs it at 8 and 16 blocks a cluster (skipped, exit code 77, without a GPU with clusters).
//
// It is also scripts/gpu_check.sh's probe of compute-sanitizer synccheck. On an H200 with
// compute-sanitizer 2025.3.1 (CUDA 13, driver 580.159), a kernel of this form (the same
// instructions, 8 clusters in the grid) stopped under synccheck with "an illegal memory access"
// at 16 blocks a cluster, and ran at 8 blocks; it ran right at both sizes without the tool. With
// 16 blocks it ran clean in grids of 1 to 6 clusters and stopped at 8 (7 not run); 8-block
// clusters ran clean in grids of 32. The norm cluster kernel does the same: grids of 8 or more
// 16-block clusters (bf16 rows of 262144, M >= 8) stop under synccheck, while grids of 3
// (NormLaunchShapes.Fp8ClusterShapesAgree...) and every grid of 8-block clusters ran clean, and
// all of them pass memcheck and racecheck. Where this check fails under synccheck, gpu_check.sh
// caps clusters at 8 blocks for its synccheck pass (FUSEKIT_MAX_CLUSTER_BLOCKS=8).
//
//   fusekit_cluster_mailbox_check [blocks per cluster, 1-16 (16)] [rounds (4)] [clusters (8)]
//   compute-sanitizer --tool synccheck build/gpu/tests/cpp/fusekit_cluster_mailbox_check 16 4
//
// CUDA only (clusters are sm_90+), so it calls the CUDA runtime by name. Exit code 0 when every
// block received every peer's value in every round, 1 otherwise (a launch or runtime error
// included), 2 on bad arguments, 77 without a GPU that has clusters.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gpu/platform.h"

namespace fusekit::gpu {
namespace {

// Each round, every block sends rank + round to every block of its cluster and sums what it
// receives: blocks * (blocks - 1) / 2 + blocks * round. Two mailboxes alternate by round, as in
// the norm cluster kernel (norm_cluster_kernel.cuh, "Slot reuse").
__global__ void exchange_kernel(unsigned blocks, int rounds, float* totals) {
  __shared__ float slot[2][kMaxClusterBlocks];
  __shared__ ClusterMailbox mailbox[2];
  const unsigned rank = cluster_block_rank();
  if (threadIdx.x == 0) {
    mailbox_init(&mailbox[0]);
    mailbox_init(&mailbox[1]);
    mailbox_publish_init();
  }
  cluster_barrier();
  float total = 0.0f;
  for (int round = 0; round < rounds; ++round) {
    const int parity = round & 1;
    const auto phase = static_cast<unsigned>(round >> 1) & 1u;
    if (threadIdx.x == 0) mailbox_expect(&mailbox[parity], blocks * unsigned{sizeof(float)});
    if (threadIdx.x < blocks) {
      mailbox_send(&slot[parity][rank], &mailbox[parity], threadIdx.x,
                   static_cast<float>(rank + round));
    }
    mailbox_wait(&mailbox[parity], phase);
    for (unsigned b = 0; b < blocks; ++b) total += slot[parity][b];
    __syncthreads();  // every thread has read this round's slots before they are sent again
  }
  if (threadIdx.x == 0) totals[blockIdx.x] = total;
}

}  // namespace
}  // namespace fusekit::gpu

int main(int argc, char** argv) {
  using namespace fusekit::gpu;
  const int blocks = argc > 1 ? std::atoi(argv[1]) : 16;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 4;
  const int clusters = argc > 3 ? std::atoi(argv[3]) : 8;
  if (blocks < 1 || blocks > kMaxClusterBlocks || rounds < 1 || clusters < 1 || clusters > 1024) {
    std::fprintf(stderr, "usage: %s [blocks per cluster, 1-%d] [rounds >= 1] [clusters, 1-1024]\n",
                 argv[0], kMaxClusterBlocks);
    return 2;
  }
  int devices = 0;
  cudaDeviceProp prop;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 ||
      cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major < 9) {
    std::printf("skipped: no GPU with thread-block clusters (sm_90+)\n");
    return 77;
  }
  const int grid = blocks * clusters;
  float* totals = nullptr;
  ErrorCode e = allow_large_clusters(exchange_kernel);
  if (e == kSuccess) e = cudaMalloc(&totals, grid * sizeof(float));
  if (e == kSuccess) {
    e = launch_clustered(exchange_kernel, dim3(grid), dim3(128), 0, nullptr, false, blocks,
                         static_cast<unsigned>(blocks), rounds, totals);
  }
  if (e == kSuccess) e = cudaDeviceSynchronize();
  std::vector<float> host(static_cast<size_t>(grid));
  if (e == kSuccess) {
    e = cudaMemcpy(host.data(), totals, grid * sizeof(float), cudaMemcpyDeviceToHost);
  }
  cudaFree(totals);  // null (nothing to free) where the allocation failed
  if (e != kSuccess) {
    std::printf("%d clusters of %d blocks, %d rounds: %s\n", clusters, blocks, rounds,
                error_string(e));
    return 1;
  }
  const double expected = blocks * (blocks - 1) / 2.0 * rounds +
                          static_cast<double>(blocks) * rounds * (rounds - 1) / 2.0;
  int wrong = 0;
  for (int b = 0; b < grid; ++b) wrong += host[b] != expected;
  std::printf("%d clusters of %d blocks, %d rounds: %d of %d blocks summed %g\n", clusters, blocks,
              rounds, grid - wrong, grid, expected);
  return wrong == 0 ? 0 : 1;
}
