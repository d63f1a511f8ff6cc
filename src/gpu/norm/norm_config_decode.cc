// The norm launch heuristic's shapes for decode-size batches (norm_config.h): a row's threads
// split over the blocks of a cluster (NormConfig::split_blocks; LayerNorm's up to twice as many
// rows as SMs too), and the conditions under which a row's outputs may be shared among blocks
// (NormConfig::output_parts) or its threads split.
// choose_norm_config (norm_config.cc) calls take_split_rows last on the registers path. The
// measurements behind the choices are in bench/NOTES.md.
#include <algorithm>

#include "gpu/common/launch_math.h"
#include "gpu/norm/norm_config.h"

namespace fusekit::gpu {
namespace {

// Groups a split row's block holds at most, and the fewest blocks it is split over.
constexpr int64_t kSplitBlockGroups = 256;
constexpr int kSplitMinBlocks = 4;
// LayerNorm's mid-batch split (take_split_rows): over this many blocks, rows of 128 threads up to
// twice as many rows as SMs and rows of 256 up to as many.
constexpr int kLayerMidSplitBlocks = 2;
// Rows of one group a thread (other than the fp8 forms): over this many blocks.
constexpr int kOneGroupSplitBlocks = 2;
constexpr bool layer_mid_split_fits(int threads, int64_t rows, int64_t sm_count) {
  return (threads == 128 && rows <= 2 * sm_count) || (threads == 256 && rows <= sm_count);
}
// Long rows at mid batches (take_split_rows): rows of at least this many groups, in blocks of
// this many threads.
constexpr int64_t kLongMidSplitMinGroups = 1024;
constexpr int kLongMidSplitBlockThreads = 128;
// How many blocks a long row splits into at a mid batch of `rows` on `sm_count` SMs, 0 for none
// (take_split_rows): blocks of 128 threads (`blocks_of_128` of them: two for rows of 1024
// groups, four past that; RMSNorm alone's pairs of 1024 groups pass their two blocks of 256
// here) up to five rows for every four SMs, LayerNorm's rows in two blocks up to
// two rows an SM, LayerNorm alone's in four up to one; past five rows for four SMs, up to two rows
// an SM, RMSNorm alone's rows of more than 1024 groups and the fused RMSNorm's of 2048 in two
// blocks of 256 threads, and RMSNorm's rows of 769-1023 groups in two of 128.
constexpr int long_mid_split_blocks(bool layer, bool adds_residual, int64_t groups,
                                    int blocks_of_128, int64_t rows, int64_t sm_count) {
  if (layer) {
    const int64_t max_rows = blocks_of_128 == 2 ? 2 * sm_count
                             : adds_residual    ? 5 * sm_count / 4
                                                : sm_count;
    return rows <= max_rows ? blocks_of_128 : 0;
  }
  if (rows <= 5 * sm_count / 4) return blocks_of_128;
  const bool wider = groups > kLongMidSplitMinGroups &&
                     (!adds_residual || groups == int64_t{kNormMaxItems} * kNormMaxThreads);
  const bool near_long = groups < kLongMidSplitMinGroups;  // rms_near_long_rows
  return (wider || near_long) && rows <= 2 * sm_count ? 2 : 0;
}
// RMSNorm's rows of kNearLongMinGroups-1023 groups (N = 6152-8184 bf16: 256 threads, four
// groups a thread, the last partly past the row), alone and with the add, which split at mid
// batches as the long rows do, in two blocks of 128 threads, up to two rows an SM.
constexpr int64_t kNearLongMinGroups = 769;
constexpr bool rms_near_long_rows(const NormShape& shape, int64_t groups) {
  return !shape.layer && groups >= kNearLongMinGroups && groups < kLongMidSplitMinGroups;
}
// RMSNorm alone's rows of kLongMidSplitMinGroups groups (N = 8192 bf16) split at mid batches on
// two groups a thread rather than four: 512 threads, in two blocks of 256.
constexpr bool rms_alone_pairs_split(const NormShape& shape, int64_t groups) {
  return !shape.layer && !shape.adds_residual && groups == kLongMidSplitMinGroups;
}

}  // namespace

// Rows split over a cluster's blocks (NormConfig::split_blocks) where a grid holds few rows: each
// SM then moves a quarter or an eighth of a row, the in-place forms too, where one block a row
// left most SMs idle and NormConfig::output_parts (outputs apart only) shared the writes but not
// the reads. Rows of 2^k groups take two groups per thread (four where that passes 512 threads:
// N = 16384 bf16); the others the fewest threads, 128 or more, that hold them in at most four
// (N = 1536 bf16: 128 x 2, the last group of each thread partly past the row; 3072: 128 x 3;
// 3584: 128 x 4; 4608: 256 x 3). Blocks of at most kSplitBlockGroups groups and at least
// kSplitMinBlocks of them: N = 2048 in 4 blocks of 32 threads, 4096 in 4 of 64, 8192 in 4 of
// 128, 16384 in 8 of 64, 3072 in 4 of 32, 12288 in 8 of 64. Taken at grids of at most half as
// many rows as SMs, except RMSNorm alone on rows of 2^k groups below N = 16384 (there its shared
// outputs measured level or faster: rms_norm [1, 4096] 0.94 us against 1.01, [32, 8192] 1.29
// against 1.35).
// Measured on an H200, graph replay with PDL (bench/NOTES.md, "Norm v35"): fused_add_rms_norm in
// place [1, 4096] 1.26 -> 1.01 us, [1, 8192] 1.75 -> 1.12, [1, 16384] 2.61 -> 1.34, [32, 16384]
// 2.91 -> 1.84, [96, 16384] 4.91 -> 3.22, [128, 16384] 3.92 -> 3.59; fused_add_layer_norm out of
// place [1, 8192] 1.64 -> 1.35; rms_norm [1, 16384] 1.50 -> 1.21; fused_add_rms_norm_quant_fp8
// [1, 16384] 3.34 -> 1.86. There, with the trigger at the start, not past a row per SM
// (fused_add_rms_norm [200, 8192] 2.95 against 3.14 at best, [256, 16384] 6.56 against 6.95), nor
// at [96-132, 8192 and 4096], where it measured level or slower, nor for the fp8 output at
// [128, 16384] (4.51 against 4.47-4.75).
// And LayerNorm (either form) past half as many rows as SMs, on rows that are not 2^k groups, in
// two blocks with the next launch allowed at the start: rows of 128 threads (N = 1032-4088 bf16)
// up to twice as many rows as SMs, rows of 256 (4104-8184) up to as many. There the split
// kernels, which hold the weight and bias beside the row (kSharedRowsHoldAffine,
// norm_kernel.cuh), replayed in 0.72-0.87x the time of the best launch on one block a row
// (H200, bench/NOTES.md "Norm v41"): layer_norm [128, 1536 / 2560 / 3584] 2.09 / 2.24 / 2.46 ->
// 1.69 / 1.79 / 1.85 us, [256, same] 2.24 / 2.53 / 2.79 -> 1.94 / 2.14 / 2.30, [128, 5120 /
// 7168] 2.58 / 2.89 -> 2.27 / 2.44; fused_add_layer_norm [256, 1536 / 2560 / 3584] 2.49 / 2.85 /
// 3.29 -> 2.11 / 2.34 / 2.66, [128, 5120 / 7168] 2.90 / 3.46 -> 2.46 / 2.80. Rows of 256 threads
// at 256 rows measured 0.89-1.10x (N = 4608-7168), at M = 512 every split lost (up to 1.3x), and
// rows of 2^k groups lost at 128 and 256 rows (layer_norm [128, 2048] 1.53 against 1.24).
// Rows of 65-127 groups (N = 520-1016 bf16 but 1024: 640, 768, 896, 960) hold one group a thread
// on 128 threads, in two blocks of 64 (the fp8 forms in four of 32, some holding no group), at
// decode sizes, and LayerNorm's, as its other rows of 128 threads, up to twice as many rows as
// SMs; RMSNorm's fp8 form alone keeps its warp of three exact groups at 768. Where they took one
// block of 128 threads (or 32 x 3, 16 x 5), they replayed in 0.70-0.84x the time (H200,
// bench/NOTES.md "Norm v45"): at M = 1 rms_norm 1.23 -> 0.99 us, fused_add_rms_norm 1.40 -> 1.00,
// layer_norm 1.69 -> 1.26, its fused add 1.92 -> 1.35, rms_norm_quant_fp8 [1, 896] 1.57 -> 1.23;
// at M = 32 0.72-0.84x; layer_norm [128, 896] 1.92 -> 1.52. In four blocks the plain forms
// measured up to 0.1 us slower at M = 32, the fp8 forms 0.02-0.06 faster; rms_norm_quant_fp8
// [1, 768] 1.15 on its warp against 1.23. LayerNorm at M = 192 and 256 against its launch there
// (one warp of three groups at 768, 64 x 2 or 128 x 1 elsewhere; "Norm v46"): 0.70-0.91x,
// layer_norm [256, 768] 1.97 -> 1.79 us, [256, 896] 2.13 -> 1.70, its fused add 2.44 -> 1.82.
// (Where such a batch fills the GPU, choose_norm_config now gives it one block of 128 threads a
// row instead, in a kernel of fewer registers: "Norm v47".) LayerNorm alone's plain rows of three
// groups on 64 threads (layer_plain_three_rows) replayed faster on one block a row than split at
// every batch, once those had plain kernels (H200, "Norm v59" and "Norm v60"): layer_norm
// [256, 1152 / 1280 / 1536] 1.61 / 1.65 / 1.65 us against 1.91 / 1.93 / 1.91 split in pairs,
// [1, 1152] 1.31 against 1.49 in four blocks, [132, 1152] 1.50 against 1.67 in two.
// Long rows (1024 groups or more: N >= 8192 bf16; no fp8 output) past those grids too, in blocks
// of 128 threads (rows of 2^k groups on four groups a thread: 8192 in two blocks, 16384 in four;
// 12288 as 128 x 3 in four), the next launch triggered after the writes: up to five rows for
// every four SMs, LayerNorm's rows in two blocks up to two rows an SM, LayerNorm alone's in four
// up to one. One block a row leaves such a grid's SMs unevenly loaded (160 rows on 132 SMs: 28
// of them hold two rows, the rest one, and the grid lasts two rows' time); 128-thread blocks
// spread it about evenly. Graph replay on an H100 against one block a row (bench/NOTES.md,
// "Mid batches' split rows with the late trigger"): fused_add_layer_norm [136, 8192] 3.82 ->
// 2.80 us, [160, 16384] 6.42 -> 5.35, [256, 8192] 4.00 -> 3.62; fused_add_rms_norm [160, 12288]
// 4.54 -> 3.35, [136, 16384] 5.18 -> 3.94; rms_norm [136, 16384] 3.42 -> 2.80; layer_norm
// [100, 16384] 3.35 -> 2.91, [256, 8192] 3.19 -> 2.95. Past those bounds split rows lost up to
// 1.3x (LayerNorm at N = 12288 from 200 rows; LayerNorm alone in four blocks past a row an SM,
// where its one block a row, two blocks an SM, is fast: layer_norm [136, 16384] 3.89 us against
// 4.14 split), and the fused RMSNorm's rows of 1024 groups from 200 rows 1.03-1.06x (their pairs
// of rows a block, norm_config.cc, replay as fast); RMSNorm alone's rows of 1024 groups read
// level. Past five rows for four SMs, up to two rows an SM, RMSNorm alone's rows of more than 1024
// groups and the fused RMSNorm's of 2048 (whose one block a row loads the weight at the output)
// split in two blocks of 256 threads. Graph replay on an H100 against one block a row (bench/
// NOTES.md, "RMSNorm's wider rows split in two past five rows for four SMs, measured"): rms_norm
// [166-256, 11008-16384] 0.85-0.97x (3.47 -> 3.20 us at [166, 16384]); fused_add_rms_norm
// [166 / 200 / 232 / 256, 16384] 5.48 / 6.21 / 7.13 / 7.36 -> 4.71 / 5.21 / 6.73 / 7.08 us (out
// of place 0.83-0.93x); fp16 alike (0.83-0.97x). At 264 rows (cold L2) level.
// RMSNorm alone's rows of exactly 1024 groups keep two groups a thread there (512 threads, in two
// blocks of 256), and the fused RMSNorm's rows of 769-1023 groups (256 x 4, the last group partly
// past the row) split as the long rows do, in two blocks of 128, up to two rows an SM. Swept on
// an H100 (graph replay; bench/NOTES.md "Two more mid-batch splits"): rms_norm [136 / 160, 8192]
// 1.98 / 2.09 us against 2.12 / 2.21 on 256 x 4 in two blocks, level at 100 rows;
// fused_add_rms_norm [133 / 166 / 200 / 232, 7168] 2.31 / 2.48 / 2.78 / 3.08 against 2.83 /
// 3.09 / 3.09 / 3.35 on one block a row, level at 256 (out of place alike). A/B against the
// launches before (H100, NOTES.md "Mid-batch launches, measured"): rms_norm [136, 8192] 2.10 ->
// 1.99 us (fp16 2.08 -> 1.98), level at 100; fused_add_rms_norm against pairs of rows a block
// [133 / 200 / 256, 7168] 3.42 / 5.06 / 3.98 -> 2.26 / 2.78 / 3.58, N = 6400 and 7936 alike
// (0.53-0.82x), out of place 0.62-0.85x, 0.76-0.81x at 67 rows against one block a row, fp16
// 0.54-0.56x. RMSNorm alone's rows of 769-1023 groups split alike; A/B against one block a row
// (H100, NOTES.md "RMSNorm alone's near-long rows split in two, measured"): rms_norm
// [67 / 133 / 232 / 256, 6400] 1.78 / 2.11 / 2.58 / 2.74 -> 1.56 / 1.85 / 2.23 / 2.54 us,
// 0.86-0.95x at 67-256 rows of N = 6400-7936, fp16 0.89-0.90x, cold at 264 rows 0.96-0.98x.
// Returns false where the shape has no such kernel or the GPU no cluster that large.
bool take_split_rows(const NormShape& shape, NormConfig* config) {
  const int64_t groups = ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
  const int64_t sm_count = shape.sm_count;
  const bool power_of_two_row = next_pow2(groups) == groups;
  const bool longest_rows = groups == static_cast<int64_t>(kNormMaxItems) * kNormMaxThreads;
  const bool small_grid = 2 * shape.rows <= sm_count;
  const bool shared_outputs_hold = power_of_two_row && !shape.layer && !shape.adds_residual &&
                                   !shape.fp8_output && !longest_rows;
  // Long rows past the decode grids (not the fp8 forms), on four groups a thread where the row is
  // 2^k groups, in as many blocks as long_mid_split_blocks gives (none: no split).
  const bool long_mid_rows =
      !small_grid && !shape.fp8_output &&
      (groups >= kLongMidSplitMinGroups || rms_near_long_rows(shape, groups));
  const bool rms_pairs = long_mid_rows && rms_alone_pairs_split(shape, groups);
  const bool layer_mid_rows = shape.layer && !small_grid && shape.rows <= 2 * sm_count &&
                              !power_of_two_row && !long_mid_rows;
  if (!((small_grid && !shared_outputs_hold) || layer_mid_rows || long_mid_rows) ||
      !shape.split_rows_built || !shape.whole_groups) {
    return false;
  }
  int threads = 0;
  int items = 0;
  if (power_of_two_row) {
    items = longest_rows || (long_mid_rows && !rms_pairs) ? kNormMaxItems : 2;
    threads = static_cast<int>(groups / items);
  } else {
    threads = static_cast<int>(
        std::max<int64_t>(kNormSplitShortThreads, next_pow2(groups) / kNormMaxItems));
    items = static_cast<int>(ceil_div(groups, static_cast<int64_t>(threads)));
  }
  if (layer_mid_rows && !layer_mid_split_fits(threads, shape.rows, sm_count)) return false;
  // Blocks of 128 threads, but RMSNorm alone's pairs of 1024 groups in blocks of 256.
  const int long_block_threads = (rms_pairs ? 2 : 1) * kLongMidSplitBlockThreads;
  const int long_mid_blocks =
      long_mid_rows ? long_mid_split_blocks(shape.layer, shape.adds_residual, groups,
                                            threads / long_block_threads, shape.rows, sm_count)
                    : 0;
  if (long_mid_rows && long_mid_blocks == 0) return false;
  // LayerNorm alone's plain rows of three groups on 64 threads keep one block a row.
  if (layer_plain_three_rows(shape) && config->items == 3 && config->rows_per_block == 1) {
    return false;
  }
  // Rows of one group a thread (65-127 groups on 128 threads): RMSNorm's fp8 form alone keeps its
  // warp of three exact groups (768 bf16), which measured faster.
  const bool one_group_rows = !power_of_two_row && items == 1;
  if (one_group_rows && shape.fp8_output && !shape.adds_residual && config->items == 3 &&
      static_cast<int64_t>(config->threads_per_row) * 3 == groups) {
    return false;
  }
  NormConfig split;
  if (!make_norm_config(shape, NormConfig::Path::kRegisters, threads, items, &split)) {
    return false;
  }
  split.plain = config->plain;
  split.trigger_after_writes = long_mid_rows;
  const int64_t blocks_of_groups = next_pow2(ceil_div(groups, kSplitBlockGroups));
  // One-group rows in two blocks of 64 threads (in four of 32 the fp8 forms, whose max|y| and
  // codes follow the sum).
  const int64_t wanted = one_group_rows && !shape.fp8_output ? kOneGroupSplitBlocks
                         : small_grid ? std::max<int64_t>(kSplitMinBlocks, blocks_of_groups)
                         : layer_mid_rows ? kLayerMidSplitBlocks
                         : long_mid_rows  ? long_mid_blocks
                                          : kSplitMinBlocks;
  // Fewer blocks where the GPU's clusters are smaller (split_norm_rows checks every limit).
  for (int blocks = static_cast<int>(std::min<int64_t>(wanted, kNormMaxSplitBlocks)); blocks >= 2;
       blocks /= 2) {
    NormConfig c = split;
    if (split_norm_rows(shape, blocks, &c)) {
      *config = c;
      return true;
    }
  }
  return false;
}

bool norm_rows_shareable(const NormShape& shape, const NormConfig& config) {
  const int64_t groups = ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
  return config.path == NormConfig::Path::kRegisters && config.rows_per_block == 1 &&
         config.split_blocks == 1 &&
         (config.items == 1 || config.items == 2 || config.items == 4) &&
         static_cast<int64_t>(config.threads_per_row) * config.items == groups &&
         shape.whole_groups && !config.weight_at_output && shape.outputs_apart &&
         !(shape.fp8_output && shape.adds_residual);
}

bool split_norm_rows(const NormShape& shape, int blocks, NormConfig* config) {
  const NormConfig& c = *config;
  const int64_t groups = ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
  const int tpr = c.threads_per_row;
  const bool fits = c.path == NormConfig::Path::kRegisters && c.rows_per_block == 1 &&
                    split_rows_cover(groups, tpr, c.items) && shape.whole_groups &&
                    !c.weight_at_output && c.output_parts == 1 && c.split_blocks == 1;
  if (!fits || !shape.split_rows_built || blocks < 2 || blocks > kNormMaxSplitBlocks ||
      (blocks & (blocks - 1)) != 0 || blocks > shape.max_cluster_blocks ||
      tpr / blocks < shape.warp_size) {
    return false;
  }
  config->split_blocks = blocks;
  config->block_threads = tpr / blocks;
  // Split rows launch in clusters, whose residency the trigger rule does not model.
  config->trigger_late_where_crowded = false;
  return true;
}

}  // namespace fusekit::gpu
