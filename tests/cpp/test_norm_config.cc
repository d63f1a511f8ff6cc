// The norm launch heuristic (plain C++, no GPU needed): every configuration it picks covers the
// row, respects the kernels' constraints, and the explicit-config builder rejects what the
// kernels cannot run.
#include "gpu/norm/norm_config.h"

#include "gtest/gtest.h"

namespace fusekit::gpu {
namespace {

bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

TEST(NormConfig, CoversEveryRowWithinKernelLimits) {
  for (int warp : {32, 64}) {
    for (int group : {8, 4}) {
      for (int source_bytes : {2, 4}) {
        for (int64_t n = 1; n <= 300000; n = n < 64 ? n + 1 : n * 5 / 4 + 1) {
          NormShape s;
          s.cols = n;
          s.group_elems = group;
          s.source_elem_bytes = source_bytes;
          s.warp_size = warp;
          s.max_smem_bytes = 227 * 1024;
          const NormConfig c = choose_norm_config(s);
          SCOPED_TRACE("n=" + std::to_string(n) + " warp=" + std::to_string(warp) + " " +
                       c.to_string());
          const int64_t groups = (n + group - 1) / group;
          ASSERT_LE(c.block_threads, kNormMaxThreads);
          ASSERT_TRUE(c.block_threads % warp == 0 || c.block_threads < warp);
          ASSERT_TRUE(is_pow2(c.threads_per_row));
          ASSERT_NE(c.path, NormConfig::Path::kStream);  // rows not known to be aligned
          if (c.path == NormConfig::Path::kRegisters) {
            ASSERT_GE(static_cast<int64_t>(c.threads_per_row) * c.items, groups);
            ASSERT_LE(c.items, kNormMaxItems);
            ASSERT_EQ(c.block_threads, c.threads_per_row * c.rows_per_block);
            ASSERT_TRUE(is_pow2(c.items));
            // No more threads than groups, beyond rounding up to a power of two.
            ASSERT_LT(c.threads_per_row, 2 * groups);
          } else {
            ASSERT_LE(c.block_threads, kNormStagedThreads);
            ASSERT_LE(c.smem_groups, groups);
            ASSERT_LE(c.smem_groups * group * source_bytes, s.max_smem_bytes);
            ASSERT_GT(c.smem_groups, 0);
          }
        }
      }
    }
  }
}

TEST(NormConfig, BatchesThatFillTheGpuStreamWhenRowsAreAlignedAndItPays) {
  for (int64_t n : {64, 2048, 4096, 5120, 16384}) {
    for (int staged_words : {1, 2, 3}) {
      NormShape s;
      s.cols = n;
      s.rows = 65536;
      s.staged_words = staged_words;
      s.max_smem_bytes = 219 * 1024;
      s.max_smem_per_sm = 228 * 1024;
      s.full_aligned_groups = true;
      s.stream_preferred = true;
      const NormConfig c = choose_norm_config(s);
      SCOPED_TRACE("n=" + std::to_string(n) + " words=" + std::to_string(staged_words) + " " +
                   c.to_string());
      NormConfig two_stages;
      two_stages.threads_per_row = c.threads_per_row;
      two_stages.items = c.items;
      two_stages.stages = 2;
      if (c.path != NormConfig::Path::kStream) {
        // Only when even two stages would not fit.
        ASSERT_EQ(c.path, NormConfig::Path::kRegisters);
        EXPECT_GT(norm_stream_smem_bytes(s, two_stages), s.max_smem_bytes);
        continue;
      }
      const int64_t groups = n / 8;
      EXPECT_GE(static_cast<int64_t>(c.threads_per_row) * c.items, groups);
      EXPECT_GE(c.threads_per_row, s.warp_size);
      EXPECT_EQ(c.block_threads, c.threads_per_row);
      EXPECT_GE(c.stages, 2);
      EXPECT_LE(c.stages, kNormMaxStages);
      EXPECT_LE(norm_stream_smem_bytes(s, c), s.max_smem_bytes);
      // The same rows unaligned, of a kind that does not gain from streaming, or too few of
      // them to fill the GPU: the registers path.
      s.full_aligned_groups = false;
      EXPECT_EQ(choose_norm_config(s).path, NormConfig::Path::kRegisters);
      s.full_aligned_groups = true;
      s.stream_preferred = false;
      EXPECT_EQ(choose_norm_config(s).path, NormConfig::Path::kRegisters);
      s.stream_preferred = true;
      s.rows = 1;
      EXPECT_EQ(choose_norm_config(s).path, NormConfig::Path::kRegisters);
    }
  }
}

TEST(NormConfig, ShortRowsShareBlocks) {
  NormShape s;
  s.cols = 64;  // 8 groups of bf16
  const NormConfig c = choose_norm_config(s);
  EXPECT_EQ(c.path, NormConfig::Path::kRegisters);
  EXPECT_GE(c.threads_per_row * c.items * 8, 64);
  EXPECT_LE(c.threads_per_row, 8);
  EXPECT_GE(c.rows_per_block, 2);
}

TEST(NormConfig, LongRowsAreStaged) {
  NormShape s;
  s.cols = 262144;  // beyond 1024 threads x 32 elements
  s.max_smem_bytes = 227 * 1024;
  const NormConfig c = choose_norm_config(s);
  EXPECT_EQ(c.path, NormConfig::Path::kStaged);
  EXPECT_EQ(c.smem_groups * 16, 227 * 1024 / 16 * 16);  // as much of the row as fits
}

TEST(NormConfig, MakeRejectsWhatKernelsCannotRun) {
  NormShape s;
  s.cols = 4096;  // 512 groups
  NormConfig c;
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kRegisters, 256, 1, &c));  // too few
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kRegisters, 64, 8, &c));   // > 4 items
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kRegisters, 384, 2, &c));  // not a power of 2
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kRegisters, 256, 3, &c));  // items not pow2
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kRegisters, 12, 1, &c));   // not a power of 2
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kRegisters, 1024, 1, &c));  // > 512
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kStaged, 1024, 0, &c));
  EXPECT_TRUE(make_norm_config(s, NormConfig::Path::kRegisters, 512, 1, &c));
  EXPECT_TRUE(make_norm_config(s, NormConfig::Path::kRegisters, 128, 4, &c));
  EXPECT_TRUE(make_norm_config(s, NormConfig::Path::kStaged, 256, 0, &c));
  // Streaming: rows must be aligned, whole warps, 1..kNormMaxStages stages, and fit.
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kStream, 128, 4, &c, 2));  // not aligned
  s.full_aligned_groups = true;
  EXPECT_TRUE(make_norm_config(s, NormConfig::Path::kStream, 128, 4, &c, 2));
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kStream, 128, 4, &c, 0));
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kStream, 128, 4, &c, kNormMaxStages + 1));
  s.cols = 64;  // 8 groups
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kStream, 16, 1, &c, 2));  // under a warp
  s.cols = 16384;
  s.max_smem_bytes = 48 * 1024;
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kStream, 512, 4, &c, 4));  // does not fit
}

}  // namespace
}  // namespace fusekit::gpu
