// The gated-activation launch heuristic (plain C++, no GPU needed): every configuration it picks
// covers each row with no idle threads or blocks, stays within the hardware's grid and block
// limits for any N and any M (the grid-stride loops take the rows beyond them), gives a small
// batch the latency shape (one 16-byte group per thread, the row spread over 128-thread blocks)
// and a large one the bandwidth shape (256-thread blocks, a thread for every row at once; two
// groups per thread for the backward pass). The quantizing launches' own rules:
// test_act_quant_config.cc.
#include "gpu/act/act_config.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "act_config_devices.h"
#include "gtest/gtest.h"

namespace fusekit::gpu {
namespace {

using act_test::ceil_div;
using act_test::device_shape;
using act_test::kMaxGridX;

TEST(ActConfig, ValidForAnyRowLengthAndBatch) {
  for (int device = 0; device < 4; ++device) {
    for (int group : {8, 4}) {  // 16-bit and float32 inputs
      for (int64_t n = 1; n <= 400000; n = n < 40 ? n + 1 : n * 3 / 2 + 1) {
        for (int64_t m : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{64}, int64_t{257},
                          int64_t{4096}, int64_t{100000}, int64_t{1} << 40}) {
          ActShape s = device_shape(device);
          s.cols = n;
          s.rows = m;
          s.group_elems = group;
          const int64_t groups = ceil_div(n, group);

          ASSERT_TRUE(act_elementwise_row_fits(s));
          for (bool backward : {false, true}) {
            const ActElementwiseConfig e = choose_act_elementwise_config(s, backward);
            SCOPED_TRACE("device=" + std::to_string(device) + " n=" + std::to_string(n) +
                         " m=" + std::to_string(m) + " backward=" + std::to_string(backward) +
                         " " + e.to_string());
            ASSERT_TRUE(e.unroll == 1 || e.unroll == kActElementwiseMaxUnroll);
            if (!backward) ASSERT_EQ(e.unroll, 1);  // the forward op: one group per thread
            ASSERT_LE(e.block_threads, kActMaxBlockThreads);
            ASSERT_EQ(e.block_threads % s.warp_size, 0);
            // 16-byte groups, or 8-byte ones for a decode-sized batch's forward op on 16-bit
            // types (at most one small-batch block of 16-byte groups per SM).
            const bool tiny = std::max<int64_t>(m, 1) * groups <=
                              int64_t{s.sm_count} * kActSmallBatchThreads * kActNarrowBlocksPerSm;
            ASSERT_EQ(e.group_elems,
                      !backward && tiny && group == 8 && e.unroll == 1 ? group / 2 : group);
            // Every thread of a row has a group, and the row's threads cover it.
            ASSERT_EQ(e.threads_per_row, ceil_div(ceil_div(n, e.group_elems), e.unroll));
            ASSERT_GE(e.rows_per_pass, 1);
            ASSERT_LE(e.rows_per_pass, std::max<int64_t>(m, 1));
            ASSERT_EQ(e.active_threads, e.rows_per_pass * e.threads_per_row);
            ASSERT_LT(e.active_threads, int64_t{1} << 31);  // the kernel's 32-bit slots
            ASSERT_EQ(e.grid, ceil_div(e.active_threads, e.block_threads));  // no idle block
            ASSERT_LE(e.grid, kMaxGridX);
            // The next grid launches after the writes only from the forward op's smallest grids.
            ASSERT_EQ(e.trigger_after_writes, !backward && 2 * e.grid <= s.sm_count);
          }

          const ActQuantConfig q = choose_act_quant_config(s);
          SCOPED_TRACE(q.to_string());
          ASSERT_LE(q.block_threads, kActMaxBlockThreads);
          ASSERT_EQ(q.block_threads % s.warp_size, 0);
          if (q.cluster_blocks > 1) {
            // A row over a cluster's blocks: small batches, a pair of blocks while the pairs
            // hold at most kActQuantSplitThreadsPerSm threads per SM, or rows past the
            // compact block (at four groups per thread) at any batch.
            const int64_t block_threads =
                ceil_div(ceil_div(groups, act_quant_items(group)), s.warp_size) * s.warp_size;
            const bool pair = q.cluster_blocks == 2 &&
                              q.grid * q.block_threads <=
                                  int64_t{kActQuantSplitThreadsPerSm} * s.sm_count;
            ASSERT_TRUE(2 * m < s.sm_count || pair ||
                        (q.items == 4 && block_threads > kActQuantCompactThreads));
            // Split rows stay within that many threads per SM, but where even four groups a
            // thread would not.
            ASSERT_TRUE(q.grid * q.block_threads <=
                            int64_t{kActQuantSplitThreadsPerSm} * s.sm_count ||
                        q.items == 4);
            ASSERT_LE(q.cluster_blocks, std::min(s.max_cluster_blocks, kActQuantMaxClusterBlocks));
            ASSERT_TRUE(q.items == 1 || q.items == 2 || q.items == 4);
            // As few blocks as the widest would take, each of the fewest warps that cover the
            // row with that count.
            const int64_t row_threads = ceil_div(groups, q.items);
            ASSERT_EQ(q.cluster_blocks, ceil_div(row_threads, kActQuantClusterMaxThreads));
            ASSERT_LE(q.block_threads, kActQuantClusterMaxThreads);
            ASSERT_GE(int64_t{q.block_threads} * q.cluster_blocks, row_threads);
            ASSERT_LT(int64_t{q.block_threads - s.warp_size} * q.cluster_blocks, row_threads);
            const int64_t per_block = static_cast<int64_t>(q.block_threads) * q.items;
            ASSERT_GE(q.cluster_blocks * per_block, groups);        // the row is covered
            ASSERT_LT((q.cluster_blocks - 1) * per_block, groups);  // and no block is idle
            ASSERT_EQ(q.grid, m * q.cluster_blocks);
            continue;
          }
          ASSERT_EQ(q.cluster_blocks, 1);
          if (q.items > 0) {
            ASSERT_EQ(q.items, act_quant_items(group));  // 32 elements a thread
            const int64_t covered = static_cast<int64_t>(q.block_threads) * q.items;
            ASSERT_GE(covered, groups);  // the row staged on chip
            // No idle warp (blocks of at least 64 threads aside).
            if (q.block_threads > 64) ASSERT_LT(covered - s.warp_size * q.items, groups);
            ASSERT_EQ(q.smem_bytes, covered * group * 4);  // y as float32
            ASSERT_LE(q.smem_bytes, s.max_smem_per_block);
          } else {
            ASSERT_EQ(q.items, 0);
            ASSERT_EQ(q.block_threads, kActMaxBlockThreads);
            ASSERT_EQ(q.smem_bytes, 0);
            // Only rows that do not fit: past 1024 threads x 4 groups, or past shared memory.
            const int64_t threads =
                std::max<int64_t>(ceil_div(ceil_div(groups, act_quant_items(group)),
                                           s.warp_size) * s.warp_size, 64);
            ASSERT_TRUE(threads > kActMaxBlockThreads ||
                        threads * act_quant_items(group) * group * 4 > s.max_smem_per_block);
          }
          ASSERT_GE(q.grid, 1);
          ASSERT_LE(q.grid, kMaxGridX);
          if (m > 0) ASSERT_LE(q.grid, m);
        }
      }
    }
  }
}

TEST(ActConfig, HugeBatchesStayWithinGridLimits) {
  ActShape s = device_shape(0);
  s.cols = 14336;
  s.rows = int64_t{1} << 45;
  const ActElementwiseConfig e = choose_act_elementwise_config(s, false);
  EXPECT_LE(e.active_threads, kActMaxActiveThreads);  // the threads loop over the rows
  EXPECT_GT(e.active_threads, kActMaxActiveThreads - e.threads_per_row);
  const ActQuantConfig q = choose_act_quant_config(s);
  EXPECT_EQ(q.grid, kMaxGridX);
  s.cols = 1;  // one element per row
  EXPECT_EQ(choose_act_elementwise_config(s, false).active_threads, kActMaxActiveThreads);
}

TEST(ActConfig, RowsTooLongForThirtyTwoBitSlotsAreRefused) {
  ActShape s = device_shape(0);
  s.rows = 1;
  s.cols = kActMaxThreadsPerRow * kActElementwiseMaxUnroll * 8;  // bf16: the longest row taken
  EXPECT_TRUE(act_elementwise_row_fits(s));
  s.cols += 1;
  EXPECT_FALSE(act_elementwise_row_fits(s));
}

TEST(ActConfig, SmallBatchTakesTheLatencyShape) {
  for (int64_t m : {1, 4, 9}) {  // 9 x 1792 groups: at most 128 per SM of 132
    ActShape s = device_shape(0);
    s.cols = 14336;  // bf16: 1792 groups
    s.rows = m;
    const ActElementwiseConfig e = choose_act_elementwise_config(s, false);
    SCOPED_TRACE("m=" + std::to_string(m) + " " + e.to_string());
    EXPECT_EQ(e.unroll, 1);
    EXPECT_EQ(e.group_elems, 4);         // 8-byte groups
    EXPECT_EQ(e.threads_per_row, 3584);  // one group per thread
    EXPECT_EQ(e.rows_per_pass, m);       // every row at once: nothing loops
    if (m == 1) {  // one row: at most one two-warp block per SM, 56 of them
      EXPECT_EQ(e.block_threads, kActTinyBatchThreads);
      EXPECT_EQ(e.grid, 56);
      EXPECT_TRUE(e.trigger_after_writes);  // 56 blocks for 132 SMs
    } else {  // the row over 28 blocks of 128 threads
      EXPECT_EQ(e.block_threads, kActSmallBatchThreads);
      EXPECT_EQ(e.grid, 28 * m);
    }
    const ActElementwiseConfig b = choose_act_elementwise_config(s, true);
    EXPECT_EQ(b.unroll, 1);  // the backward pass: one 16-byte group per thread
    EXPECT_EQ(b.group_elems, 8);
    EXPECT_EQ(b.threads_per_row, 1792);
  }
  // Up to four such blocks per SM the forward op keeps the narrow groups in 256-thread blocks;
  // past that it takes 16-byte groups (still in the small-batch blocks while the batch does not
  // fill the GPU).
  for (int64_t m : {10, 24, 36, 37, 38, 64, 100}) {  // 37 x 1792 groups: at most 4 x 128 per SM
    ActShape s = device_shape(0);
    s.cols = 14336;
    s.rows = m;
    const ActElementwiseConfig e = choose_act_elementwise_config(s, false);
    SCOPED_TRACE("m=" + std::to_string(m) + " " + e.to_string());
    const bool narrow = m <= 37;
    EXPECT_EQ(e.group_elems, narrow ? 4 : 8);
    EXPECT_EQ(e.threads_per_row, narrow ? 3584 : 1792);
    EXPECT_EQ(e.block_threads, narrow ? kActElementwiseThreads : kActSmallBatchThreads);
    EXPECT_EQ(e.grid, ceil_div(m * e.threads_per_row, e.block_threads));
  }
}

TEST(ActConfig, ExplicitConfigsForTheSweep) {
  ActShape s = device_shape(0);
  s.cols = 14336;  // bf16: 1792 groups
  s.rows = 32;
  ActElementwiseConfig c;
  for (int block : {128, 256}) {
    for (int group : {8, 4}) {
      ASSERT_TRUE(make_act_elementwise_config(s, false, group, block, &c));
      EXPECT_EQ(c.block_threads, block);
      EXPECT_EQ(c.group_elems, group);
      EXPECT_EQ(c.threads_per_row, 14336 / group);
      EXPECT_EQ(c.grid, ceil_div(32 * c.threads_per_row, block));
    }
  }
  // The heuristic's choice is one of these.
  const ActElementwiseConfig h = choose_act_elementwise_config(s, false);
  ASSERT_TRUE(make_act_elementwise_config(s, false, h.group_elems, h.block_threads, &c));
  EXPECT_EQ(c.to_string(), h.to_string());
  // Narrow groups only for the forward op on 16-bit types; blocks of whole warps up to the limit.
  EXPECT_FALSE(make_act_elementwise_config(s, true, 4, 128, &c));
  EXPECT_FALSE(make_act_elementwise_config(s, false, 2, 128, &c));
  EXPECT_FALSE(make_act_elementwise_config(s, false, 8, 96 + 1, &c));
  EXPECT_FALSE(make_act_elementwise_config(s, false, 8, 2048, &c));
  // Nor past the kernels' launch bound, which a larger block would fail to launch with.
  EXPECT_TRUE(make_act_elementwise_config(s, false, 8, kActElementwiseThreads, &c));
  EXPECT_FALSE(make_act_elementwise_config(s, false, 8, kActElementwiseThreads + 32, &c));
  s.group_elems = 4;  // float32
  EXPECT_FALSE(make_act_elementwise_config(s, false, 2, 128, &c));
  EXPECT_TRUE(make_act_elementwise_config(s, false, 4, 128, &c));
}

TEST(ActConfig, LargeBatchTakesTheBandwidthShape) {
  for (int64_t m : {4096, 65536, 1000000}) {
    for (int64_t n : {14336, 11008, 5120}) {
      ActShape s = device_shape(0);
      s.cols = n;
      s.rows = m;
      const ActElementwiseConfig forward = choose_act_elementwise_config(s, false);
      EXPECT_EQ(forward.unroll, 1) << forward.to_string();
      EXPECT_EQ(forward.block_threads, kActElementwiseThreads);
      const ActElementwiseConfig e = choose_act_elementwise_config(s, true);
      SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " " + e.to_string());
      EXPECT_EQ(e.unroll, 2);  // the backward pass: two groups per thread
      EXPECT_EQ(e.threads_per_row, ceil_div(n / 8, 2));
      // Every row has its own threads up to kActMaxActiveThreads (a million rows loop), and the
      // last block is the only partial one.
      EXPECT_EQ(e.rows_per_pass, std::min(m, kActMaxActiveThreads / e.threads_per_row));
      EXPECT_EQ(e.rows_per_pass == m, m * e.threads_per_row <= kActMaxActiveThreads);
      EXPECT_EQ(e.block_threads, kActElementwiseThreads);
      EXPECT_EQ(e.grid, ceil_div(e.rows_per_pass * e.threads_per_row, e.block_threads));
    }
  }
}

