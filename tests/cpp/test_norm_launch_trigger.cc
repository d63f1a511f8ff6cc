// When the norm launch heuristic lets the next grid begin (NormConfig::trigger_after_writes;
// plain C++, no GPU needed): at the kernel's start, the default, or after the writes where the
// next call's early-launched blocks were measured to slow graph replay (bench/NOTES.md, "Norm
// v13" and "Norm v24"). The rules tied to a launch shape are tested beside that shape in
// test_norm_config.cc.
#include "gpu/norm/norm_config.h"

#include <string>

#include "gtest/gtest.h"

namespace fusekit::gpu {
namespace {

// The heuristic leaves the next grid's launch at the kernel's start on every path, except with
// the fused add's weight at the output (FusedAddWideRowsLoadTheirWeightAtTheOutput), the plain
// form at mid batches (PlainFormTakesPairsLateAtMidBatches; both in test_norm_config.cc), the
// fused add's fp8 forms below, and the cluster path with more rows than SMs (N = 262144 here;
// LongRowsTakeBlocksThatCoverThemOrSlicesOf512Groups).
TEST(NormConfig, HeuristicTriggersTheNextLaunchAtTheStart) {
  NormShape s;  // 132 SMs
  for (const bool layer : {false, true}) {
    for (const bool add : {false, true}) {
      s.layer = layer;
      s.adds_residual = add;
      s.min_blocks_per_sm = add && !layer ? 1 : 2;
      for (int64_t cols : {2048, 4096, 262144}) {
        for (int64_t rows : {1, 32, 256, 16384}) {
          s.cols = cols;
          s.rows = rows;
          s.max_cluster_blocks = 16;
          s.max_smem_bytes = 227 * 1024;
          const NormConfig c = choose_norm_config(s);
          EXPECT_EQ(c.trigger_after_writes,
                    c.path == NormConfig::Path::kCluster && rows > s.sm_count)
              << c.to_string();
        }
      }
    }
  }
}

// The fused add's fp8 forms trigger the next launch after their writes where their rows take
// 256 threads x four groups, one row per block, at one to two rows per SM (132 SMs here), the
// shape whose early-launched successors slowed graph replay; elsewhere at the start.
TEST(NormConfig, FusedAddFp8TriggersLateAtOneToTwoRowsPerSm) {
  struct Case {
    int64_t cols, rows;
    bool late;
  };
  for (const Case& k : {Case{8192, 133, true}, Case{8192, 256, true}, Case{8192, 264, true},
                        Case{8192, 132, false}, Case{8192, 265, false}, Case{8192, 2048, false},
                        Case{8192, 32, false}, Case{4096, 256, false}, Case{16384, 256, false}}) {
    SCOPED_TRACE("n=" + std::to_string(k.cols) + " m=" + std::to_string(k.rows));
    NormShape s;
    s.min_blocks_per_sm = 1;
    s.adds_residual = true;
    s.fp8_output = true;
    s.cols = k.cols;
    s.rows = k.rows;
    const NormConfig c = choose_norm_config(s);
    EXPECT_EQ(c.trigger_after_writes, k.late);
    if (k.late) {
      EXPECT_EQ(c.threads_per_row, 256);
      EXPECT_EQ(c.items, 4);
      EXPECT_EQ(c.rows_per_block, 1);
    }
    // RMSNorm alone with an fp8 output keeps the trigger at the start.
    s.adds_residual = false;
    s.min_blocks_per_sm = 2;
    EXPECT_FALSE(choose_norm_config(s).trigger_after_writes);
  }
}

}  // namespace
}  // namespace fusekit::gpu
