// When the norm launch heuristic lets the next grid begin (NormConfig::trigger_after_writes;
// plain C++, no GPU needed): at the kernel's start, the default, or after the writes where the
// next call's early-launched blocks were measured to slow graph replay (bench/NOTES.md, "Norm
// v13" and "Norm v24"), and the rule by which the launch itself moves it there where the kernel's
// blocks per SM leave no room for the next grid's (next_grid_crowded). The rules tied to a launch
// shape are tested beside that shape in test_norm_config.cc.
#include "gpu/norm/norm_config.h"

#include <string>

#include "gtest/gtest.h"

namespace fusekit::gpu {
namespace {

// The heuristic leaves the next grid's launch at the kernel's start on every path, except with
// the fused add's weight at the output (FusedAddWideRowsLoadTheirWeightAtTheOutput), the plain
// form at mid batches (PlainFormTakesPairsLateAtMidBatches; both in test_norm_config.cc) and the
// cluster path with more rows than SMs (N = 262144 here;
// LongRowsTakeBlocksThatCoverThemOrSlicesOf512Groups).
TEST(NormConfig, HeuristicTriggersTheNextLaunchAtTheStart) {
  NormShape s;  // 132 SMs
  s.whole_groups = true;  // 6144 and 12288 then take three groups a thread
  for (const bool layer : {false, true}) {
    for (const bool add : {false, true}) {
      s.layer = layer;
      s.adds_residual = add;
      s.min_blocks_per_sm = add && !layer ? 1 : 2;
      for (int64_t cols : {2048, 4096, 6144, 12288, 262144}) {
        for (int64_t rows : {1, 32, 256, 16384}) {
          s.cols = cols;
          s.rows = rows;
          s.max_cluster_blocks = 16;
          s.max_smem_bytes = 227 * 1024;
          const NormConfig c = choose_norm_config(s);
          EXPECT_EQ(c.trigger_after_writes,
                    c.path == NormConfig::Path::kCluster && rows > s.sm_count)
              << c.to_string();
          // Left at the start on the registers path, the trigger is the launch's to move where
          // the next grid would crowd this one; split rows and the other paths keep theirs.
          EXPECT_EQ(c.trigger_late_where_crowded, c.path == NormConfig::Path::kRegisters &&
                                                      c.split_blocks == 1 &&
                                                      !c.trigger_after_writes)
              << c.to_string();
        }
      }
    }
  }
}

// The fused add's fp8 forms leave the trigger to the rule by residency (trigger_late_where_crowded)
// at every batch, their rows of 256 threads x four groups at one to two rows an SM (132 SMs here)
// too, one row a block: the early trigger replayed those faster where the rule keeps it.
TEST(NormConfig, FusedAddFp8LeavesTheTriggerToTheRuleByResidency) {
  for (const int64_t cols : {7168, 8192, 4096, 16384}) {
    for (const int64_t rows : {32, 132, 133, 198, 199, 256, 264, 265, 2048}) {
      SCOPED_TRACE("n=" + std::to_string(cols) + " m=" + std::to_string(rows));
      NormShape s;
      s.min_blocks_per_sm = 1;
      s.adds_residual = true;
      s.fp8_output = true;
      s.whole_groups = true;
      s.cols = cols;
      s.rows = rows;
      const NormConfig c = choose_norm_config(s);
      ASSERT_EQ(c.path, NormConfig::Path::kRegisters);
      EXPECT_FALSE(c.trigger_after_writes) << c.to_string();
      EXPECT_EQ(c.trigger_late_where_crowded, c.split_blocks == 1) << c.to_string();
      if (cols >= 7168 && cols <= 8192 && rows > 132 && rows <= 264) {
        EXPECT_EQ(c.threads_per_row, 256);
        EXPECT_EQ(c.items, 4);
        EXPECT_EQ(c.rows_per_block, 1);
      }
    }
  }
}

// The next grid crowds this one where this grid has more blocks than SMs, is resident at once
// (one wave), and leaves some slots free but fewer than it has blocks: 132 SMs here.
TEST(NormConfig, NextGridCrowdsOneWaveThatLeavesNoRoomForIt) {
  struct Case {
    int64_t blocks;
    int resident_per_sm;
    bool crowded;
  };
  for (const Case& k : {
           Case{132, 1, false},  // one block an SM: nothing to crowd
           Case{132, 2, false},
           Case{133, 2, true},   // 133 of 264 slots: 131 left for 133
           Case{256, 2, true},   // 256 of 264 slots
           Case{263, 2, true},   // one slot left
           Case{264, 2, false},  // every slot taken: none for the next grid's blocks
           Case{265, 2, false},  // two waves: the trigger fires as the last wave starts
           Case{256, 3, true},   // 256 of 396: 140 left
           Case{198, 3, false},  // 198 of 396: room for the next 198
           Case{199, 3, true},
           Case{256, 4, false},  // 256 of 528: room for the next 256
           Case{264, 4, false},
           Case{265, 4, true},
           Case{396, 3, false},  // every slot
           Case{256, 1, false},  // two waves
           Case{1, 8, false},
       }) {
    SCOPED_TRACE("blocks=" + std::to_string(k.blocks) +
                 " resident=" + std::to_string(k.resident_per_sm));
    EXPECT_EQ(next_grid_crowded(k.blocks, 132, k.resident_per_sm), k.crowded);
  }
  // The rule scales with the SMs: 256 blocks of two an SM on 160 SMs leave room for 64 only.
  EXPECT_TRUE(next_grid_crowded(256, 160, 2));
  EXPECT_FALSE(next_grid_crowded(256, 256, 2));  // one an SM
}

// The label names the rule where the launch may move the trigger.
TEST(NormConfig, LabelNamesTheTriggerRule) {
  NormConfig c;
  EXPECT_EQ(c.to_string().find("trigger"), std::string::npos);
  c.trigger_late_where_crowded = true;
  EXPECT_NE(c.to_string().find(",trigger=late-if-crowded"), std::string::npos);
  c.trigger_after_writes = true;
  EXPECT_NE(c.to_string().find(",trigger=late)"), std::string::npos);
}

}  // namespace
}  // namespace fusekit::gpu
