// The gated-activation launch heuristic (plain C++, no GPU needed): every configuration it picks
// covers each row with no idle threads or blocks, stays within the hardware's grid and block
// limits for any N and any M (the grid-stride loops take the rows beyond them), gives a small
// batch the latency shape (one 16-byte group per thread, the row spread over 128-thread blocks)
// and a large one the bandwidth shape (256-thread blocks, a thread for every row at once; two
// groups per thread for the backward pass).
#include "gpu/act/act_config.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace fusekit::gpu {
namespace {

constexpr int64_t kMaxGridX = 2147483647;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A few devices: H100 (132 SMs), A100 (108), MI300X (304 CUs, 64-wide wavefronts), RDNA (40
// CUs of 32-wide waves, 1024 threads each).
ActShape device_shape(int which) {
  ActShape s;
  switch (which) {
    case 0: s.sm_count = 132; s.max_cluster_blocks = 16; s.max_smem_per_block = 232448; break;
    case 1: s.sm_count = 108; s.max_smem_per_block = 166912; break;
    case 2: s.sm_count = 304; s.warp_size = 64; s.max_smem_per_block = 65536; break;
    default: s.sm_count = 40; s.max_threads_per_sm = 1024; s.max_smem_per_block = 65536; break;
  }
  return s;
}

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

TEST(ActConfig, DecodeStepsSplitQuantizedRowsOverClusters) {
  ActShape s = device_shape(0);  // H100
  s.cols = 14336;                // bf16: 1792 groups
  s.rows = 1;
  ActQuantConfig q = choose_act_quant_config(s);
  EXPECT_EQ(q.cluster_blocks, 8) << q.to_string();  // 224 threads each
  EXPECT_EQ(q.items, 1);
  s.rows = 32;
  EXPECT_EQ(choose_act_quant_config(s).grid, 32 * 8);
  s.cols = 28672;  // 3584 groups: two per thread keep the cluster within 8 blocks
  s.rows = 1;
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.cluster_blocks, 8) << q.to_string();
  EXPECT_EQ(q.items, 2);
  s.rows = 65;  // rows for fewer than half the SMs: still split, but 65 x 8 x 224 threads are
                // past kActQuantSplitThreadsPerSm (512) x 132: four groups a thread, 4 x 224
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.cluster_blocks, 4) << q.to_string();
  EXPECT_EQ(q.items, 4);
  s.rows = 37;  // 37 x 1792 threads are within it
  EXPECT_EQ(choose_act_quant_config(s).items, 2);
  s.rows = 38;
  EXPECT_EQ(choose_act_quant_config(s).items, 4);
  s.cols = 11008;  // 1376 groups: one a thread in 7 x 224 up to 43 rows (67424 threads)...
  s.rows = 43;
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.cluster_blocks, 7) << q.to_string();
  EXPECT_EQ(q.items, 1);
  s.rows = 44;  // ... then two a thread in 4 x 192
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.cluster_blocks, 4) << q.to_string();
  EXPECT_EQ(q.items, 2);
  EXPECT_EQ(q.block_threads, 192);
  s.cols = 28672;
  s.rows = 66;  // from half the SMs on, four groups per thread: past the compact block, still
                // split (RowsPastTheCompactBlockTakeClusters)
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.cluster_blocks, 4) << q.to_string();
  EXPECT_EQ(q.items, 4);
  s.cols = 14336;  // the compact block's row: over two blocks at mid batches
  EXPECT_EQ(choose_act_quant_config(s).cluster_blocks, 2);  // (MidBatchesSplitRowsOverPairs)
  s.rows = 256;     // and a block per row past them
  EXPECT_EQ(choose_act_quant_config(s).cluster_blocks, 1);
  s.cols = 28672;
  s.rows = 1;
  s.max_cluster_blocks = 1;  // no clusters (HIP, before sm_90)
  EXPECT_EQ(choose_act_quant_config(s).cluster_blocks, 1);
}

