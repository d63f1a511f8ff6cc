// The norm launch heuristic (plain C++, no GPU needed): every configuration it picks covers the
// row, respects the kernels' constraints, and the explicit-config builder rejects what the
// kernels cannot run.
#include "gpu/norm/norm_config.h"

#include <algorithm>
#include <initializer_list>

#include "gtest/gtest.h"
#include "norm_config_expect.h"

namespace fusekit::gpu {
namespace {

bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

TEST(NormConfig, CoversEveryRowWithinKernelLimits) {
  for (int warp : {32, 64}) {
    for (int group : {8, 4}) {
      for (int source_bytes : {2, 4}) {
        for (int64_t n = 1; n <= 300000; n = n < 64 ? n + 1 : n * 5 / 4 + 1) {
         for (int64_t m : {1, 200, 65536}) {
          for (int budget : {1, 2}) {
          for (bool whole : {false, true}) {
          NormShape s;
          s.whole_groups = whole;
          s.narrow_accesses = !whole;  // rows off the group: a contiguous batch's
          s.cols = n;
          s.rows = m;
          s.group_elems = group;
          s.source_elem_bytes = source_bytes;
          s.warp_size = warp;
          s.max_smem_bytes = 227 * 1024;
          s.min_blocks_per_sm = budget;
          const NormConfig c = choose_norm_config(s);
          SCOPED_TRACE("n=" + std::to_string(n) + " m=" + std::to_string(m) + " warp=" +
                       std::to_string(warp) + " blocks/SM=" + std::to_string(budget) +
                       " whole=" + std::to_string(whole) + " " + c.to_string());
          const int64_t groups = (n + group - 1) / group;
          ASSERT_LE(c.block_threads, kNormMaxThreads);
          ASSERT_TRUE(c.block_threads % warp == 0 || c.block_threads < warp);
          ASSERT_TRUE(is_pow2(c.threads_per_row));
          if (c.path == NormConfig::Path::kRegisters) {
            ASSERT_GE(static_cast<int64_t>(c.threads_per_row) * c.items, groups);
            // Powers of two up to kNormMaxItems, or three or five (kNormOddItemCounts) covering
            // whole groups exactly or with only each thread's last group tested.
            if (norm_odd_items(c.items)) {
              const bool whole_rows = whole && n % group == 0;
              ASSERT_TRUE(
                  (whole_rows && static_cast<int64_t>(c.threads_per_row) * c.items == groups) ||
                  takes_last_partial(whole_rows, s.narrow_accesses, groups, c.threads_per_row,
                                     c.items));
            } else {
              ASSERT_LE(c.items, kNormMaxItems);
              ASSERT_TRUE(is_pow2(c.items));
            }
            ASSERT_EQ(c.block_threads, c.threads_per_row * c.rows_per_block);
            // One row per block from 64 threads per row up; shorter rows share 64-thread blocks
            // (a whole warp at least), or at batches that fill the GPU blocks of just enough rows
            // for 256 groups.
            const int floor_threads = std::max({c.threads_per_row, 64, warp});
            if (c.block_threads != floor_threads) {
              ASSERT_GT(m * groups, int64_t{128} * s.sm_count);  // a batch that fills the GPU
              ASSERT_TRUE(is_pow2(static_cast<int>(groups)) && groups < 32);
              ASSERT_GT(c.block_threads, floor_threads);
              ASSERT_LT(c.rows_per_block / 2 * groups, 256);
            }
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
    }
  }
}

TEST(NormConfig, FewRowsForLatencyManyRowsForBandwidth) {
  struct Case {
    int64_t cols, rows;
    int threads_per_row, items;
  };
  // bf16 rows (8 elements per group) on 132 SMs.
  for (const Case& k : {Case{4096, 1, 128, 4}, Case{4096, 32, 128, 4}, Case{2048, 1, 128, 2},
                        Case{4096, 2048, 128, 4}, Case{4096, 65536, 128, 4},
                        Case{1024, 1, 128, 1}, Case{16384, 1, 512, 4},
                        Case{8192, 1, 256, 4}, Case{8192, 16384, 256, 4}}) {
    expect_registers_shape(NormShape{}, k.cols, k.rows, k.threads_per_row, k.items);
  }
}

// The fused add's kernels (one 512-thread block per SM) at batches that fill the GPU: two groups
// per thread at mid batches where 256 threads cover the row, and at any batch where 512 cover it
// exactly; one row a block at every batch, 256-thread rows between one and two blocks per SM too
// (there the trigger by residency moves the next launch after the writes).
TEST(NormConfig, FusedAddShapesAtMidBatches) {
  struct Case {
    int64_t cols, rows;
    int threads_per_row, items, rows_per_block;
  };
  // bf16 rows (8 elements per group) on 132 SMs.
  for (const Case& k : {Case{2048, 256, 128, 2, 1}, Case{4096, 128, 256, 2, 1},
                        Case{4096, 256, 256, 2, 1}, Case{4096, 2048, 128, 4, 1},
                        Case{4096, 16, 512, 1, 1}, Case{8192, 256, 512, 2, 1},
                        Case{8192, 16384, 512, 2, 1}, Case{8192, 1, 512, 2, 1},
                        Case{5120, 128, 256, 4, 1}, Case{5120, 256, 256, 4, 1},
                        Case{5120, 264, 256, 4, 1}, Case{5120, 265, 256, 4, 1},
                        Case{5120, 2048, 256, 4, 1}}) {
    SCOPED_TRACE("n=" + std::to_string(k.cols) + " m=" + std::to_string(k.rows));
    NormShape s;
    s.min_blocks_per_sm = 1;
    s.adds_residual = true;
    const NormConfig c = expect_registers_shape(s, k.cols, k.rows, k.threads_per_row, k.items);
    s.cols = k.cols;
    s.rows = k.rows;
    EXPECT_EQ(c.rows_per_block, k.rows_per_block);
    EXPECT_EQ(c.block_threads, k.threads_per_row * k.rows_per_block);
    EXPECT_FALSE(c.trigger_after_writes && c.threads_per_row == 256 && c.items == 4);
    // Two blocks per SM (no add), or an fp8 output: four groups per thread, one row per block.
    for (const bool fp8 : {false, true}) {
      s.min_blocks_per_sm = fp8 ? 1 : 2;
      s.adds_residual = fp8;
      s.fp8_output = fp8;
      const NormConfig plain = choose_norm_config(s);
      if (k.rows >= 128) {
        EXPECT_EQ(plain.items, 4);
        EXPECT_EQ(plain.rows_per_block, 1);
      }
    }
  }
}

// Short rows of a power-of-two number of groups under 32 at batches that fill the GPU: eight
// threads per row (one group per thread where the row has fewer groups), in blocks of rows enough
// for 256 groups, except RMSNorm's fp8 forms without the add; other rows keep four groups per
// thread (or three where they cover the row) in 64-thread blocks, as do batches that do not fill
// the GPU.
TEST(NormConfig, ShortRowsSpanEightThreadsInBlocksOf256GroupsAtLargeBatches) {
  struct Case {
    int group_elems;
    int64_t cols, rows;
    int threads_per_row, items, rows_per_block;
  };
  for (const Case& k : {Case{8, 64, 131072, 8, 1, 32}, Case{8, 64, 16384, 8, 1, 32},
                        Case{8, 128, 131072, 8, 2, 16}, Case{8, 32, 131072, 4, 1, 64},
                        Case{8, 8, 131072, 1, 1, 256}, Case{4, 64, 131072, 8, 2, 16},
                        Case{8, 256, 131072, 8, 4, 8}, Case{8, 512, 131072, 16, 4, 4},
                        Case{4, 128, 131072, 8, 4, 8}, Case{8, 96, 131072, 4, 3, 16},
                        Case{8, 64, 64, 8, 1, 8}, Case{8, 128, 256, 16, 1, 4}}) {
    for (const bool add : {false, true}) {
      for (const bool layer : {false, true}) {
        for (const bool fp8 : {false, true}) {
          if (fp8 && layer) continue;
          SCOPED_TRACE("add=" + std::to_string(add) + " layer=" + std::to_string(layer) +
                       " fp8=" + std::to_string(fp8) + " group=" + std::to_string(k.group_elems));
          NormShape s;
          s.group_elems = k.group_elems;
          s.whole_groups = true;
          s.adds_residual = add;
          s.layer = layer;
          s.fp8_output = fp8;
          s.min_blocks_per_sm = norm_min_blocks_per_sm(add, layer, true, true, false);
          // RMSNorm's fp8 forms without the add keep four groups per thread in 64-thread blocks.
          const int64_t groups = k.cols / k.group_elems;
          const bool kept = fp8 && !add && k.rows * groups > 128 * 132 && groups < 32 &&
                            is_pow2(static_cast<int>(groups));
          const int items = kept ? static_cast<int>(std::min<int64_t>(4, groups)) : k.items;
          const int threads = kept ? static_cast<int>(groups / items) : k.threads_per_row;
          const int rows = kept ? std::max(1, 64 / threads) : k.rows_per_block;
          const NormConfig c = expect_registers_shape(s, k.cols, k.rows, threads, items);
          EXPECT_EQ(c.rows_per_block, rows);
          EXPECT_EQ(c.block_threads, threads * rows);
        }
      }
    }
  }
}

// The fused add (one 512-thread block per SM) at batches that fill the GPU spreads rows of a
// power-of-two number of groups over at least 128 threads (fewer groups per thread: N = 1024 and
// 2048 bf16), where RMSNorm alone and the fp8 forms keep four groups per thread.
TEST(NormConfig, FusedAddRowsSpanAtLeast128ThreadsAtLargeBatches) {
  for (const int64_t rows : {2048, 16384, 65536}) {
    for (const RegistersCase& k : {RegistersCase{1024, rows, 128, 1},
                                   RegistersCase{2048, rows, 128, 2},
                                   RegistersCase{4096, rows, 128, 4}}) {
      SCOPED_TRACE("n=" + std::to_string(k.cols) + " m=" + std::to_string(k.rows));
      NormShape s;
      s.min_blocks_per_sm = 1;
      s.adds_residual = true;
      expect_registers_shape(s, k.cols, k.rows, k.threads_per_row, k.items);
      s.fp8_output = true;
      expect_registers_shape(s, k.cols, k.rows, static_cast<int>(k.cols / 8 / 4), 4);
      s.fp8_output = false;
      s.adds_residual = false;
      s.min_blocks_per_sm = 2;
      expect_registers_shape(s, k.cols, k.rows, static_cast<int>(k.cols / 8 / 4), 4);
    }
  }
}

// The fused add (RMSNorm; LayerNorm's where its two-group rule below does not apply) spreads a
// few rows over up to 512 threads before a thread takes more groups where that covers the row
// exactly (RMSNorm alone over 128, the fp8 forms and other lengths over 256); large batches are
// unchanged.
TEST(NormConfig, LongerChainsSpreadFewRowsWider) {
  struct Case {
    int64_t cols, rows;
    int threads_per_row, items;
  };
  for (const bool layer : {false, true}) {
    for (const bool add : {false, true}) {
      for (const Case& k : {Case{4096, 1, 512, 1}, Case{8192, 1, 512, 2},
                            Case{2048, 32, 256, 1}, Case{16384, 1, 512, 4},
                            Case{4096, 65536, 128, 4}}) {
        // LayerNorm at N = 2048 and 4096 and small batches: LayerNormPairsAtSmallBatches.
        if (layer && k.rows < 64 && (k.cols == 2048 || k.cols == 4096)) continue;
        NormShape s;
        s.cols = k.cols;
        s.rows = k.rows;
        s.layer = layer;
        s.adds_residual = add;
        s.min_blocks_per_sm = add ? 1 : 2;
        const NormConfig c = choose_norm_config(s);
        SCOPED_TRACE("layer=" + std::to_string(layer) + " add=" + std::to_string(add) + " n=" +
                     std::to_string(k.cols) + " m=" + std::to_string(k.rows) + " " +
                     c.to_string());
        const bool wide = (layer || add) && k.rows < 64;
        if (wide || k.rows >= 64 || k.cols >= 16384) {
          EXPECT_EQ(c.threads_per_row, k.threads_per_row);
          EXPECT_EQ(c.items, k.items);
        } else {  // RMSNorm alone: up to 128 threads before four groups each
          const int groups = static_cast<int>(k.cols / 8);
          const int items = std::min(4, groups / 128);
          EXPECT_EQ(c.items, items);
          EXPECT_EQ(c.threads_per_row, groups / items);
        }
        s.cols = 5120;  // 640 groups: 256 threads x 4
        EXPECT_EQ(choose_norm_config(s).threads_per_row, 256);
        s.cols = k.cols;
        s.fp8_output = true;  // the fp8 forms without the add likewise, the fused add's keep 256
        const NormConfig fp8 = choose_norm_config(s);
        if (k.rows == 1 && k.cols == 4096) {
          EXPECT_EQ(fp8.threads_per_row, add ? 256 : 128);
          EXPECT_EQ(fp8.items, add ? 2 : 4);
        }
      }
    }
  }
}

// The fused add's four-group rows in 512-thread blocks (N = 16384 bf16) load their weight at the
// output where the rows outnumber the SMs, and trigger the next launch after their writes up to
// twice as many rows as SMs; nothing else does either.
TEST(NormConfig, FusedAddWideRowsLoadTheirWeightAtTheOutput) {
  NormShape s;  // 132 SMs, bf16
  s.adds_residual = true;
  s.min_blocks_per_sm = 1;
  s.whole_groups = true;
  for (const int64_t rows : {1, 32, 132, 133, 256, 264, 265, 2048, 65536}) {
    const NormConfig c = expect_registers_shape(s, 16384, rows, 512, 4);
    EXPECT_EQ(c.weight_at_output, rows > 132) << rows;
    // One to two such blocks per SM: the next grid launches after this one's writes.
    EXPECT_EQ(c.trigger_after_writes, rows > 132 && rows <= 264) << rows;
  }
  auto flag = [&](auto change) {
    NormShape t = s;
    t.cols = 16384;
    t.rows = 2048;
    change(t);
    return choose_norm_config(t).weight_at_output;
  };
  EXPECT_TRUE(flag([](NormShape&) {}));
  EXPECT_FALSE(flag([](NormShape& t) { t.cols = 4096; }));      // 128 threads x 4
  EXPECT_FALSE(flag([](NormShape& t) { t.cols = 16376; }));     // not covered exactly
  EXPECT_FALSE(flag([](NormShape& t) {
    t.whole_groups = false;
    t.narrow_accesses = true;
  }));
  EXPECT_FALSE(flag([](NormShape& t) { t.fp8_output = true; }));
  EXPECT_FALSE(flag([](NormShape& t) { t.group_elems = 4; t.cols = 8192; }));  // fp32 x
  EXPECT_FALSE(flag([](NormShape& t) { t.layer = true; t.min_blocks_per_sm = 2; }));
  EXPECT_FALSE(flag([](NormShape& t) { t.adds_residual = false; t.min_blocks_per_sm = 2; }));
}

// The same rows in the plain form load their weight at the output up to 16 rows an SM, and past
// that take the plain kernel with the weight beside the row; other calls, and other rows, keep
// their flags.
TEST(NormConfig, FusedAddWideRowsTakeThePlainKernelPastSixteenRowsAnSm) {
  NormShape s;  // 132 SMs, bf16
  s.adds_residual = true;
  s.min_blocks_per_sm = 1;
  s.whole_groups = true;
  s.plain_form = true;
  for (const int64_t rows : {133, 264, 265, 2048, 2112, 2113, 16384, 65536}) {
    const NormConfig c = expect_registers_shape(s, 16384, rows, 512, 4);
    const bool past = rows > 16 * 132;
    EXPECT_EQ(c.weight_at_output, !past) << rows;
    EXPECT_EQ(c.plain, rows <= 264 || past) << rows;
    EXPECT_EQ(c.trigger_after_writes, rows <= 264) << rows;
  }
  auto config = [&](auto change) {
    NormShape t = s;
    t.cols = 16384;
    t.rows = 16384;
    change(t);
    return choose_norm_config(t);
  };
  const NormConfig general = config([](NormShape& t) { t.plain_form = false; });
  EXPECT_TRUE(general.weight_at_output);
  EXPECT_FALSE(general.plain);
  const NormConfig pairs = config([](NormShape& t) { t.cols = 8192; });  // 512 threads x 2
  EXPECT_FALSE(pairs.weight_at_output);
  EXPECT_EQ(pairs.items, 2);
  EXPECT_FALSE(pairs.plain);
  const NormConfig rms = config([](NormShape& t) {
    t.adds_residual = false;
    t.min_blocks_per_sm = 2;
  });
  EXPECT_FALSE(rms.weight_at_output);
  EXPECT_FALSE(rms.plain);
}

// The plain form (RMSNorm and the fused add with a weight and nothing else) takes two groups per
// thread with the next launch triggered after the writes from half as many rows as SMs up to twice
// as many, where two groups cover the row in 128 to 512 threads (one group a thread on 128 where
// the row has 128 groups); the same calls otherwise, and every other call, keep their shapes and
// the trigger at the start.
TEST(NormConfig, PlainFormTakesPairsLateAtMidBatches) {
  for (const bool add : {false, true}) {
    NormShape s;  // 132 SMs, bf16
    s.adds_residual = add;
    s.min_blocks_per_sm = add ? 1 : 2;
    s.whole_groups = true;
    s.outputs_apart = true;
    s.plain_form = true;
    for (const int64_t rows : {67, 128, 200, 264}) {
      EXPECT_TRUE(expect_registers_shape(s, 4096, rows, 256, 2).trigger_after_writes) << rows;
      EXPECT_TRUE(expect_registers_shape(s, 8192, rows, 512, 2).trigger_after_writes) << rows;
      EXPECT_TRUE(expect_registers_shape(s, 2048, rows, 128, 2).trigger_after_writes) << rows;
      EXPECT_TRUE(expect_registers_shape(s, 4096, rows, 256, 2).plain) << rows;
      // Rows of 128 groups keep 128 threads, one group each, and the trigger at the start.
      const NormConfig short_row = expect_registers_shape(s, 1024, rows, 128, 1);
      EXPECT_FALSE(short_row.trigger_after_writes) << rows;
      EXPECT_TRUE(short_row.plain) << rows;
    }
    for (const int64_t rows : {1, 32, 66, 265, 2048}) {
      NormShape general = s;
      general.plain_form = false;
      for (const int64_t cols : {2048, 4096, 8192}) {
        general.cols = s.cols = cols;
        general.rows = s.rows = rows;
        const NormConfig plain = choose_norm_config(s);
        const NormConfig other = choose_norm_config(general);
        SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + " " + plain.to_string());
        EXPECT_EQ(plain.threads_per_row, other.threads_per_row);
        EXPECT_EQ(plain.items, other.items);
        EXPECT_EQ(plain.trigger_after_writes, other.trigger_after_writes);
        EXPECT_EQ(plain.output_parts, other.output_parts);
        // The plain kernels up to twice as many rows as SMs.
        EXPECT_EQ(plain.plain, rows <= 264);
        EXPECT_FALSE(other.plain);
      }
    }
    // Rows that two groups per thread would spread over more than 512 threads.
    const NormConfig wide = expect_registers_shape(s, 16384, 200, 512, 4);
    EXPECT_EQ(wide.trigger_after_writes, add);  // the fused add's weight at the output only
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

// Decode-size batches whose outputs lie apart from their inputs share each row's outputs among
// up to four blocks while each part keeps four SMs (132 here: M = 1-16 four, 17-33 two), RMSNorm's
// fp8 forms included where each part keeps 512 groups; in place, the fused add with an fp8 output,
// with several rows per block or off the registers path, a row keeps one block.
TEST(NormConfig, DecodeRowsShareTheirOutputsAmongBlocks) {
  NormShape s;  // 132 SMs
  s.max_cluster_blocks = 16;
  s.max_smem_bytes = 227 * 1024;
  s.whole_groups = true;
  for (const bool layer : {false, true}) {
    for (const bool add : {false, true}) {
      for (const bool fp8 : {false, true}) {
        if (fp8 && layer) continue;
        for (const bool apart : {false, true}) {
          for (int64_t cols : {64, 4096, 5120, 8192, 262144}) {
            for (int64_t rows : {1, 2, 16, 17, 33, 34, 66, 256, 16384}) {
              s.layer = layer;
              s.adds_residual = add;
              s.fp8_output = fp8;
              s.outputs_apart = apart;
              s.min_blocks_per_sm = add && !layer ? 1 : 2;
              s.cols = cols;
              s.rows = rows;
              const NormConfig c = choose_norm_config(s);
              SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                           " apart=" + std::to_string(apart) + " " + c.to_string());
              const int64_t groups = (cols + s.group_elems - 1) / s.group_elems;
              const bool may_share = apart && !(fp8 && add) &&
                                     c.path == NormConfig::Path::kRegisters &&
                                     c.rows_per_block == 1 && c.items <= kNormMaxItems &&
                                     c.threads_per_row * c.items == groups;
              EXPECT_EQ(norm_rows_shareable(s, c), may_share && !c.weight_at_output);
              int expected = !may_share ? 1 : rows <= 16 ? 4 : rows <= 33 ? 2 : 1;
              // RMSNorm's fp8 forms: at least 512 groups a part (N = 8192 bf16: two parts).
              if (fp8) expected = static_cast<int>(std::min<int64_t>(expected, groups / 512));
              EXPECT_EQ(c.output_parts, std::max(expected, 1));
            }
          }
        }
      }
    }
  }
  // RMSNorm alone spreads a shared row over 256 threads, a row of its own over 128.
  s.layer = false;
  s.adds_residual = false;
  s.fp8_output = false;
  s.min_blocks_per_sm = 2;
  s.outputs_apart = true;
  expect_registers_shape(s, 4096, 1, 256, 2);
  expect_registers_shape(s, 4096, 32, 256, 2);
  s.outputs_apart = false;
  expect_registers_shape(s, 4096, 1, 128, 4);
  // Rows that no shared kernel covers keep RMSNorm's own spread: unaligned, or not a power of
  // two of groups.
  s.outputs_apart = true;
  s.whole_groups = false;
  s.narrow_accesses = true;
  EXPECT_EQ(expect_registers_shape(s, 4096, 1, 128, 4).output_parts, 1);
  s.whole_groups = true;
  s.narrow_accesses = false;
  EXPECT_EQ(expect_registers_shape(s, 4000, 1, 128, 4).output_parts, 1);
  // LayerNorm (either form) spreads a shared row over at most 256 threads at up to four groups
  // each, its kernels holding the weight and bias beside the row; a row of its own keeps its
  // pairs over up to 512 threads.
  for (const bool add : {false, true}) {
    s.layer = true;
    s.adds_residual = add;
    s.outputs_apart = true;
    EXPECT_EQ(expect_registers_shape(s, 8192, 1, 256, 4).output_parts, 4);
    EXPECT_EQ(expect_registers_shape(s, 8192, 32, 256, 4).output_parts, 2);
    EXPECT_EQ(expect_registers_shape(s, 4096, 1, 256, 2).output_parts, 4);
    EXPECT_EQ(expect_registers_shape(s, 2048, 1, 128, 2).output_parts, 4);
    EXPECT_EQ(expect_registers_shape(s, 16384, 1, 512, 4).output_parts, 4);
    s.outputs_apart = false;
    expect_registers_shape(s, 8192, 1, 512, 2);
    expect_registers_shape(s, 8192, 32, 512, 2);
  }
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
  // Cluster path: only with clusters, items a power of two up to 8, a cluster that covers the row.
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kCluster, 64, 1, &c));  // needs 8 blocks
  s.max_cluster_blocks = 8;
  EXPECT_TRUE(make_norm_config(s, NormConfig::Path::kCluster, 64, 1, &c));
  EXPECT_EQ(c.cluster_blocks, 8);
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kCluster, 32, 1, &c));   // 16 blocks
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kCluster, 64, 8, &c));   // > 4 items
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kCluster, 64, 3, &c));   // items not pow2
  // Three or five groups per thread (kNormOddItemCounts): covering whole groups exactly; rows
  // that are not whole aligned groups three only, whose kernel tests each thread's last group.
  for (const int odd : kNormOddItemCounts) {
    SCOPED_TRACE("items=" + std::to_string(odd));
    s.whole_groups = false;
    s.cols = odd * 128 * 8;  // odd x 128 groups
    EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kRegisters, 128, odd, &c));
    s.narrow_accesses = true;
    EXPECT_EQ(make_norm_config(s, NormConfig::Path::kRegisters, 128, odd, &c), odd == 3);
    s.narrow_accesses = false;
    s.whole_groups = true;
    EXPECT_TRUE(make_norm_config(s, NormConfig::Path::kRegisters, 128, odd, &c));
    EXPECT_EQ(c.items, odd);
    EXPECT_EQ(c.block_threads, 128);
    EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kRegisters, 256, odd, &c));
    EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kCluster, 128, odd, &c));
    s.cols += 8;  // one group more
    EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kRegisters, 128, odd, &c));
  }
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kRegisters, 128, 7, &c));  // not built
  s.cols = 7 * 128 * 8;
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kRegisters, 128, 7, &c));
  EXPECT_FALSE(make_norm_config(s, NormConfig::Path::kRegisters, 128, 6, &c));
}

}  // namespace
}  // namespace fusekit::gpu
