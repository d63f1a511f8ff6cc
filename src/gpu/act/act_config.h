// Launch configuration for the gated-activation kernels, and the heuristic that picks it.
//
// Kept apart from the kernels so it can be read, tested and tuned on its own. Plain C++: no GPU
// header. Nothing here changes what a row computes (the plain and backward ops are elementwise,
// and a row's max for fp8 does not depend on the order it is taken in), so the batch size may
// choose freely: the configuration is about bytes in flight and launch latency only.
#pragma once

#include <cstdint>
#include <string>

namespace fusekit::gpu {

// Elementwise kernels (act_and_mul, backward): a 2D grid. Block (threads_x, threads_y); thread
// x of a block handles `unroll` 16-byte groups of a row, threads_x * unroll apart from each
// other's start; grid_x blocks cover the row's groups; grid_y blocks of threads_y rows each
// stride over the rows.
struct ActElementwiseConfig {
  int threads_x = 256;
  int threads_y = 1;
  int unroll = 1;  // 1, 2 or 4
  int64_t grid_x = 1;
  int64_t grid_y = 1;
  std::string to_string() const;
};

// Quantizing kernels: one row per block, grid-stride over rows. With items > 0 each of the
// block's threads keeps `items` groups of y in registers between the row's max and its write
// (one read of the inputs); items == 0 is the two-pass path for rows too long for that (the
// inputs are read twice, the second time mostly from L2).
//
// Cluster path (cluster_blocks > 1; fewer rows than SMs, on GPUs with thread-block clusters): each
// row is split over cluster_blocks blocks of kActQuantClusterThreads threads, `items` (1, 2 or 4)
// groups per thread, so that a decode step's math runs on several SMs; grid = rows *
// cluster_blocks.
struct ActQuantConfig {
  int block_threads = 256;
  int items = 1;  // 1, 2, 4, 8, or 0: two passes
  int64_t grid = 1;
  int cluster_blocks = 1;
  std::string to_string() const;
};

struct ActShape {
  int64_t rows = 1;
  int64_t cols = 0;       // N
  int group_elems = 8;    // elements per 16-byte group of the input dtype
  int warp_size = 32;
  int sm_count = 132;
  int max_threads_per_sm = 2048;
  int max_cluster_blocks = 1;  // 1: no clusters
};

constexpr int kActMaxQuantItems = 8;
constexpr int kActMaxBlockThreads = 1024;
constexpr int kActQuantClusterThreads = 256;  // act_kernel.cuh's kQuantClusterThreads
constexpr int kActQuantMaxClusterBlocks = 8;  // the portable cluster size

ActElementwiseConfig choose_act_elementwise_config(const ActShape& shape);
ActQuantConfig choose_act_quant_config(const ActShape& shape);

}  // namespace fusekit::gpu