// From half as many rows as SMs, a row over two blocks of a cluster at the fewest groups per
// thread that take exactly two, while the pairs come to at most kActQuantSplitThreadsPerSm
// threads per SM (132 x 512 = 67584 on an H100); past that, or where no item count gives two
// blocks, a block per row. Without clusters, always a block per row.
TEST(ActConfig, MidBatchesSplitRowsOverPairs) {
  struct Case {
    int group;
    int64_t cols;
    int items;          // of the pair; 0: no count gives two blocks
    int block_threads;  // of each of the pair's blocks
  };
  // bf16 N = 2048: 256 groups, one each on 2 x 128; 4096: 512 groups, two each (one would take
  // three blocks); 6144: two each on 2 x 192; 8192: four each on 2 x 128; 11008: 1376 groups,
  // four each on 344 threads, 2 x 192; 14336: 2 x 224. float32 N = 2048: 512 groups, as bf16's
  // 4096. N = 1792 bf16 (224 groups) fits one block at one group per thread; N = 18944 takes
  // three blocks at four. N = 2056 bf16 (257 groups, one each) takes 2 x 160.
  for (const Case& k :
       {Case{8, 2048, 1, 128}, Case{8, 4096, 2, 128}, Case{8, 6144, 2, 192},
        Case{8, 8192, 4, 128}, Case{8, 11008, 4, 192}, Case{8, 14336, 4, 224},
        Case{4, 2048, 2, 128}, Case{8, 2056, 1, 160}, Case{8, 1792, 0, 0},
        Case{8, 18944, 0, 0}}) {
    ActShape s = device_shape(0);  // H100
    s.group_elems = k.group;
    s.cols = k.cols;
    const int64_t pair_threads = 2 * int64_t{k.block_threads};
    const int64_t last_split_rows = k.items == 0 ? 0 : 132 * 512 / pair_threads;
    for (const int64_t m : {int64_t{66}, int64_t{128}, last_split_rows, last_split_rows + 1,
                            int64_t{4096}}) {
      if (m < 66) continue;
      s.rows = m;
      const ActQuantConfig q = choose_act_quant_config(s);
      SCOPED_TRACE("group=" + std::to_string(k.group) + " n=" + std::to_string(k.cols) +
                   " m=" + std::to_string(m) + " " + q.to_string());
      if (k.items != 0 && m <= last_split_rows) {
        EXPECT_EQ(q.cluster_blocks, 2);
        EXPECT_EQ(q.items, k.items);
        EXPECT_EQ(q.block_threads, k.block_threads);
        EXPECT_EQ(q.grid, 2 * m);
        EXPECT_GE(int64_t{2} * q.block_threads * q.items * k.group, k.cols);  // covers the row
      } else if (k.cols <= 14336) {
        EXPECT_EQ(q.to_string(), make_act_quant_block_config(s).to_string());
      } else {
        EXPECT_GT(q.cluster_blocks, 2);  // RowsPastTheCompactBlockTakeClusters
      }
      ActShape no_clusters = s;  // HIP, before sm_90
      no_clusters.max_cluster_blocks = 1;
      EXPECT_EQ(choose_act_quant_config(no_clusters).cluster_blocks, 1);
    }
  }
}

// A block per row: 32 elements of y per thread whatever the dtype (four 16-byte groups of bf16,
// eight of float32), so float32 rows up to N = 14336 take the compact build as 16-bit ones do
// (longer rows take a cluster where the GPU has them: RowsPastTheCompactBlockTakeClusters).
TEST(ActConfig, QuantizedRowsTakeThirtyTwoElementsPerThread) {
  for (const int group : {8, 4}) {
    for (const int64_t n : {4864, 11008, 14336, 18944}) {
      ActShape s = device_shape(0);  // H100
      s.group_elems = group;
      s.cols = n;
      s.rows = 2048;
      const ActQuantConfig q = make_act_quant_block_config(s);
      SCOPED_TRACE("group=" + std::to_string(group) + " n=" + std::to_string(n) + " " +
                   q.to_string());
      if (n <= 14336) EXPECT_EQ(choose_act_quant_config(s).block_threads, q.block_threads);
      EXPECT_EQ(q.items, 32 / group);
      EXPECT_EQ(q.block_threads, ceil_div(ceil_div(n, 32), 32) * 32);
      EXPECT_EQ(q.block_threads <= kActQuantCompactThreads, n <= 14336);
      EXPECT_EQ(q.smem_bytes, int64_t{q.block_threads} * 32 * 4);
    }
  }
}

