// The gated-activation launch heuristic. See act_config.h; the reasoning behind the numbers and
// the predicted bandwidth are in bench/NOTES.md ("Gated activations").
#include "gpu/act/act_config.h"

#include <algorithm>
#include <sstream>

namespace fusekit::gpu {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

constexpr int kBlockThreads = 256;
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGrid = 2147483647;
// Small batches: up to two waves of 256-thread blocks at full occupancy.
constexpr int kWavesOfBlocks = 2;
// Large batches (four groups per thread): one wave at the forward kernel's occupancy, two
// 256-thread blocks per SM (ptxas: ~92 registers per thread), so that every thread walks many rows
// and its prefetch of the next row's inputs keeps the memory system busy (act_kernel.cuh).
constexpr int kFullBatchBlocksPerSm = 2;
// 16-byte groups per SM beyond which a batch counts as filling the GPU and takes four groups per
// thread (more bytes in flight per thread, fewer blocks); below it one group per thread spreads
// a small batch over as many SMs as possible for latency.
constexpr int64_t kFullSmGroups = 2048;

}  // namespace

std::string ActElementwiseConfig::to_string() const {
  std::ostringstream s;
  s << "elementwise(block=" << threads_x << "x" << threads_y << ",unroll=" << unroll
    << ",grid=" << grid_x << "x" << grid_y << ")";
  return s.str();
}

std::string ActQuantConfig::to_string() const {
  std::ostringstream s;
  s << "quant(threads=" << block_threads << ",items=" << items << ",grid=" << grid;
  if (cluster_blocks > 1) s << ",cluster=" << cluster_blocks;
  s << ")";
  return s.str();
}

ActElementwiseConfig choose_act_elementwise_config(const ActShape& shape) {
  ActElementwiseConfig c;
  const int64_t groups = ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
  const bool fills_gpu = shape.rows * groups > shape.sm_count * kFullSmGroups;
  c.unroll = fills_gpu ? 4 : 1;
  // Threads along a row: enough to cover it in few blocks, at least a warp, at most a block.
  const int64_t per_row = next_pow2(ceil_div(groups, c.unroll));
  c.threads_x = static_cast<int>(std::clamp<int64_t>(per_row, shape.warp_size, kBlockThreads));
  c.threads_y = kBlockThreads / c.threads_x;  // short rows: several per block
  c.grid_x = ceil_div(groups, static_cast<int64_t>(c.threads_x) * c.unroll);
  const int64_t row_blocks = ceil_div(shape.rows, c.threads_y);
  const int64_t blocks_wanted =
      fills_gpu ? static_cast<int64_t>(shape.sm_count) * kFullBatchBlocksPerSm
                : static_cast<int64_t>(shape.sm_count) * (shape.max_threads_per_sm / kBlockThreads) *
                      kWavesOfBlocks;
  const int64_t wanted_y = std::max<int64_t>(1, ceil_div(blocks_wanted, c.grid_x));
  c.grid_y = std::min({row_blocks, wanted_y, kMaxGridY});
  c.grid_y = std::max<int64_t>(c.grid_y, 1);
  return c;
}

ActQuantConfig choose_act_quant_config(const ActShape& shape) {
  ActQuantConfig c;
  const int64_t groups = ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
  // Fewer rows than SMs: one block per row would leave most SMs idle and put a whole row's math
  // on one, so split rows over a cluster when the row needs at least two blocks at the fewest
  // items per thread that keep it within the portable cluster size.
  const int cluster_limit = std::min(shape.max_cluster_blocks, kActQuantMaxClusterBlocks);
  if (cluster_limit > 1 && shape.rows >= 1 && shape.rows < shape.sm_count) {
    for (int items = 1; items <= 4; items *= 2) {
      const int64_t blocks = ceil_div(groups, int64_t{kActQuantClusterThreads} * items);
      if (blocks < 2) break;
      if (blocks <= cluster_limit) {
        c.block_threads = kActQuantClusterThreads;
        c.items = items;
        c.cluster_blocks = static_cast<int>(blocks);
        c.grid = shape.rows * blocks;
        return c;
      }
    }
  }
  // The fewest items per thread that fit the row in 512 threads (1024 for the longest rows that
  // still fit in registers): short dependent chains, few warps to reduce over.
  int items = 1;
  while (items < kActMaxQuantItems && groups > static_cast<int64_t>(items) * 512) items *= 2;
  int64_t threads = next_pow2(ceil_div(groups, items));
  if (threads > kActMaxBlockThreads) {
    c.items = 0;  // two passes
    c.block_threads = kActMaxBlockThreads;
  } else {
    c.items = items;
    c.block_threads = static_cast<int>(std::max<int64_t>(threads, 64));
  }
  c.block_threads = std::max(c.block_threads, shape.warp_size);
  c.grid = std::max<int64_t>(1, std::min(shape.rows, kMaxGrid));
  return c;
}

}  // namespace fusekit::gpu
