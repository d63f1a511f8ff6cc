// The norm launch config of rows in runs (plain C++, no GPU needed): norm_config_for_runs, which
// puts the one-stride config on the kernels built for runs (norm_launch.cuh, pick_norm_kernel)
// without changing a row's reduction order. The heuristic itself is tested in
// test_norm_config.cc.
#include "gpu/norm/norm_config.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fusekit::gpu {
namespace {

bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

// Rows in runs have fewer kernels (the exact registers kernels of power-of-two items, and those
// that take any row): their config keeps the path and, off the registers path, the whole config
// (the reduction order, hence the bits, of the same rows of one stride), and on the registers
// path is one those kernels run: power-of-two items up to four covering the row, one block of at
// most 512 threads holding whole rows, nothing split, shared, plain or packed, the weight beside
// the row.
TEST(NormConfig, RowsInRunsKeepThePathOnTheirKernels) {
  int odd_seen = 0, split_seen = 0, parts_seen = 0, packed_seen = 0, other_paths = 0;
  // N from 1 to 300000, and the rows of three groups a thread on 256 and 512 threads.
  std::vector<int64_t> sizes = {6144, 12288};
  for (int64_t n = 1; n <= 300000; n = n < 64 ? n + 1 : n * 5 / 4 + 1) sizes.push_back(n);
  for (int group : {8, 4}) {
    for (const int64_t n : sizes) {
      for (int64_t m : {1, 8, 200, 800, 65536}) {
        for (bool layer : {false, true}) {
          for (bool whole : {false, true}) {
            NormShape s;
            s.cols = whole ? (n + group - 1) / group * group : n;
            s.rows = m;
            s.group_elems = group;
            s.source_elem_bytes = 16 / group;
            s.layer = layer;
            s.whole_groups = whole;
            s.narrow_accesses = !whole;
            s.max_cluster_blocks = 16;
            s.max_smem_bytes = 227 * 1024;
            s.outputs_apart = true;
            s.plain_form = group == 8;
            s.split_rows_built = group == 8;
            s.fixed_threads_built = group == 8;
            const NormConfig one_stride = choose_norm_config(s);
            const NormConfig c = norm_config_for_runs(s, one_stride);
            SCOPED_TRACE("n=" + std::to_string(s.cols) + " m=" + std::to_string(m) + " " +
                         one_stride.to_string() + " -> " + c.to_string());
            ASSERT_EQ(c.path, one_stride.path);
            if (c.path != NormConfig::Path::kRegisters) {
              ++other_paths;
              ASSERT_EQ(c.to_string(), one_stride.to_string());
              continue;
            }
            odd_seen += norm_odd_items(one_stride.items);
            split_seen += one_stride.split_blocks > 1;
            parts_seen += one_stride.output_parts > 1;
            packed_seen += one_stride.packed_row;
            const int64_t groups = (s.cols + group - 1) / group;
            ASSERT_TRUE(is_pow2(c.items) && c.items <= kNormMaxItems);
            ASSERT_TRUE(is_pow2(c.threads_per_row));
            ASSERT_GE(static_cast<int64_t>(c.threads_per_row) * c.items, groups);
            ASSERT_LE(c.block_threads, kNormMaxThreads);
            ASSERT_EQ(c.block_threads, c.threads_per_row * c.rows_per_block);
            ASSERT_EQ(c.split_blocks, 1);
            ASSERT_EQ(c.output_parts, 1);
            ASSERT_FALSE(c.plain);
            ASSERT_FALSE(c.weight_at_output);
            ASSERT_FALSE(c.packed_row);
            // What needed no change stays as it was.
            if (!norm_odd_items(one_stride.items) && one_stride.split_blocks == 1 &&
                one_stride.output_parts == 1 && !one_stride.plain) {
              ASSERT_EQ(c.to_string(), one_stride.to_string());
            }
          }
        }
      }
    }
  }
  // The sweep met every kind of change.
  EXPECT_GT(odd_seen, 0);
  EXPECT_GT(split_seen, 0);
  EXPECT_GT(parts_seen, 0);
  EXPECT_GT(packed_seen, 0);
  EXPECT_GT(other_paths, 0);
}

}  // namespace
}  // namespace fusekit::gpu
