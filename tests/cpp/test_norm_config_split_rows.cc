// The norm launch heuristic's split rows (NormConfig::split_blocks; plain C++, no GPU needed):
// which decode-size calls take them and in what shape, and that every split it picks is one the
// kernels take (split_norm_rows; launch_norm_kernel refuses the rest).
#include <cstdint>
#include <string>

#include "gpu/norm/norm_config.h"
#include "gtest/gtest.h"

namespace fusekit::gpu {
namespace {

// bf16 tensors of one dtype, whole aligned groups, 132 SMs with portable clusters (an H100).
NormShape decode_shape(bool layer, bool add, bool fp8, bool apart) {
  NormShape s;
  s.max_cluster_blocks = 8;
  s.max_smem_bytes = 227 * 1024;
  s.whole_groups = true;
  s.split_rows_built = s.fixed_threads_built = true;
  s.layer = layer;
  s.adds_residual = add;
  s.fp8_output = fp8;
  s.outputs_apart = apart;
  s.plain_form = !fp8;
  s.min_blocks_per_sm = add && !layer ? 1 : 2;
  return s;
}

// One expected split: the form, the shape, and the launch (split 1: not split).
struct SplitCase {
  bool layer, add, fp8, apart;
  int64_t cols, rows;
  int split, threads_per_row, items;
  bool trigger_late;
};

void expect_split(const SplitCase& k) {
  NormShape s = decode_shape(k.layer, k.add, k.fp8, k.apart);
  s.cols = k.cols;
  s.rows = k.rows;
  const NormConfig c = choose_norm_config(s);
  SCOPED_TRACE(std::string(k.layer ? "layer" : "rms") + (k.add ? "+add" : "") +
               (k.fp8 ? " fp8" : "") + (k.apart ? " apart" : " in place") +
               " n=" + std::to_string(k.cols) + " m=" + std::to_string(k.rows) + " " +
               c.to_string());
  ASSERT_EQ(c.path, NormConfig::Path::kRegisters);
  EXPECT_EQ(c.split_blocks, k.split);
  if (k.split == 1) return;
  EXPECT_EQ(c.threads_per_row, k.threads_per_row);
  EXPECT_EQ(c.items, k.items);
  EXPECT_EQ(c.block_threads * c.split_blocks, c.threads_per_row);
  EXPECT_EQ(c.rows_per_block, 1);
  EXPECT_EQ(c.output_parts, 1);
  EXPECT_FALSE(c.weight_at_output);
  EXPECT_EQ(c.trigger_after_writes, k.trigger_late);
  EXPECT_EQ(c.plain, s.plain_form);
}

TEST(NormConfig, DecodeRowsSplitOverClusterBlocks) {
  using Case = SplitCase;
  const Case cases[] = {
      // The fused add in place: two groups per thread in 4 blocks of at most 256 groups, four
      // at N = 16384 in 8; up to half as many rows as SMs.
      {false, true, false, false, 2048, 1, 4, 128, 2, false},
      {false, true, false, false, 4096, 1, 4, 256, 2, false},
      {false, true, false, false, 8192, 1, 4, 512, 2, false},
      {false, true, false, false, 16384, 1, 8, 512, 4, false},
      {false, true, false, false, 4096, 66, 4, 256, 2, false},
      {false, true, false, false, 16384, 66, 8, 512, 4, false},
      {false, true, false, false, 4096, 67, 1, 0, 0, false},
      {false, true, false, false, 4096, 96, 1, 0, 0, false},
      // Apart too, where the outputs could be shared instead.
      {false, true, false, true, 8192, 1, 4, 512, 2, false},
      {false, true, false, true, 16384, 32, 8, 512, 4, false},
      // LayerNorm alone and with the add.
      {true, false, false, true, 8192, 1, 4, 512, 2, false},
      {true, true, false, true, 4096, 1, 4, 256, 2, false},
      {true, true, false, false, 8192, 32, 4, 512, 2, false},
      {true, true, false, false, 4096, 96, 1, 0, 0, false},
      // RMSNorm alone keeps its shared outputs below N = 16384.
      {false, false, false, true, 4096, 1, 1, 0, 0, false},
      {false, false, false, true, 8192, 32, 1, 0, 0, false},
      {false, false, false, true, 16384, 1, 8, 512, 4, false},
      // The fp8 outputs, alone and with the add, at small grids only.
      {false, false, true, true, 8192, 1, 4, 512, 2, false},
      {false, true, true, true, 4096, 1, 4, 256, 2, false},
      {false, true, true, true, 16384, 1, 8, 512, 4, false},
      {false, true, true, true, 16384, 96, 1, 0, 0, false},
      // Rows of other group counts: the fewest threads (a power of two) that hold them in three
      // or four groups each, exactly (3072, 6144, 12288) or with each thread's last group partly
      // past the row (2560, 3584, 4608, 5120, 7168, 14336), RMSNorm alone too (no shared outputs
      // there); at M = 32 too where the batch counts as filling the GPU (5120, 6144).
      {false, false, false, true, 3072, 1, 4, 128, 3, false},
      {false, false, false, true, 2560, 32, 4, 128, 3, false},
      {false, true, false, false, 3584, 1, 4, 128, 4, false},
      {false, true, false, false, 4608, 1, 4, 256, 3, false},
      {false, true, false, false, 5120, 32, 4, 256, 3, false},
      {false, true, false, false, 5120, 66, 4, 256, 3, false},
      {false, true, false, false, 5120, 67, 1, 0, 0, false},
      {true, false, false, true, 6144, 32, 4, 256, 3, false},
      {true, true, false, false, 7168, 1, 4, 256, 4, false},
      {false, false, true, true, 12288, 1, 8, 512, 3, false},
      {false, true, true, true, 14336, 1, 8, 512, 4, false},
      // ... and on 128 threads two (1536: 192 groups), or one (65-127 groups: 520-1016) in two
      // blocks, every form, RMSNorm's three-group rows too (768: 32 x 3 unsplit), but LayerNorm
      // alone's plain rows of three groups on 64 threads (1032-1536; layer_plain_three_rows), ...
      {false, true, false, false, 1536, 1, 4, 128, 2, false},
      {true, true, false, true, 1536, 32, 4, 128, 2, false},
      {true, false, false, true, 1792, 32, 4, 128, 2, false},
      {true, false, false, true, 1536, 32, 1, 0, 0, false},
      {true, false, false, true, 1152, 1, 1, 0, 0, false},
      {false, true, false, false, 896, 1, 2, 128, 1, false},
      {false, false, false, true, 768, 32, 2, 128, 1, false},
      {true, false, false, true, 520, 1, 2, 128, 1, false},
      {true, true, false, false, 1016, 66, 2, 128, 1, false},
      {false, true, false, false, 896, 67, 1, 0, 0, false},
      // ... in four the fp8 forms, but for RMSNorm's alone on its warp of three exact groups
      // (768) ...
      {false, true, true, true, 960, 1, 4, 128, 1, false},
      {false, true, true, true, 768, 32, 4, 128, 1, false},
      {false, false, true, true, 640, 32, 4, 128, 1, false},
      {false, false, true, true, 768, 1, 1, 0, 0, false},
      // ... and LayerNorm's up to twice as many rows as SMs, as its other rows of 128 threads,
      // where the batch does not fill the GPU (past it one block a row, one warp or pairs).
      {true, false, false, true, 768, 67, 2, 128, 1, false},
      {true, true, false, false, 896, 132, 2, 128, 1, false},
      {true, false, false, true, 768, 133, 2, 128, 1, false},
      {true, true, false, false, 640, 200, 2, 128, 1, false},
      {true, true, false, false, 896, 150, 2, 128, 1, false},
      {true, true, false, false, 896, 151, 1, 0, 0, false},
      {true, true, false, false, 896, 264, 1, 0, 0, false},
      {true, false, false, true, 960, 265, 1, 0, 0, false},
      {true, true, false, true, 768, 265, 1, 0, 0, false},
      // Rows that no split kernel covers: pairs on fewer than 128 threads (N = 1024), and rows of
      // at most 64 groups (512, 504).
      {false, true, false, false, 1024, 1, 1, 0, 0, false},
      {false, true, false, false, 512, 1, 1, 0, 0, false},
      {true, false, false, true, 504, 1, 1, 0, 0, false},
  };
  for (const Case& k : cases) expect_split(k);
}

// LayerNorm past the decode grids: rows that are not 2^k groups split over two blocks, the next
// launch allowed at the start, on 128 threads up to twice as many rows as SMs and on 256 up to
// as many; not rows of 2^k groups, not rows of 512 threads, not RMSNorm, not LayerNorm alone's
// plain rows of three groups on 64 threads.
TEST(NormConfig, LayerNormMidBatchRowsSplitOverTwoBlocks) {
  using Case = SplitCase;
  const Case cases[] = {
      {true, true, false, true, 1536, 67, 2, 128, 2, false},
      {true, false, false, true, 2040, 100, 2, 128, 2, false},
      {true, false, false, true, 1536, 67, 1, 0, 0, false},
      {true, false, false, true, 1032, 132, 1, 0, 0, false},
      {true, true, false, false, 2560, 128, 2, 128, 3, false},
      {true, false, false, false, 3072, 200, 2, 128, 3, false},
      {true, true, false, true, 3584, 264, 2, 128, 4, false},
      {true, false, false, true, 3584, 265, 1, 0, 0, false},
      {true, true, false, false, 1280, 256, 2, 128, 2, false},
      {true, false, false, true, 5120, 132, 2, 256, 3, false},
      {true, true, false, false, 7168, 100, 2, 256, 4, false},
      {true, false, false, true, 4608, 133, 1, 0, 0, false},
      {true, true, false, false, 7168, 256, 1, 0, 0, false},
      {true, false, false, true, 5120, 133, 1, 0, 0, false},
      {true, false, false, true, 2048, 128, 1, 0, 0, false},
      {true, true, false, false, 4096, 256, 1, 0, 0, false},
      {false, false, false, true, 2560, 128, 1, 0, 0, false},
      {false, true, false, false, 3584, 256, 1, 0, 0, false},
  };
  for (const Case& k : cases) expect_split(k);
  // Only where the kernels are (no float32 or mixed dtypes here, no clusters on HIP).
  NormShape s = decode_shape(true, false, false, true);
  s.split_rows_built = false;
  s.cols = 2560;
  s.rows = 128;
  EXPECT_EQ(choose_norm_config(s).split_blocks, 1);
}

// Rows of 1024 groups or more (N >= 8192 bf16) past the decode grids: in blocks of 128 threads,
// four groups a thread where the row is 2^k groups, the trigger after the writes; up to five rows
// for every four SMs (165 of 132), LayerNorm's rows in two blocks up to two rows an SM, LayerNorm
// alone's in four up to one; RMSNorm's wider rows past five rows for four SMs in two blocks; not
// the fp8 forms. RMSNorm alone's rows of 1024 groups as pairs on 512 threads in two blocks of
// 256; RMSNorm's rows of 769-1023 groups (256 x 4), alone and with the add, in two blocks up to
// two rows an SM.
TEST(NormConfig, LongRowsAtMidBatchesSplitIntoBlocksOf128Threads) {
  using Case = SplitCase;
  const Case cases[] = {
      // RMSNorm, alone and with the add, in place or apart.
      {false, true, false, false, 8192, 67, 2, 256, 4, true},
      {false, true, false, false, 8192, 165, 2, 256, 4, true},
      {false, true, false, false, 8192, 166, 1, 0, 0, false},
      {false, true, false, true, 12288, 160, 4, 512, 3, true},
      {false, true, false, false, 16384, 133, 4, 512, 4, true},
      {false, false, false, true, 16384, 165, 4, 512, 4, true},
      // RMSNorm alone's rows of 1024 groups: pairs, two blocks of 256 threads.
      {false, false, false, true, 8192, 67, 2, 512, 2, true},
      {false, false, false, false, 8192, 165, 2, 512, 2, true},
      {false, false, false, true, 8192, 166, 1, 0, 0, false},
      // ... and past that up to two rows an SM, in two blocks of 256 threads, RMSNorm alone's rows
      // of more than 1024 groups and the fused add's of 2048.
      {false, false, false, true, 12288, 200, 2, 512, 3, true},
      {false, false, false, true, 14336, 264, 2, 512, 4, true},
      {false, false, false, true, 16384, 265, 1, 0, 0, false},
      {false, false, false, true, 8192, 200, 1, 0, 0, false},
      {false, true, false, false, 16384, 166, 2, 512, 4, true},
      {false, true, false, true, 16384, 264, 2, 512, 4, true},
      {false, true, false, false, 16384, 265, 1, 0, 0, false},
      {false, true, false, false, 12288, 166, 1, 0, 0, false},
      {false, true, false, true, 14336, 200, 1, 0, 0, false},
      // Rows of other group counts past 1024: 512 threads of three or four, in four blocks.
      {false, true, false, false, 11008, 136, 4, 512, 3, true},
      {false, false, false, true, 14336, 120, 4, 512, 4, true},
      // LayerNorm's fused add: in two blocks up to two rows an SM, in four up to 165 rows.
      {true, true, false, false, 8192, 264, 2, 256, 4, true},
      {true, true, false, true, 8192, 265, 1, 0, 0, false},
      {true, true, false, false, 16384, 165, 4, 512, 4, true},
      {true, true, false, true, 12288, 166, 1, 0, 0, false},
      // LayerNorm alone: in two blocks up to two rows an SM, in four up to one.
      {true, false, false, true, 8192, 200, 2, 256, 4, true},
      {true, false, false, true, 12288, 132, 4, 512, 3, true},
      {true, false, false, true, 12288, 133, 1, 0, 0, false},
      {true, false, false, true, 16384, 100, 4, 512, 4, true},
      {true, false, false, true, 16384, 136, 1, 0, 0, false},
      // RMSNorm's rows of 769-1023 groups (N = 6152-8184): 256 x 4, the last group partly past
      // the row, in two blocks up to two rows an SM, with the add in place or apart, and alone.
      {false, true, false, false, 7168, 67, 2, 256, 4, true},
      {false, true, false, true, 7168, 200, 2, 256, 4, true},
      {false, true, false, false, 6152, 133, 2, 256, 4, true},
      {false, true, false, true, 8184, 264, 2, 256, 4, true},
      {false, true, false, false, 7936, 265, 1, 0, 0, false},
      {false, true, false, false, 6144, 200, 1, 0, 0, false},
      {false, false, false, true, 7168, 200, 2, 256, 4, true},
      {false, false, false, true, 6400, 67, 2, 256, 4, true},
      {false, false, false, true, 7936, 264, 2, 256, 4, true},
      {false, false, false, true, 7936, 265, 1, 0, 0, false},
      // Not the fp8 forms, not LayerNorm's rows under 1024 groups (those keep their rules
      // above).
      {false, true, true, true, 16384, 100, 1, 0, 0, false},
      {false, false, true, true, 8192, 100, 1, 0, 0, false},
      {false, true, true, true, 7168, 200, 1, 0, 0, false},
      {false, false, true, true, 7168, 200, 1, 0, 0, false},
      {true, true, false, false, 7168, 200, 1, 0, 0, false},
  };
  for (const Case& k : cases) expect_split(k);
  // Only where the kernels are and the groups are whole.
  NormShape s = decode_shape(false, true, false, false);
  s.cols = 16384;
  s.rows = 150;
  s.split_rows_built = false;
  EXPECT_EQ(choose_norm_config(s).split_blocks, 1);
  s.split_rows_built = true;
  s.whole_groups = false;
  EXPECT_EQ(choose_norm_config(s).split_blocks, 1);
}

// Rows of 65-127 whole groups at batches that fill the GPU (from M = 151 at N = 896 on 132 SMs):
// one group a thread on 128 threads, one row a block, unsplit (the kernel that tests each thread's
// only group), up to twice as many rows as SMs, LayerNorm's up to eight times and its fused add's
// rows of 112 groups or more (N = 896-1016) at every batch; not RMSNorm's rows that three
// or five groups a thread cover exactly, nor where the fixed-thread kernels are not built or the
// groups are not whole.
TEST(NormConfig, OneGroupRowsTakeABlockEachAtBatchesThatFillTheGpu) {
  struct Case {
    bool layer, add, fp8;
    int64_t cols, rows;
    bool one_group;
  };
  const Case cases[] = {
      {false, true, false, 896, 151, true},     {false, true, false, 896, 264, true},
      {false, true, false, 896, 265, false},    {false, false, false, 1016, 200, true},
      {false, true, true, 960, 256, true},      {false, false, true, 896, 256, true},
      {false, false, false, 768, 256, false},   {false, true, false, 640, 256, false},
      {true, false, false, 640, 256, true},     {true, true, false, 768, 1056, true},
      {true, false, false, 896, 1057, false},   {true, true, false, 1024, 512, false},
      {true, true, false, 896, 1057, true},     {true, true, false, 1016, 65536, true},
      {true, true, false, 888, 1057, false},    {true, true, false, 776, 4096, false},
  };
  for (const Case& k : cases) {
    NormShape s = decode_shape(k.layer, k.add, k.fp8, true);
    s.cols = k.cols;
    s.rows = k.rows;
    const NormConfig c = choose_norm_config(s);
    SCOPED_TRACE(std::string(k.layer ? "layer" : "rms") + (k.add ? "+add" : "") +
                 (k.fp8 ? " fp8" : "") + " n=" + std::to_string(k.cols) +
                 " m=" + std::to_string(k.rows) + " " + c.to_string());
    const bool one_group = c.path == NormConfig::Path::kRegisters && c.threads_per_row == 128 &&
                           c.items == 1 && c.rows_per_block == 1 && c.split_blocks == 1 &&
                           c.output_parts == 1;
    EXPECT_EQ(one_group, k.one_group);
    if (one_group) EXPECT_EQ(c.plain, s.plain_form && k.rows <= 2 * s.sm_count);
  }
  NormShape s = decode_shape(false, true, false, true);
  s.cols = 896;
  s.rows = 256;
  s.fixed_threads_built = s.split_rows_built = false;  // float32 or mixed dtypes
  EXPECT_NE(choose_norm_config(s).items, 1);
  s = decode_shape(true, false, false, true);
  s.cols = 896;
  s.rows = 256;
  s.whole_groups = false;
  s.narrow_accesses = true;
  EXPECT_NE(choose_norm_config(s).items, 1);
}

// Where the GPU's clusters are smaller the split takes fewer blocks; without clusters, without
// the kernels (float32 or mixed dtypes), without whole aligned groups, or at wave 64 with blocks
// under a wave, rows are not split.
TEST(NormConfig, SplitRowsNeedTheirKernelsAndClusters) {
  const NormShape add = decode_shape(false, true, false, false);
  auto split_of = [](NormShape s, int64_t cols) {
    s.cols = cols;
    s.rows = 1;
    return choose_norm_config(s).split_blocks;
  };
  NormShape four = add;
  four.max_cluster_blocks = 4;
  EXPECT_EQ(split_of(four, 16384), 4);
  NormShape none = add;
  none.max_cluster_blocks = 1;
  EXPECT_EQ(split_of(none, 16384), 1);
  NormShape not_built = add;
  not_built.split_rows_built = false;
  EXPECT_EQ(split_of(not_built, 8192), 1);
  NormShape unaligned = add;
  unaligned.whole_groups = false;
  unaligned.narrow_accesses = true;
  EXPECT_EQ(split_of(unaligned, 8192), 1);
  NormShape wave64 = add;
  wave64.warp_size = 64;
  EXPECT_EQ(split_of(wave64, 4096), 4);  // 4 blocks of 64 threads
  EXPECT_EQ(split_of(wave64, 2048), 2);  // 2 of 64 rather than 4 of 32
  // A split row shares no outputs (the launch refuses both at once), its one-block row may.
  NormShape apart = decode_shape(false, true, false, true);
  apart.cols = 8192;
  apart.rows = 1;
  const NormConfig split = choose_norm_config(apart);
  ASSERT_EQ(split.split_blocks, 4);
  EXPECT_FALSE(norm_rows_shareable(apart, split));
  NormConfig one_block;
  ASSERT_TRUE(make_norm_config(apart, NormConfig::Path::kRegisters, split.threads_per_row,
                               split.items, &one_block));
  EXPECT_TRUE(norm_rows_shareable(apart, one_block));
}

// Every split the heuristic picks, over forms, sizes (2^k groups and others), batches, warp and
// cluster sizes, is one split_norm_rows makes from the same row on one block, and so one the
// kernels take.
TEST(NormConfig, EverySplitIsOneTheKernelsTake) {
  int splits = 0;
  for (const bool layer : {false, true}) {
    for (const bool add : {false, true}) {
      for (const bool fp8 : {false, true}) {
        if (fp8 && layer) continue;
        for (const bool apart : {false, true}) {
          for (int warp : {32, 64}) {
            for (int clusters : {1, 2, 8, 16}) {
              for (int64_t cols : {8, 64, 896, 1024, 1152, 1536, 2048, 2304, 2560, 3072, 3584,
                                   4096, 4608, 5120, 6144, 7168, 8192, 10240, 12288, 14336,
                                   16384, 32768}) {
                for (int64_t rows : {1, 7, 33, 66, 67, 100, 132, 133, 256, 264, 265, 4096}) {
                  NormShape s = decode_shape(layer, add, fp8, apart);
                  s.warp_size = warp;
                  s.max_cluster_blocks = clusters;
                  s.cols = cols;
                  s.rows = rows;
                  const NormConfig c = choose_norm_config(s);
                  if (c.split_blocks == 1) continue;
                  SCOPED_TRACE("n=" + std::to_string(cols) + " m=" + std::to_string(rows) +
                               " warp=" + std::to_string(warp) + " clusters=" +
                               std::to_string(clusters) + " " + c.to_string());
                  ++splits;
                  ASSERT_LE(rows, 2 * s.sm_count);
                  NormConfig one_block;
                  ASSERT_TRUE(make_norm_config(s, NormConfig::Path::kRegisters,
                                               c.threads_per_row, c.items, &one_block));
                  one_block.plain = c.plain;
                  one_block.trigger_after_writes = c.trigger_after_writes;
                  // Split rows leave the trigger to the config: the rule by residency is for
                  // one block a row's threads.
                  one_block.trigger_late_where_crowded = true;
                  NormConfig remade = one_block;
                  ASSERT_TRUE(split_norm_rows(s, c.split_blocks, &remade));
                  EXPECT_FALSE(remade.trigger_late_where_crowded);
                  EXPECT_FALSE(c.trigger_late_where_crowded);
                  EXPECT_EQ(remade.to_string(), c.to_string());
                  EXPECT_EQ(remade.block_threads, c.block_threads);
                  EXPECT_LE(c.split_blocks, clusters);
                  EXPECT_GE(c.block_threads, warp);
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(splits, 0);
}

}  // namespace
}  // namespace fusekit::gpu
