// The quantizing gated activations' launch heuristic (plain C++, no GPU needed): rows split over
// a cluster's blocks for decode steps and mid batches, a block a row beyond (the compact build up
// to 448 threads of 32 elements each, the wide one, two passes), clusters for rows past the
// compact block, and the prefetch of later rows into L2 in batches of more than one wave.
#include <cstdint>
#include <string>

#include "act_config_devices.h"
#include "gpu/act/act_config.h"
#include "gtest/gtest.h"

namespace fusekit::gpu {
namespace {

using act_test::ceil_div;
using act_test::device_shape;

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