// Rows past the compact block (N > 14336) at any batch, up to what eight blocks hold (N = 57344
// bf16, 28672 float32): a cluster at four groups per thread, as few blocks as the widest (224
// threads) would take, each of the fewest warps that cover the row. Rows that fit the compact
// block keep it, longer rows keep the wide block or two passes, and so do GPUs without clusters.
TEST(ActConfig, RowsPastTheCompactBlockTakeClusters) {
  struct Case {
    int group;
    int64_t cols;
    int cluster_blocks;  // 1: a block per row
    int block_threads;   // of the cluster's blocks
  };
  // N = 18944 bf16: 592 threads in 3 x 224 (slices of 896, 896 and 576 groups); 22016: 688 in
  // 4 x 192; 40960 (past the wide block's 32768): 1280 in 6 x 224.
  for (const Case& k :
       {Case{8, 14336, 1, 0}, Case{8, 18944, 3, 224}, Case{8, 22016, 4, 192},
        Case{8, 28672, 4, 224}, Case{8, 32768, 5, 224}, Case{8, 40960, 6, 224},
        Case{8, 57344, 8, 224}, Case{8, 57352, 1, 0}, Case{4, 14336, 1, 0}, Case{4, 18944, 6, 224},
        Case{4, 28672, 8, 224}, Case{4, 17000, 5, 224}, Case{4, 28676, 1, 0}}) {
    for (const int64_t m : {int64_t{2048}, int64_t{16384}, int64_t{1} << 20}) {
      ActShape s = device_shape(0);  // H100
      s.group_elems = k.group;
      s.cols = k.cols;
      s.rows = m;
      ActQuantConfig q = choose_act_quant_config(s);
      SCOPED_TRACE("group=" + std::to_string(k.group) + " n=" + std::to_string(k.cols) +
                   " m=" + std::to_string(m) + " " + q.to_string());
      const ActQuantConfig block = make_act_quant_block_config(s);
      EXPECT_EQ(q.cluster_blocks, k.cluster_blocks);
      if (k.cluster_blocks > 1) {
        EXPECT_EQ(q.items, 4);
        EXPECT_EQ(q.block_threads, k.block_threads);
        EXPECT_EQ(q.grid, m * k.cluster_blocks);
      } else {
        EXPECT_EQ(q.to_string(), block.to_string());
        if (k.cols == 14336) EXPECT_EQ(q.block_threads, 448);  // the compact block
      }
      s.max_cluster_blocks = 1;  // no clusters (HIP, before sm_90): a block per row
      q = choose_act_quant_config(s);
      EXPECT_EQ(q.to_string(), block.to_string());
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

TEST(ActConfig, QuantStagesRowsOnChipUntilTheyDoNotFit) {
  ActShape s = device_shape(0);
  s.max_cluster_blocks = 1;  // the one-block-per-row path (DecodeSteps... covers clusters)
  s.rows = 64;
  s.cols = 4096;  // 512 groups: four per thread of 128
  ActQuantConfig q = choose_act_quant_config(s);
  EXPECT_EQ(q.items, 4);
  EXPECT_EQ(q.block_threads, 128);
  EXPECT_EQ(q.grid, 64);  // a block per row
  s.cols = 14336;  // 1792 groups: four per thread of 448, the compact build
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.items, 4);
  EXPECT_EQ(q.block_threads, 448);
  EXPECT_LE(q.block_threads, kActQuantCompactThreads);
  s.cols = 11008;  // 1376 groups: four per thread of 344, rounded up to whole warps
  EXPECT_EQ(choose_act_quant_config(s).block_threads, 352);
  s.cols = 2048 * 8 + 8;  // 2049 groups: past the compact build, into the wide one
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.items, 4);
  EXPECT_EQ(q.block_threads, 544);
  EXPECT_GT(q.block_threads, kActQuantCompactThreads);
  s.cols = 4096 * 8;  // exactly 1024 threads x 4 groups: 128 KB of y in shared memory
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.items, 4);
  EXPECT_EQ(q.block_threads, 1024);
  EXPECT_EQ(q.smem_bytes, 4096 * 8 * 4);
  s.max_smem_per_block = 65536;  // an AMD GPU's 64 KB: the same row takes two passes
  EXPECT_EQ(choose_act_quant_config(s).items, 0);
  // 64 KB of y does not fit beside the kernel's scratch: N = 16384 takes two passes there, as
  // any row past 480 threads of 32 lanes (448 of 64).
  s.cols = 2048 * 8;
  EXPECT_EQ(choose_act_quant_config(s).items, 0);
  s.cols = 480 * 32;
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.items, 4);
  EXPECT_LE(q.smem_bytes + kActQuantScratchBytes, s.max_smem_per_block);
  s.cols += 1;
  EXPECT_EQ(choose_act_quant_config(s).items, 0);
  s.warp_size = 64;
  s.cols = 448 * 32;
  EXPECT_EQ(choose_act_quant_config(s).items, 4);
  s.cols += 1;
  EXPECT_EQ(choose_act_quant_config(s).items, 0);
  s.warp_size = 32;
  s.max_smem_per_block = 232448;
  s.cols = 4096 * 8 + 1;  // one element more: two passes
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.items, 0);
  EXPECT_EQ(q.block_threads, 1024);
  s.cols = 7;  // tiny rows still take at least 64 threads and a whole warp
  s.warp_size = 64;
  EXPECT_EQ(choose_act_quant_config(s).block_threads, 64);
}

