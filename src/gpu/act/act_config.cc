// The gated-activation launch heuristic. See act_config.h; the reasoning behind the numbers and
// the predicted bandwidth are in bench/NOTES.md ("Gated activations").
#include "gpu/act/act_config.h"

#include <algorithm>
#include <sstream>

#include "gpu/common/launch_math.h"

namespace fusekit::gpu {
namespace {

constexpr int64_t kMaxGrid = 2147483647;
// 16-byte groups per SM beyond which a batch counts as filling the GPU: 256-thread blocks, and
// two groups per thread for the backward pass; below it 128-thread blocks spread a small batch
// over as many SMs as possible for latency.
constexpr int64_t kFullSmGroups = 2048;

int64_t row_groups(const ActShape& shape) {
  return ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
}

// Whether a batch's rows split over clusters come to at most kActQuantSplitThreadsPerSm threads
// per SM.
bool split_within_thread_budget(const ActShape& shape, const ActQuantConfig& c) {
  return c.grid * c.block_threads <= int64_t{kActQuantSplitThreadsPerSm} * shape.sm_count;
}

}  // namespace

std::string ActElementwiseConfig::to_string() const {
  std::ostringstream s;
  s << "elementwise(block=" << block_threads << ",unroll=" << unroll << ",group=" << group_elems
    << ",threads_per_row=" << threads_per_row << ",rows_per_pass=" << rows_per_pass
    << ",grid=" << grid << (trigger_after_writes ? ",trigger=late" : "") << ")";
  return s.str();
}

std::string ActQuantConfig::to_string() const {
  std::ostringstream s;
  s << "quant(threads=" << block_threads << ",items=" << items << ",grid=" << grid;
  if (smem_bytes > 0) s << ",smem=" << smem_bytes;
  if (prefetch_rows > 0) s << ",prefetch=" << prefetch_rows;
  if (cluster_blocks > 1) s << ",cluster=" << cluster_blocks;
  s << ")";
  return s.str();
}

bool act_elementwise_row_fits(const ActShape& shape) {
  return ceil_div(row_groups(shape), kActElementwiseMaxUnroll) <= kActMaxThreadsPerRow;
}

// A thread per (row, `unroll` groups) for every row at once. Large batches were measured both
// ways on an H100 (bench/NOTES.md, "Gated activations v4"): this full grid of short-lived threads
// beat one resident wave of threads looping over the rows with a prefetch of the next row by
// 5-20 points of copy bandwidth, since the activation math keeps the issue slots busy and only
// many resident warps (not a few warps with many loads each) hide the loads behind it. For the
// same reason the forward op takes one group per thread at every batch size: with its registers
// capped for six blocks per SM, one group per thread measured 0-2 points faster than two at
// M >= 1024 and 0.3-0.9 us faster at M = 64-512 (bench/NOTES.md, "Gated activations v7"). The
// backward pass, uncapped, keeps two groups per thread once the batch fills the GPU. Rows of more
// than kActMaxThreadsPerRow groups take two groups per thread either way.
ActElementwiseConfig choose_act_elementwise_config(const ActShape& shape, bool backward) {
  const int64_t groups = row_groups(shape);
  const int64_t rows = std::max<int64_t>(shape.rows, 1);
  const bool fills_gpu = rows * groups > shape.sm_count * kFullSmGroups;
  const bool two_groups = (backward && fills_gpu) || groups > kActMaxThreadsPerRow;
  // A decode-sized batch's forward op on 16-bit types takes 8-byte groups (4 elements per thread,
  // twice the threads): each thread's chain of math is half as long, and while the SMs are far
  // from full that chain, not the issue rate, sets the time. Measured on an H100 (bench/NOTES.md,
  // "Gated activations v9" and "v11"): while 16-byte groups would give each SM at most one
  // small-batch block, in 128-thread blocks (M = 1: gelu 1.44 -> 1.19 us, gelu_tanh 1.43 -> 1.10;
  // M = 4 0.05-0.1 us less); up to four such blocks' worth, in 256-thread blocks (M = 16-48 at
  // N = 11008 and 16-32 at N = 14336: 0.03-0.09 us less for all three activations, graph replay).
  // Beyond that the narrow groups lost as often as they won.
  const int64_t row_groups_total = rows * groups;
  const int64_t one_block_per_sm = int64_t{shape.sm_count} * kActSmallBatchThreads;
  const bool narrow = !backward && !two_groups && shape.group_elems == 8 &&
                      row_groups_total <= kActNarrowBlocksPerSm * one_block_per_sm;
  // A small batch is a few warps per SM at most: blocks half the usual size spread them over
  // twice as many SMs, so each SM's schedulers issue fewer of them (measured on an H100 at M = 1
  // and 32: 0.05-0.2 us faster than 256-thread blocks, bench/NOTES.md). Narrow groups past one
  // block per SM are twice the threads of that batch in 16-byte groups, and take full blocks.
  const bool small_blocks = !fills_gpu && (!narrow || row_groups_total <= one_block_per_sm);
  // Narrow groups (a thread per half group: twice row_groups_total threads) that fit one block
  // of kActTinyBatchThreads per SM take those: on an H100 at M = 1 (bench/NOTES.md, "Gated
  // activations v14") 0.03-0.07 us less than 128-thread blocks for all three activations at
  // N = 11008 and 14336; at M = 16, where they are several per SM, 0.1-0.3 us more.
  const bool tiny_blocks =
      narrow && 2 * row_groups_total <= int64_t{shape.sm_count} * kActTinyBatchThreads;
  const int group = narrow ? shape.group_elems / 2 : shape.group_elems;
  // The compact kernel (whole groups, 32-bit offsets: act_forward_is_compact) spends about half
  // the instructions per thread of the general one, and its best shapes differ: on an H100
  // (bench/NOTES.md, "Gated activations v18"; sweeps of M = 8-128 at N = 11008 and 14336, all
  // three activations) 256-thread blocks with the next grid triggered after the writes were
  // within 0-8% of the best of 26 shapes at every batch that does not fill the GPU, and
  // 0.1-0.9 us faster than the general kernel's shapes (gelu [32, 14336] 1.59 -> 1.42 us), while
  // the general kernel with those shapes lost up to 0.2 us at M = 16-32.
  const bool compact =
      !backward && !two_groups && shape.compact_layout && shape.cols % group == 0;
  const int block = tiny_blocks    ? kActTinyBatchThreads
                    : compact      ? kActElementwiseThreads
                    : small_blocks ? kActSmallBatchThreads
                                   : kActElementwiseThreads;
  ActElementwiseConfig c;
  make_act_elementwise_config(shape, backward, group, block, &c);
  // The forward op's grids of at most half as many blocks as SMs let the next grid launch after
  // their writes. On an H100 (bench/NOTES.md, "Gated activations v15"), graph replay of M = 1
  // (43-56 blocks) 1.16-1.20 -> 1.00-1.01 us for all three activations at N = 11008 and 14336;
  // M = 2 (86-112 blocks) level or up to 0.04 us slower, M = 32 0.07-0.13 us slower, so the
  // general kernel's other grids trigger at their start. The compact kernel triggers after its
  // writes at every batch that does not fill the GPU (above).
  c.trigger_after_writes = !backward && (2 * c.grid <= shape.sm_count || (compact && !fills_gpu));
  return c;
}

bool make_act_elementwise_config(const ActShape& shape, bool backward, int group_elems,
                                 int block_threads, ActElementwiseConfig* config) {
  const int64_t groups = row_groups(shape);
  const int64_t rows = std::max<int64_t>(shape.rows, 1);
  const bool fills_gpu = rows * groups > shape.sm_count * kFullSmGroups;
  const bool two_groups = (backward && fills_gpu) || groups > kActMaxThreadsPerRow;
  const bool narrow = group_elems != shape.group_elems;
  if (narrow && (backward || two_groups || group_elems * 2 != shape.group_elems ||
                 shape.group_elems != 8)) {
    return false;  // narrow groups: the forward op on 16-bit types, one group per thread
  }
  // Up to the elementwise kernels' launch bound (act_kernel.cuh's __launch_bounds__).
  if (block_threads < shape.warp_size || block_threads > kActElementwiseThreads ||
      block_threads % shape.warp_size != 0) {
    return false;
  }
  ActElementwiseConfig c;
  c.unroll = two_groups ? kActElementwiseMaxUnroll : 1;
  c.group_elems = group_elems;
  const int64_t thread_groups = ceil_div(std::max<int64_t>(shape.cols, 1), c.group_elems);
  c.block_threads = block_threads;
  c.threads_per_row = ceil_div(thread_groups, c.unroll);
  if (c.threads_per_row > kActMaxThreadsPerRow) return false;
  c.rows_per_pass = std::clamp<int64_t>(kActMaxActiveThreads / c.threads_per_row, 1, rows);
  c.active_threads = c.rows_per_pass * c.threads_per_row;
  c.grid = ceil_div(c.active_threads, c.block_threads);
  *config = c;
  return true;
}

bool act_layout_admits_compact(int64_t rows, int64_t cols, bool widest_access,
                               int64_t largest_row_stride) {
  constexpr int64_t kMaxOffset = (int64_t{1} << 31) - 1;
  rows = std::max<int64_t>(rows, 1);
  if (!widest_access || cols < 1 || cols > kMaxOffset || largest_row_stride < 0) return false;
  // (rows - 1) * stride + cols <= kMaxOffset, without overflowing int64.
  return rows == 1 || largest_row_stride <= (kMaxOffset - cols) / (rows - 1);
}

bool act_forward_is_compact(const ActElementwiseConfig& c, const ActShape& shape) {
  return shape.compact_layout && c.unroll == 1 &&
         c.rows_per_pass >= std::max<int64_t>(shape.rows, 1) && shape.cols % c.group_elems == 0;
}

bool make_act_quant_cluster_config(const ActShape& shape, int items, ActQuantConfig* config,
                                   int block_threads) {
  const int cluster_limit = std::min(shape.max_cluster_blocks, kActQuantMaxClusterBlocks);
  if (items != 1 && items != 2 && items != kActQuantClusterMaxItems) return false;
  const int64_t warp = shape.warp_size;
  if (block_threads != 0 && (block_threads < warp || block_threads % warp != 0 ||
                             block_threads > kActQuantClusterMaxThreads)) {
    return false;
  }
  // The row's threads, then as few blocks as the widest takes, each as narrow as covers the row
  // with that count (N = 22016 bf16, 688 threads at four groups: four blocks of 192 threads, not
  // of 224 with the last one 64 threads short). The rows are latency-bound: what counts is the
  // bytes an SM holds in flight, and threads past the row hold registers that a further block
  // could use (kActQuantClusterBlocksPerSm; bench/NOTES.md, "fp8 act_and_mul v20").
  const int64_t threads = ceil_div(row_groups(shape), int64_t{items});
  const int64_t width = block_threads != 0 ? block_threads : kActQuantClusterMaxThreads;
  const int64_t blocks = ceil_div(threads, width);
  if (blocks < 2 || blocks > cluster_limit || shape.rows < 1) return false;
  ActQuantConfig c;
  c.block_threads = static_cast<int>(block_threads != 0
                                         ? block_threads
                                         : ceil_div(ceil_div(threads, blocks), warp) * warp);
  c.items = items;
  c.cluster_blocks = static_cast<int>(blocks);
  c.grid = shape.rows * blocks;
  *config = c;
  return true;
}

// 32 elements per thread (four groups of 16-bit inputs, eight of float32), in just the warps the
// row needs, y staged in shared memory between the row's max and its write. The kernel does the
// activation math, a block-wide max, then the scaling and conversion; with one row per block it
// is the number of resident blocks that lets one block's math overlap another's loads, and the
// math keeps the issue slots busy. Measured on an H100 at N = 11008 and 14336 (bench/NOTES.md,
// "fp8 act_and_mul"), 16-bit inputs: four groups in
// 352-448 threads with registers capped for three blocks per SM beat the same blocks at two per
// SM and two groups per thread in 704-896 threads; staging y in shared memory rather than
// registers let each thread keep two groups' loads in flight at that cap (+3-6 points); a
// resident wave of blocks looping over the rows lost 6-11 points to a block per row. The
// compact build takes rows of up to 448 threads (N = 14336), the longest measured; longer rows
// take the wide build, and rows past 32 elements per thread of a 1024-thread block, or past the
// block's shared memory, two passes. float32 inputs took four groups too, in twice the threads:
// their rows of 11008-14336 went to the wide build, one block an SM by its registers, and ran at
// 66-83% of copy against 16-bit's 78-95% (H100, bench/NOTES.md "fp8 act_and_mul v19").
ActQuantConfig make_act_quant_block_config(const ActShape& shape) {
  ActQuantConfig c;
  const int64_t warp = shape.warp_size;
  const int items = act_quant_items(shape.group_elems);
  const int64_t threads =
      std::max<int64_t>(ceil_div(ceil_div(row_groups(shape), items), warp) * warp, 64);
  // y is staged in shared memory, 4 bytes per element of the block's groups, beside the
  // kernel's own scratch.
  const int64_t staging = threads * items * shape.group_elems * 4;
  if (threads <= kActMaxBlockThreads &&
      staging + kActQuantScratchBytes <= shape.max_smem_per_block) {
    c.items = items;
    c.block_threads = static_cast<int>(threads);
    c.smem_bytes = staging;
  } else {
    c.items = 0;
    c.block_threads = kActMaxBlockThreads;
  }
  c.grid = std::max<int64_t>(1, std::min(shape.rows, kMaxGrid));
  // The compact build's rows past one wave (what the GPU holds at once): once its own loads are
  // consumed, each block asks L2 for the row half a wave ahead (ActQuantConfig::prefetch_rows),
  // so that the memory fetches the coming rows while this wave computes and writes. Within one
  // wave every row's block is already loading it: there the prefetch measured 1-2% slower
  // (graph replay at M = 256). Measured on an H100 (bench/NOTES.md, "later
  // rows fetched into L2"), cold L2, against no prefetch: at half a wave 0.96-0.98x the time at
  // M = 2048 (silu [2048, 14336] 54.0 -> 52.1 us), 0.96-0.99x at 4096 and 16384; a whole wave
  // ahead 0.97-1.15x (the fetched rows outlive their room in L2 before their blocks start), two
  // waves 1.14-1.56x. The wide build (one block an SM by its bound) and two passes ask for none.
  const int64_t wave = act_quant_resident_rows(shape, c.block_threads);
  if (c.items > 0 && c.block_threads <= kActQuantCompactThreads && shape.rows > wave) {
    c.prefetch_rows = wave / 2;
  }
  return c;
}

int64_t act_quant_resident_rows(const ActShape& shape, int block_threads) {
  constexpr int kMaxBlocksPerSm = 32;
  const int threads = std::max(block_threads, 1);
  const int by_bound = kActQuantCompactBlocksPerSm * kActQuantCompactThreads / threads;
  const int blocks = std::max(1, std::min({by_bound, shape.max_threads_per_sm / threads,
                                           kMaxBlocksPerSm}));
  return int64_t{blocks} * shape.sm_count;
}

ActQuantConfig choose_act_quant_config(const ActShape& shape) {
  // Rows for fewer than half the SMs: one block per row would leave most SMs idle and put a
  // whole row's math on one, so split rows over a cluster when the row needs at least two blocks
  // at the fewest items per thread that keep it within the portable cluster size. Measured on an
  // H100 (bench/NOTES.md, "fp8 act_and_mul v13"): the split is 1.3-2x faster than a block per
  // row at M <= 32 and 2-14% at M = 64; at M = 128 a block per row is 9-23% faster (silu
  // [128, 11008]: 4.72 against 5.79 us), but for gelu at N = 14336, 3% slower. The fewest items
  // whose clusters come to at most kActQuantSplitThreadsPerSm threads per SM: on an H200
  // (bench/NOTES.md, "fp8 act_and_mul v21"), one group a thread in clusters of five to eight
  // blocks lost 0.6-0.8 us to two groups in three or four blocks once the batch passed that
  // (silu [48, 11008]: 3.00 against 2.30 us; [64, 8192]: 2.93 against 2.25), and led below it.
  if (shape.rows >= 1 && 2 * shape.rows < shape.sm_count) {
    ActQuantConfig c;
    for (int items = 1; items <= kActQuantClusterMaxItems; items *= 2) {
      if (make_act_quant_cluster_config(shape, items, &c) && split_within_thread_budget(shape, c)) {
        return c;
      }
    }
  }
  // Mid batches: each row over two blocks of a cluster, at the fewest groups per thread that
  // take exactly two (N = 2048 bf16: one, in 2 x 128 threads; 4096 and 6144: two; 8192-14336:
  // four, as the block per row has), while those blocks hold at most
  // kActQuantSplitThreadsPerSm threads per SM. A block per row at these batches leaves each
  // SM one or two rows of its longest chains (four groups per thread, y staged through shared
  // memory); the pair halves the row on the SM and keeps y in registers. Measured on an H200
  // (bench/NOTES.md, "fp8 act_and_mul v21"), graph replay, silu / gelu: M = 128 0.48-0.97x the
  // block per row's time at every N from 2048 to 14336 ([128, 2048] 1.71 against 3.19 us), M = 256
  // 0.60-0.78x at N = 2048 and 4096 (2 x 128 threads a row: 496 threads per SM); where the pair's
  // blocks are 192-224 threads (N = 6144, 11008, 14336), M = 256 measured 1.06-1.34x, and so did
  // clusters of three or more blocks at these batches (up to 1.65x).
  if (shape.rows >= 1) {
    for (int items = 1; items <= kActQuantClusterMaxItems; items *= 2) {
      ActQuantConfig c;
      if (!make_act_quant_cluster_config(shape, items, &c) || c.cluster_blocks != 2) continue;
      if (split_within_thread_budget(shape, c)) return c;
      break;  // more items per thread take one block
    }
  }
  // Rows past the compact block (N > 14336: its 448 threads at 32 elements each) at larger
  // batches: split over a cluster at four groups per thread as well, where that takes at most
  // kActQuantMaxClusterBlocks blocks (N <= 57344 for 16-bit inputs, 28672 for float32). The wide
  // block they took holds one row an SM by its registers (19-28 warps), and rows past it read
  // their inputs twice; the cluster's blocks keep y in registers and several rows an SM.
  // Measured on an H100 with 256-thread blocks of uncapped registers (bench/NOTES.md, "fp8
  // act_and_mul v19"), % of copy at M = 16384 / 2048, silu bf16: N = 18944 65.5 -> 86.2 / 62.7
  // -> 78.4, 28672 80.2 -> 90.4 / 73.7 -> 84.8; float32 N = 18944 75.9 -> 98.6. On an H200 with
  // the capped blocks (v20), against the wide block / two passes, time at M = 16384: silu N = 18944
  // 0.73x, 28672 0.78x, 40960 0.62x, 49152 0.63x; gelu 18944 0.78x; at M = 1 (graph) N = 40960
  // 2.8 against 12.6 us. Rows that fit the compact block keep it: at N = 14336 two such blocks
  // measured level with it at M >= 2048 (H100: 95.6 against 96.3% of copy; H200: 334 against
  // 342 us) and slower at M = 256 (graph, H200: 7.6 against 6.8 us).
  const ActQuantConfig block = make_act_quant_block_config(shape);
  if (block.items == 0 || block.block_threads > kActQuantCompactThreads) {
    ActQuantConfig c;
    if (make_act_quant_cluster_config(shape, kActQuantClusterMaxItems, &c) && c.grid <= kMaxGrid) {
      return c;
    }
  }
  return block;
}

}  // namespace fusekit::gpu