TEST(ActConfig, ShortRowsShareBlocks) {
  ActShape s = device_shape(0);
  s.cols = 64;  // 8 groups of bf16
  s.rows = 1000;
  const ActElementwiseConfig e = choose_act_elementwise_config(s, false);
  EXPECT_EQ(e.threads_per_row, 16);  // narrow groups: 4 elements per thread
  EXPECT_EQ(e.rows_per_pass, 1000);
  EXPECT_EQ(e.grid, 125);  // 16000 threads: 8 rows per 128-thread block
  EXPECT_EQ(choose_act_elementwise_config(s, true).grid, 63);  // 16-byte groups: 16 rows a block
  s.rows = 100000;        // enough to fill the GPU: the backward pass takes two groups per thread
  EXPECT_EQ(choose_act_elementwise_config(s, false).threads_per_row, 8);
  EXPECT_EQ(choose_act_elementwise_config(s, true).threads_per_row, 4);
}

// The compact forward kernel takes a launch only where its shortcuts hold: 16-byte accesses and
// 32-bit offsets into every tensor (the layout), one group per thread, every row in one pass and
// whole groups (the configuration).
TEST(ActConfig, CompactForwardOnlyWhereItsShortcutsHold) {
  // The layout: (rows - 1) * stride + N must stay below 2^31 in every tensor.
  constexpr int64_t kLimit = (int64_t{1} << 31) - 1;
  const int64_t rows = kLimit / 8192 + 1;  // rows * 8192 past the bound, (rows - 1) * 8192 + 4096 not
  EXPECT_TRUE(act_layout_admits_compact(rows, 4096, true, 8192));
  EXPECT_FALSE(act_layout_admits_compact(rows, 4096, true, 8193));
  EXPECT_FALSE(act_layout_admits_compact(rows, 4096, false, 8192));  // narrower accesses
  EXPECT_TRUE(act_layout_admits_compact(1, 4096, true, int64_t{1} << 40));  // one row: no stride
  EXPECT_TRUE(act_layout_admits_compact(0, 4096, true, 8192));
  EXPECT_FALSE(act_layout_admits_compact(1, kLimit + 1, true, kLimit + 1));

  ActShape s = device_shape(0);
  s.compact_layout = true;
  for (int64_t m : {1, 32, 256, 16384}) {
    for (int64_t n : {14336, 11008, 4100, 4098, 14335}) {
      s.rows = m;
      s.cols = n;
      const ActElementwiseConfig c = choose_act_elementwise_config(s, false);
      SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " " + c.to_string());
      EXPECT_EQ(act_forward_is_compact(c, s), n % c.group_elems == 0);
      ActShape general = s;
      general.compact_layout = false;
      EXPECT_FALSE(act_forward_is_compact(c, general));
    }
  }
  // Threads that loop over the rows or take two groups each are the general kernel's.
  s.rows = 16384;
  s.cols = 14336;
  ActElementwiseConfig looping = choose_act_elementwise_config(s, false);
  ASSERT_TRUE(act_forward_is_compact(looping, s));
  looping.rows_per_pass = s.rows / 2;
  EXPECT_FALSE(act_forward_is_compact(looping, s));
  ActElementwiseConfig two = choose_act_elementwise_config(s, false);
  two.unroll = 2;
  EXPECT_FALSE(act_forward_is_compact(two, s));
}

