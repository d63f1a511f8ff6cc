// The gated-activation launch heuristic. See act_config.h; the reasoning behind the numbers and
// the predicted bandwidth are in bench/NOTES.md ("Gated activations").
#include "gpu/act/act_config.h"

#include <algorithm>
#include <sstream>

#include "gpu/common/launch_math.h"

namespace fusekit::gpu {
namespace {

constexpr int64_t kMaxGrid = 2147483647;
// Small batches: up to two waves of 256-thread blocks at full occupancy.
constexpr int kWavesOfBlocks = 2;
// Large batches (four groups per thread): one wave at the kernel's occupancy,
// kActElementwiseBlocksPerSm blocks per SM (its launch bound), so that every thread walks many
// rows and its prefetch of the next row's inputs keeps the memory system busy (act_kernel.cuh).
// 16-byte groups per SM beyond which a batch counts as filling the GPU and takes four groups per
// thread (more bytes in flight per thread, fewer blocks); below it one group per thread spreads
// a small batch over as many SMs as possible for latency.
constexpr int64_t kFullSmGroups = 2048;

int64_t row_groups(const ActShape& shape) {
  return ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
}

}  // namespace

std::string ActElementwiseConfig::to_string() const {
  std::ostringstream s;
  s << "elementwise(block=" << block_threads << ",unroll=" << unroll
    << ",threads_per_row=" << threads_per_row << ",rows_per_pass=" << rows_per_pass
    << ",grid=" << grid << ")";
  return s.str();
}

std::string ActQuantConfig::to_string() const {
  std::ostringstream s;
  s << "quant(threads=" << block_threads << ",items=" << items << ",grid=" << grid;
  if (cluster_blocks > 1) s << ",cluster=" << cluster_blocks;
  s << ")";
  return s.str();
}

bool act_elementwise_row_fits(const ActShape& shape) {
  return ceil_div(row_groups(shape), 4) <= kActMaxThreadsPerRow;
}

ActElementwiseConfig choose_act_elementwise_config(const ActShape& shape) {
  ActElementwiseConfig c;
  const int64_t groups = row_groups(shape);
  const int64_t rows = std::max<int64_t>(shape.rows, 1);
  const bool fills_gpu = rows * groups > shape.sm_count * kFullSmGroups ||
                         groups > kActMaxThreadsPerRow;
  c.unroll = fills_gpu ? 4 : 1;
  c.block_threads = kActElementwiseThreads;
  c.threads_per_row = ceil_div(groups, c.unroll);
  // Threads wanted in all: one resident wave for large batches (the rows loop), up to two waves
  // at full occupancy for small ones (then nothing loops).
  const int64_t threads_wanted =
      fills_gpu ? int64_t{shape.sm_count} * kActElementwiseBlocksPerSm * kActElementwiseThreads
                : int64_t{shape.sm_count} * shape.max_threads_per_sm * kWavesOfBlocks;
  c.rows_per_pass = std::clamp<int64_t>(threads_wanted / c.threads_per_row, 1, rows);
  c.active_threads = c.rows_per_pass * c.threads_per_row;
  c.grid = ceil_div(c.active_threads, c.block_threads);
  return c;
}

ActQuantConfig choose_act_quant_config(const ActShape& shape) {
  ActQuantConfig c;
  const int64_t groups = row_groups(shape);
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
