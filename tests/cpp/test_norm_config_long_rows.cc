// The norm launch heuristic's rows past one block's registers (plain C++, no GPU needed): the
// cluster path where the GPU has clusters and a cluster holds the row (in blocks that cover it
// exactly, else slices of 512 groups), the staged path elsewhere, and RMSNorm's fp8 forms on the
// cluster only where its blocks cover the row exactly (bench/NOTES.md, "Norm v29" and "Norm
// v38"). The other shapes are tested in test_norm_config.cc.
#include "gpu/norm/norm_config.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace fusekit::gpu {
namespace {

TEST(NormConfig, LongRowsAreStaged) {
  NormShape s;
  s.cols = 262144;  // beyond 1024 threads x 32 elements
  s.max_smem_bytes = 227 * 1024;
  const NormConfig c = choose_norm_config(s);
  EXPECT_EQ(c.path, NormConfig::Path::kStaged);
  EXPECT_EQ(c.smem_groups * 16, 227 * 1024 / 16 * 16);  // as much of the row as fits
}

TEST(NormConfig, LongRowsSpreadOverAClusterWhereThereAreClusters) {
  NormShape s;
  s.max_cluster_blocks = 16;
  s.max_smem_bytes = 227 * 1024;
  s.cols = 262144;  // 32768 bf16 groups: 16 blocks x 512 threads x 4 groups
  NormConfig c = choose_norm_config(s);
  EXPECT_EQ(c.path, NormConfig::Path::kCluster);
  EXPECT_EQ(c.cluster_blocks, 16);
  EXPECT_EQ(c.items, 4);
  EXPECT_EQ(c.block_threads, kNormClusterThreads);
  s.cols = 32768;  // 4096 groups: 2 blocks
  c = choose_norm_config(s);
  EXPECT_EQ(c.path, NormConfig::Path::kCluster);
  EXPECT_EQ(c.cluster_blocks, 2);
  EXPECT_EQ(c.block_threads, kNormClusterThreads);
  EXPECT_EQ(c.items, 4);
  for (int64_t rows : {1, 3, 1024, 100000}) {  // N alone decides (batch invariance)
    s.rows = rows;
    EXPECT_EQ(choose_norm_config(s).to_string(), c.to_string());
  }
  s.cols = 16384;  // still one block's registers
  EXPECT_EQ(choose_norm_config(s).path, NormConfig::Path::kRegisters);
  s.cols = 262144 + 8;  // beyond what a cluster holds: staged
  EXPECT_EQ(choose_norm_config(s).path, NormConfig::Path::kStaged);
  s.cols = 262144;  // fp32: 65536 groups, also beyond
  s.group_elems = 4;
  s.source_elem_bytes = 4;
  EXPECT_EQ(choose_norm_config(s).path, NormConfig::Path::kStaged);
}

// Rows a cluster's blocks cover exactly take the cluster kernel's plain form where the call is
// plain (a weight and nothing else, 16-bit tensors of one dtype: NormShape::plain_form), at every
// batch; slices (the last block short) and calls that are not plain take the general kernels.
TEST(NormConfig, ExactClusterCoversTakeThePlainKernelsWhereTheCallIsPlain) {
  NormShape s;
  s.max_cluster_blocks = 16;
  s.max_smem_bytes = 227 * 1024;
  for (bool layer : {false, true}) {
    for (bool add : {false, true}) {
      s.layer = layer;
      s.adds_residual = add;
      // 16 x 512, 2 x 512, 5 x 128 and 3 x 256 threads of four groups (bf16).
      for (int64_t cols : {262144, 32768, 20480, 24576}) {
        SCOPED_TRACE("layer=" + std::to_string(layer) + " add=" + std::to_string(add) +
                     " N=" + std::to_string(cols));
        s.cols = cols;
        s.plain_form = true;
        s.rows = 1;
        const NormConfig c = choose_norm_config(s);
        ASSERT_EQ(c.path, NormConfig::Path::kCluster);
        EXPECT_TRUE(cluster_covers_row(s, c));
        EXPECT_TRUE(c.plain);
        EXPECT_NE(c.to_string().find(",plain)"), std::string::npos) << c.to_string();
        for (int64_t rows : {3, 1024, 100000}) {  // N alone decides (batch invariance)
          s.rows = rows;
          EXPECT_EQ(choose_norm_config(s).to_string(), c.to_string());
        }
        s.plain_form = false;
        const NormConfig general = choose_norm_config(s);
        EXPECT_FALSE(general.plain);
        EXPECT_EQ(general.cluster_blocks, c.cluster_blocks);
        EXPECT_EQ(general.block_threads, c.block_threads);
      }
    }
  }
  // N = 18432 bf16 without the add: slices of 512 groups, the last block short (no exact cover
  // of 128 threads or more): the general kernel, plain call or not.
  s.layer = false;
  s.adds_residual = false;
  s.cols = 18432;
  s.plain_form = true;
  const NormConfig slices = choose_norm_config(s);
  ASSERT_EQ(slices.path, NormConfig::Path::kCluster);
  EXPECT_FALSE(cluster_covers_row(s, slices));
  EXPECT_FALSE(slices.plain);
}

// A device whose clusters are capped (FUSEKIT_MAX_CLUSTER_BLOCKS, or a GPU with smaller ones):
// long rows take the largest cluster under the cap that holds them, else the staged path, and
// no choice, split rows included, asks for more blocks than the cap.
TEST(NormConfig, ACapOnClusterBlocksTakesSmallerClustersOrTheStagedPath) {
  for (int cap : {1, 2, 4, 8, 16}) {
    NormShape s;
    s.max_cluster_blocks = cap;
    s.max_smem_bytes = 227 * 1024;
    s.sm_count = 132;
    s.whole_groups = s.outputs_apart = s.split_rows_built = true;  // split rows allowed
    struct Row {
      int64_t cols;
      int blocks;  // the cluster that holds the bf16 row at 512 threads x 4 groups
    };
    for (const Row row : {Row{32768, 2}, Row{65536, 4}, Row{131072, 8}, Row{262144, 16}}) {
      s.cols = row.cols;
      SCOPED_TRACE("cap " + std::to_string(cap) + ", N=" + std::to_string(row.cols));
      const NormConfig c = choose_norm_config(s);
      if (row.blocks <= cap) {
        EXPECT_EQ(c.path, NormConfig::Path::kCluster);
        EXPECT_EQ(c.cluster_blocks, row.blocks);
        EXPECT_EQ(c.block_threads, kNormClusterThreads);
      } else {
        EXPECT_EQ(c.path, NormConfig::Path::kStaged);
      }
    }
    s.rows = 1;
    for (int64_t cols : {1, 769, 4096, 8192, 16384, 20000}) {
      for (int64_t rows : {1, 32, 257, 65536}) {
        s.cols = cols;
        s.rows = rows;
        const NormConfig c = choose_norm_config(s);
        EXPECT_LE(c.cluster_blocks, cap) << c.to_string();
        EXPECT_LE(c.split_blocks, cap) << c.to_string();
      }
    }
    // A lone row of 16384 splits over as many blocks as the cap and the split kernels allow.
    s.cols = 16384;
    s.rows = 1;
    EXPECT_EQ(choose_norm_config(s).split_blocks, std::min(cap, kNormMaxSplitBlocks));
  }
}

// RMSNorm's fp8 forms take the cluster only for rows its blocks cover exactly, decided by N alone
// (an unaligned call of the same N takes the same path): the plain forms' config where it covers
// the row, else blocks of 64 or 32 threads that do, else the staged path; the plain forms take
// the cluster for any row it holds (the fused add's also in blocks of 64 or 32 that cover it).
TEST(NormConfig, Fp8FormsTakeTheClusterOnlyWhereItsBlocksCoverTheRow) {
  NormShape s;
  s.max_cluster_blocks = 16;
  s.max_smem_bytes = 227 * 1024;
  s.min_blocks_per_sm = 1;
  struct Row {
    int group;
    int64_t cols;
    int fp8_blocks;   // 0: staged
    int fp8_threads;  // 0: the plain forms' config
  };
  const Row rows[] = {
      {8, 32768, 2, 0},   {8, 65536, 4, 0},  {8, 262144, 16, 0}, {8, 20480, 5, 0},
      {8, 24576, 3, 0},   {8, 18432, 9, 64}, {8, 32760, 0, 0},   {8, 32769, 0, 0},
      {8, 20000, 0, 0},   {4, 16384, 2, 0},  {4, 32768, 4, 0},   {4, 12288, 3, 0},
      {4, 20000, 0, 0},   {4, 14848, 0, 0},
  };
  for (const Row& row : rows) {
    for (bool add : {false, true}) {
      for (bool whole : {false, true}) {
        s.group_elems = row.group;
        s.source_elem_bytes = 16 / row.group;
        s.cols = row.cols;
        s.adds_residual = add;
        s.whole_groups = whole && row.cols % row.group == 0;
        SCOPED_TRACE("N=" + std::to_string(row.cols) + " group=" + std::to_string(row.group) +
                     " add=" + std::to_string(add) + " whole=" + std::to_string(whole));
        s.fp8_output = false;
        const NormConfig plain = choose_norm_config(s);
        ASSERT_EQ(plain.path, NormConfig::Path::kCluster);
        EXPECT_EQ(cluster_covers_row(s, plain),
                  row.fp8_blocks != 0 && (row.fp8_threads == 0 || add));
        s.fp8_output = true;
        for (int64_t m : {1, 256, 65536}) {
          s.rows = m;
          const NormConfig fp8 = choose_norm_config(s);
          if (row.fp8_blocks == 0) {
            EXPECT_EQ(fp8.path, NormConfig::Path::kStaged);
          } else if (row.fp8_threads == 0) {
            EXPECT_EQ(fp8.to_string(), plain.to_string());
          } else {
            ASSERT_EQ(fp8.path, NormConfig::Path::kCluster);
            EXPECT_EQ(fp8.cluster_blocks, row.fp8_blocks);
            EXPECT_EQ(fp8.block_threads, row.fp8_threads);
            EXPECT_TRUE(cluster_covers_row(s, fp8));
          }
        }
        s.rows = 1;
      }
    }
  }
}

// RMSNorm's fused add (plain output) takes blocks of 64 or 32 threads that cover the row exactly
// before slices of 512 groups, after the wider exact covers; rms_norm and LayerNorm with or
// without the add take the slices.
TEST(NormConfig, TheFusedAddTakesNarrowExactCoversBeforeSlices) {
  struct Row {
    int64_t cols;
    int blocks;   // the fused add's cluster
    int threads;
  };
  const Row rows[] = {
      {18432, 9, 64},   // 2304 groups
      {22528, 11, 64},  // 2816
      {20480, 5, 128},  // the wider exact cover first
      {18440, 5, 128},  // 2305 groups: no exact cover, slices
      {34816, 9, 128},  // 4352 = 17 x 256: past the cap in blocks of 64, so slices
  };
  for (const Row& row : rows) {
    NormShape s;
    s.max_smem_bytes = 227 * 1024;
    s.max_cluster_blocks = 16;
    s.cols = row.cols;
    s.rows = 4096;
    SCOPED_TRACE("N=" + std::to_string(row.cols));
    s.adds_residual = true;
    NormConfig c = choose_norm_config(s);
    ASSERT_EQ(c.path, NormConfig::Path::kCluster) << c.to_string();
    EXPECT_EQ(c.cluster_blocks, row.blocks);
    EXPECT_EQ(c.threads_per_row, row.threads);
    s.adds_residual = false;  // rms_norm: slices of 512 groups where 128+ threads do not cover
    c = choose_norm_config(s);
    EXPECT_EQ(c.threads_per_row, row.threads >= 128 ? row.threads : 128) << c.to_string();
    s.adds_residual = true;
    s.layer = true;
    c = choose_norm_config(s);
    EXPECT_EQ(c.threads_per_row, row.threads >= 128 ? row.threads : 128) << c.to_string();
  }
}

// Long rows take the widest blocks of 512, 256 or 128 threads (four groups each) that cover them
// exactly; other rows slices of 512 groups (128 threads), as many as cover the row, the last one
// short (never a block with nothing to do), and wider blocks only where the cap leaves too few.
// Batches of more rows than SMs trigger the next grid after their last row.
TEST(NormConfig, LongRowsTakeBlocksThatCoverThemOrSlicesOf512Groups) {
  struct Row {
    int group;
    int64_t cols;
    int cap;      // the GPU's largest cluster
    int blocks;   // expected cluster blocks (0: staged)
    int threads;  // expected threads per block
  };
  const Row rows[] = {
      {8, 20480, 16, 5, 128},  // 2560 groups
      {8, 24576, 16, 3, 256},  // 3072
      {8, 18432, 16, 5, 128},  // 2304: the last block holds 256
      {8, 18432, 4, 3, 256},   // the last block holds 256 of 1024
      {8, 28672, 16, 7, 128},  // 3584
      {8, 49152, 16, 3, 512},  // 6144
      {8, 32768, 16, 2, 512},
      {8, 40003, 16, 10, 128},  // not whole groups: 5001
      {8, 65545, 16, 9, 256},   // 8194 groups: 17 slices of 512 would pass the cap
      {8, 196608, 8, 0, 0},     // 24576 groups: 12 blocks of 512, over the cap
      {8, 196608, 16, 12, 512},
      {4, 12288, 16, 3, 256},
      {4, 10240, 16, 5, 128},
      {4, 14848, 16, 8, 128},  // 3712 groups
  };
  for (const Row& row : rows) {
    NormShape s;
    s.max_smem_bytes = 227 * 1024;
    s.group_elems = row.group;
    s.source_elem_bytes = 16 / row.group;
    s.cols = row.cols;
    s.max_cluster_blocks = row.cap;
    SCOPED_TRACE("N=" + std::to_string(row.cols) + " group=" + std::to_string(row.group) +
                 " cap=" + std::to_string(row.cap));
    for (int64_t m : {1, 300, 65536}) {
      s.rows = m;
      const NormConfig c = choose_norm_config(s);
      if (row.blocks == 0) {
        EXPECT_EQ(c.path, NormConfig::Path::kStaged) << c.to_string();
        continue;
      }
      ASSERT_EQ(c.path, NormConfig::Path::kCluster) << c.to_string();
      EXPECT_EQ(c.cluster_blocks, row.blocks);
      EXPECT_EQ(c.threads_per_row, row.threads);
      EXPECT_EQ(c.block_threads, row.threads);
      EXPECT_EQ(c.items, kNormClusterMaxItems);
      // The next grid launches at the start of a grid of a few rows, after the last row of one
      // with more rows than SMs (whose clusters each loop over several).
      EXPECT_EQ(c.trigger_after_writes, m > s.sm_count);
      const int64_t groups = (row.cols + row.group - 1) / row.group;
      const int64_t slots = static_cast<int64_t>(c.cluster_blocks) * c.threads_per_row * c.items;
      EXPECT_GE(slots, groups);
      // No block with nothing to do.
      EXPECT_LT(slots - groups, static_cast<int64_t>(c.threads_per_row) * c.items);
    }
  }
}

}  // namespace
}  // namespace fusekit::gpu