// Batches that do not fill the GPU take 256-thread blocks and trigger the next grid after their
// writes when the compact kernel runs them; the general kernel keeps its small-batch shapes.
TEST(ActConfig, CompactForwardShapesAtSmallBatches) {
  for (int64_t m : {4, 8, 32, 37, 38, 64, 128}) {
    ActShape s = device_shape(0);
    s.cols = 14336;  // bf16: 1792 groups, so 151 rows fill the GPU (2048 groups per SM)
    s.rows = m;
    s.compact_layout = true;
    const ActElementwiseConfig c = choose_act_elementwise_config(s, false);
    SCOPED_TRACE("m=" + std::to_string(m) + " " + c.to_string());
    ASSERT_TRUE(act_forward_is_compact(c, s));
    EXPECT_EQ(c.group_elems, m <= 37 ? 4 : 8);  // the same narrow-group rule
    EXPECT_EQ(c.block_threads, kActElementwiseThreads);
    EXPECT_TRUE(c.trigger_after_writes);
    s.compact_layout = false;
    const ActElementwiseConfig g = choose_act_elementwise_config(s, false);
    EXPECT_EQ(g.group_elems, c.group_elems);
    // (narrow groups in 256-thread blocks past one 128-thread block per SM, M > 9)
    EXPECT_EQ(g.block_threads,
              m > 9 && m <= 37 ? kActElementwiseThreads : kActSmallBatchThreads);
    EXPECT_FALSE(g.trigger_after_writes);
  }
  ActShape s = device_shape(0);
  s.cols = 14336;
  s.compact_layout = true;
  s.rows = 1;  // one row: the two-warp blocks, as for the general kernel
  EXPECT_EQ(choose_act_elementwise_config(s, false).block_threads, kActTinyBatchThreads);
  s.rows = 2048;  // a batch that fills the GPU: the trigger at the start
  const ActElementwiseConfig big = choose_act_elementwise_config(s, false);
  EXPECT_EQ(big.block_threads, kActElementwiseThreads);
  EXPECT_FALSE(big.trigger_after_writes);
  EXPECT_FALSE(choose_act_elementwise_config(s, true).trigger_after_writes);  // backward
}

}  // namespace
}  // namespace fusekit::gpu
