// What a norm launch config is, apart from which one to choose: building one that the kernels
// take (make_norm_config), whether a cluster's blocks cover a row exactly, and the label the
// benchmark and the tests print. The heuristic that chooses among them is norm_config.cc.
#include <algorithm>
#include <sstream>

#include "gpu/common/launch_math.h"
#include "gpu/norm/norm_config.h"

namespace fusekit::gpu {
namespace {

// Registers path: a block holds one row, or as many short rows as make this many threads. More,
// smaller blocks spread a batch over more SMs: on an H100 (bench/NOTES.md, "Norm launch shapes
// v7") one row per block against the earlier 256-thread floor took rms_norm [256, 2048] from 1.97
// to 1.81 us in graphs (fused_add 2.45 -> 2.19) and [2048, 2048] from 9.8 to 9.5 us, and
// measured the same elsewhere; below two warps a block's fixed costs start to show.
constexpr int kMinBlockThreads = 64;

}  // namespace

std::string NormConfig::to_string() const {
  std::ostringstream s;
  if (path == Path::kRegisters) {
    s << "registers(tpr=" << threads_per_row << ",items=" << items << ",rows=" << rows_per_block
      << (trigger_after_writes          ? ",trigger=late"
          : trigger_late_where_crowded ? ",trigger=late-if-crowded"
                                       : "")
      << (weight_at_output ? ",weight=late" : "")
      << (output_parts > 1 ? ",parts=" + std::to_string(output_parts) : "")
      << (split_blocks > 1 ? ",split=" + std::to_string(split_blocks) : "")
      << (plain ? ",plain" : "") << (packed_row ? ",packed" : "") << ")";
  } else if (path == Path::kCluster) {
    s << "cluster(blocks=" << cluster_blocks << ",threads=" << threads_per_row
      << ",items=" << items << (plain ? ",plain" : "") << ")";
  } else {
    s << "staged(threads=" << threads_per_row << ",smem_groups=" << smem_groups << ")";
  }
  return s.str();
}

bool make_norm_config(const NormShape& shape, NormConfig::Path path, int threads_per_row,
                      int items, NormConfig* config) {
  const int64_t groups = ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
  const int warp = shape.warp_size;
  const bool shape_ok = threads_per_row >= 1 && threads_per_row <= kNormMaxThreads &&
                        (threads_per_row & (threads_per_row - 1)) == 0;
  if (!shape_ok) return false;
  NormConfig c;
  c.path = path;
  c.threads_per_row = threads_per_row;
  if (path == NormConfig::Path::kRegisters) {
    const int max_items = kNormMaxItems;
    const bool pow2_items = items >= 1 && items <= max_items && (items & (items - 1)) == 0;
    const bool whole = shape.whole_groups && shape.cols % shape.group_elems == 0;
    const bool odd_items =
        norm_odd_items(items) && odd_items_built(shape, items) &&
        ((whole && static_cast<int64_t>(threads_per_row) * items == groups) ||
         takes_last_partial(whole, shape.narrow_accesses, groups, threads_per_row, items));
    if (!pow2_items && !odd_items) return false;
    if (static_cast<int64_t>(threads_per_row) * items < groups) return false;
    c.items = items;
    c.rows_per_block = std::max(1, kMinBlockThreads / threads_per_row);
    if (threads_per_row < warp) {
      c.rows_per_block = std::max(c.rows_per_block, warp / threads_per_row);
    }
    c.block_threads = threads_per_row * c.rows_per_block;
  } else if (path == NormConfig::Path::kCluster) {
    if (threads_per_row < warp || items < 1 || items > kNormClusterMaxItems ||
        (items & (items - 1)) != 0) {
      return false;
    }
    const int64_t blocks = ceil_div(groups, static_cast<int64_t>(threads_per_row) * items);
    if (blocks > shape.max_cluster_blocks) return false;
    c.items = items;
    c.cluster_blocks = static_cast<int>(blocks);
    c.rows_per_block = 1;
    c.block_threads = threads_per_row;
    // The grid holds as many clusters as the GPU does at once, each looping over its share of
    // the rows: where there are more rows than SMs, the next grid launches after this one's
    // last row rather than at its start. Back to back on an H200 (bench/NOTES.md, "Norm v39"),
    // the early launch made rows of 18432-20480 take 1.24-1.42x their time alone
    // (fused_add_rms_norm [2048, 18432]: 84 -> 120 us; 85 with the late one), and at M = 256 in
    // graph replay the late one took 0.78-0.93x the time at those N (1.03-1.05x at 32768); at
    // M = 1-32 it took 1.07-1.21x, so small batches keep the early one.
    c.trigger_after_writes = shape.rows > shape.sm_count;
  } else {
    if (threads_per_row < warp || threads_per_row > kNormStagedThreads) return false;
    c.items = 0;
    c.rows_per_block = 1;
    c.block_threads = threads_per_row;
    const int64_t group_bytes = static_cast<int64_t>(shape.group_elems) * shape.source_elem_bytes;
    c.smem_groups = std::min<int64_t>(groups, shape.max_smem_bytes / group_bytes);
  }
  *config = c;
  return true;
}

bool cluster_covers_row(const NormShape& shape, const NormConfig& config) {
  if (config.path != NormConfig::Path::kCluster || shape.cols % shape.group_elems != 0) {
    return false;
  }
  return shape.cols / shape.group_elems ==
         static_cast<int64_t>(config.cluster_blocks) * config.threads_per_row * config.items;
}

}  // namespace fusekit::gpu
