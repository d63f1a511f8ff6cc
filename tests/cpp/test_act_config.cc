// The gated-activation launch heuristic (plain C++, no GPU needed): every configuration it picks
// covers each row with no idle blocks, stays within the hardware's grid and block limits for any
// N and any M (the grid-stride loops take the rows beyond them), gives a small batch the
// latency shape (one 16-byte group per thread, the row spread over blocks) and a large one the
// bandwidth shape (four groups per thread, one wave of blocks looping over the rows).
#include "gpu/act/act_config.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace fusekit::gpu {
namespace {

constexpr int64_t kMaxGridX = 2147483647;
constexpr int64_t kMaxGridY = 65535;

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A few devices: H100 (132 SMs), A100 (108), MI300X (304 CUs, 64-wide wavefronts), RDNA (40
// CUs of 32-wide waves, 1024 threads each).
ActShape device_shape(int which) {
  ActShape s;
  switch (which) {
    case 0: s.sm_count = 132; s.max_cluster_blocks = 16; break;
    case 1: s.sm_count = 108; break;
    case 2: s.sm_count = 304; s.warp_size = 64; break;
    default: s.sm_count = 40; s.max_threads_per_sm = 1024; break;
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

          const ActElementwiseConfig e = choose_act_elementwise_config(s);
          SCOPED_TRACE("device=" + std::to_string(device) + " n=" + std::to_string(n) +
                       " m=" + std::to_string(m) + " " + e.to_string());
          ASSERT_TRUE(e.unroll == 1 || e.unroll == 2 || e.unroll == 4);
          ASSERT_TRUE(is_pow2(e.threads_x));
          ASSERT_GE(e.threads_x, s.warp_size);
          ASSERT_GE(e.threads_y, 1);
          ASSERT_LE(e.threads_x * e.threads_y, kActMaxBlockThreads);
          ASSERT_EQ((e.threads_x * e.threads_y) % s.warp_size, 0);
          const int64_t per_block_x = static_cast<int64_t>(e.threads_x) * e.unroll;
          ASSERT_GE(e.grid_x * per_block_x, groups);          // the row is covered
          ASSERT_LT((e.grid_x - 1) * per_block_x, groups);    // and no block along it is idle
          ASSERT_GE(e.grid_x, 1);
          ASSERT_LE(e.grid_x, kMaxGridX);
          ASSERT_GE(e.grid_y, 1);
          ASSERT_LE(e.grid_y, kMaxGridY);
          if (m > 0) ASSERT_LE((e.grid_y - 1) * e.threads_y, m - 1);  // no idle row of blocks

          const ActQuantConfig q = choose_act_quant_config(s);
          SCOPED_TRACE(q.to_string());
          ASSERT_TRUE(is_pow2(q.block_threads));
          ASSERT_LE(q.block_threads, kActMaxBlockThreads);
          ASSERT_EQ(q.block_threads % s.warp_size, 0);
          ASSERT_TRUE(q.items == 0 || (is_pow2(q.items) && q.items <= kActMaxQuantItems));
          if (q.cluster_blocks > 1) {  // a row over a cluster's blocks, small batches only
            ASSERT_LT(m, s.sm_count);
            ASSERT_LE(q.cluster_blocks, std::min(s.max_cluster_blocks, kActQuantMaxClusterBlocks));
            ASSERT_EQ(q.block_threads, kActQuantClusterThreads);
            ASSERT_LE(q.items, 4);
            const int64_t per_block = static_cast<int64_t>(q.block_threads) * q.items;
            ASSERT_GE(q.cluster_blocks * per_block, groups);        // the row is covered
            ASSERT_LT((q.cluster_blocks - 1) * per_block, groups);  // and no block is idle
            ASSERT_EQ(q.grid, m * q.cluster_blocks);
            continue;
          }
          ASSERT_EQ(q.cluster_blocks, 1);
          if (q.items > 0) {
            ASSERT_GE(static_cast<int64_t>(q.block_threads) * q.items, groups);  // row in registers
          } else {
            ASSERT_GT(groups, static_cast<int64_t>(kActMaxBlockThreads) * kActMaxQuantItems);
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
  EXPECT_EQ(q.cluster_blocks, 7) << q.to_string();
  EXPECT_EQ(q.items, 1);
  s.rows = 32;
  EXPECT_EQ(choose_act_quant_config(s).grid, 32 * 7);
  s.cols = 28672;  // 3584 groups: two per thread keep the cluster within 8 blocks
  s.rows = 1;
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.cluster_blocks, 7) << q.to_string();
  EXPECT_EQ(q.items, 2);
  s.rows = 132;  // a block per row fills the GPU
  EXPECT_EQ(choose_act_quant_config(s).cluster_blocks, 1);
  s.rows = 1;
  s.max_cluster_blocks = 1;  // no clusters (HIP, before sm_90)
  EXPECT_EQ(choose_act_quant_config(s).cluster_blocks, 1);
}

TEST(ActConfig, HugeBatchesStayWithinGridLimits) {
  ActShape s = device_shape(0);
  s.cols = 14336;
  s.rows = int64_t{1} << 45;
  const ActElementwiseConfig e = choose_act_elementwise_config(s);
  EXPECT_LE(e.grid_y, kMaxGridY);
  EXPECT_LE(e.grid_x * e.grid_y, int64_t{132} * 2 + e.grid_x);  // one wave loops over rows
  const ActQuantConfig q = choose_act_quant_config(s);
  EXPECT_EQ(q.grid, kMaxGridX);
  s.cols = 1;  // one element per row: rows of many blocks' worth still need grid_y <= 65535
  EXPECT_LE(choose_act_elementwise_config(s).grid_y, kMaxGridY);
}

TEST(ActConfig, SmallBatchTakesTheLatencyShape) {
  for (int64_t m : {1, 4, 16}) {
    ActShape s = device_shape(0);
    s.cols = 14336;  // bf16: 1792 groups
    s.rows = m;
    const ActElementwiseConfig e = choose_act_elementwise_config(s);
    SCOPED_TRACE("m=" + std::to_string(m) + " " + e.to_string());
    EXPECT_EQ(e.unroll, 1);
    EXPECT_EQ(e.threads_x, 256);
    EXPECT_EQ(e.grid_x, 7);  // the row over 7 blocks, one group per thread
    EXPECT_EQ(e.grid_y, m);  // a row of blocks per row: nothing loops
  }
}

TEST(ActConfig, LargeBatchTakesTheBandwidthShape) {
  for (int64_t m : {4096, 65536, 1000000}) {
    ActShape s = device_shape(0);
    s.cols = 14336;
    s.rows = m;
    const ActElementwiseConfig e = choose_act_elementwise_config(s);
    SCOPED_TRACE("m=" + std::to_string(m) + " " + e.to_string());
    EXPECT_EQ(e.unroll, 4);
    EXPECT_EQ(e.grid_x, 2);  // 1792 groups = 2 blocks x 256 threads x 4 groups (rounded up)
    // One wave at the kernel's two 256-thread blocks per SM, looping over the rows.
    EXPECT_LE(e.grid_x * e.grid_y, 132 * 2 + e.grid_x);
    EXPECT_GE(e.grid_x * e.grid_y, 132 * 2);
    EXPECT_LT(e.grid_y, m);
  }
}

TEST(ActConfig, ShortRowsShareBlocks) {
  ActShape s = device_shape(0);
  s.cols = 64;  // 8 groups of bf16
  s.rows = 1000;
  const ActElementwiseConfig e = choose_act_elementwise_config(s);
  EXPECT_EQ(e.threads_x, 32);  // one warp along the row
  EXPECT_EQ(e.threads_y, 8);   // eight rows per block
  EXPECT_EQ(e.grid_x, 1);
  s.warp_size = 64;
  EXPECT_EQ(choose_act_elementwise_config(s).threads_x, 64);
}

TEST(ActConfig, QuantKeepsRowsInRegistersUntilTheyDoNotFit) {
  ActShape s = device_shape(0);
  s.max_cluster_blocks = 1;  // the one-block-per-row path (DecodeSteps... covers clusters)
  s.rows = 64;
  s.cols = 4096;  // 512 groups: one per thread of 512
  ActQuantConfig q = choose_act_quant_config(s);
  EXPECT_EQ(q.items, 1);
  EXPECT_EQ(q.block_threads, 512);
  EXPECT_EQ(q.grid, 64);  // a block per row
  s.cols = 14336;  // 1792 groups: four per thread of 512
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.items, 4);
  EXPECT_EQ(q.block_threads, 512);
  s.cols = 8192 * 8;  // exactly 1024 threads x 8 groups
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.items, 8);
  EXPECT_EQ(q.block_threads, 1024);
  s.cols = 8192 * 8 + 1;  // one element more: two passes
  q = choose_act_quant_config(s);
  EXPECT_EQ(q.items, 0);
  EXPECT_EQ(q.block_threads, 1024);
  s.cols = 7;  // tiny rows still take at least 64 threads and a whole warp
  s.warp_size = 64;
  EXPECT_EQ(choose_act_quant_config(s).block_threads, 64);
}

}  // namespace
}  // namespace fusekit::gpu