// The compact build's blocks ask L2 for the row half a wave ahead (ActQuantConfig::prefetch_rows):
// half the rows the GPU holds at once, three 448-thread blocks an SM or as many more of fewer
// threads (within the SM's threads and 32 blocks), and only where the batch is more than one such
// wave (within it every row's block is already loading it). The wide build (one block an SM by
// its bound), two passes and clusters ask for none.
TEST(ActConfig, QuantizedBlocksFetchRowsHalfAWaveAheadIntoL2) {
  ActShape s = device_shape(0);  // H100: 132 SMs
  s.max_cluster_blocks = 1;
  s.cols = 14336;  // 448 threads
  EXPECT_EQ(act_quant_resident_rows(s, 448), 3 * 132);
  s.rows = 2048;
  EXPECT_EQ(choose_act_quant_config(s).prefetch_rows, 3 * 132 / 2);
  s.rows = 3 * 132;  // one wave: every row's block runs at once
  EXPECT_EQ(choose_act_quant_config(s).prefetch_rows, 0);
  s.rows = 256;
  EXPECT_EQ(choose_act_quant_config(s).prefetch_rows, 0);
  s.rows = 3 * 132 + 1;
  EXPECT_EQ(choose_act_quant_config(s).prefetch_rows, 3 * 132 / 2);
  s.rows = 1 << 20;
  s.cols = 4096;  // 128 threads: ten blocks an SM by the compact build's 1344 threads
  EXPECT_EQ(choose_act_quant_config(s).prefetch_rows, 10 * 132 / 2);
  s.cols = 512;  // 64 threads (the fewest): 21 blocks an SM
  EXPECT_EQ(choose_act_quant_config(s).prefetch_rows, 21 * 132 / 2);
  ActShape rdna = device_shape(3);  // 1024 threads an SM: 16 blocks of 64
  rdna.rows = 1 << 20;
  rdna.cols = 512;
  EXPECT_EQ(choose_act_quant_config(rdna).prefetch_rows, 16 * 40 / 2);
  s.cols = 2048 * 8 + 8;  // the wide build
  EXPECT_GT(choose_act_quant_config(s).block_threads, kActQuantCompactThreads);
  EXPECT_EQ(choose_act_quant_config(s).prefetch_rows, 0);
  s.cols = 4096 * 8 + 1;  // two passes
  EXPECT_EQ(choose_act_quant_config(s).items, 0);
  EXPECT_EQ(choose_act_quant_config(s).prefetch_rows, 0);
  ActShape clusters = device_shape(0);
  clusters.cols = 14336;
  clusters.rows = 64;  // split over clusters
  EXPECT_GT(choose_act_quant_config(clusters).cluster_blocks, 1);
  EXPECT_EQ(choose_act_quant_config(clusters).prefetch_rows, 0);
  s.cols = 14336;
  s.rows = 2048;
  EXPECT_NE(choose_act_quant_config(s).to_string().find(",prefetch=198"), std::string::npos);
}

}  // namespace
}  // namespace fusekit::gpu
