// The norm launch heuristic's rows that are not a power-of-two number of 16-byte groups (plain
// C++, no GPU needed): three or five groups per thread where that many cover the row exactly
// (kNormOddItemCounts), no mid-batch pairs that would leave slots idle (bench/NOTES.md, "Norm
// v25"), and RMSNorm's short rows at small batches ("Norm v42"). The other shapes are tested in
// test_norm_config.cc.
#include "gpu/norm/norm_config.h"

#include <string>

#include "gtest/gtest.h"
#include "norm_config_expect.h"

namespace fusekit::gpu {
namespace {

// A row length and batch, its dtype's group (8 elements of 16-bit x, 4 of fp32), and the
// registers-path launch the heuristic should give it.
struct RowsCase {
  int64_t cols, rows;
  int group;
  int threads_per_row, items;
};

// A row length and the registers-path launch expected for it, at batches a test loops over.
struct LaunchCase {
  int64_t cols;
  int threads_per_row, items;
};

// Whole, aligned groups of a `group`-element dtype, RMSNorm or LayerNorm, with or without the add
// (each with its register budget: norm_min_blocks_per_sm for one dtype).
NormShape whole_rows(int group, bool layer, bool add) {
  NormShape s;
  s.group_elems = group;
  s.source_elem_bytes = 16 / group;
  s.whole_groups = true;
  s.layer = layer;
  s.adds_residual = add;
  s.min_blocks_per_sm = norm_min_blocks_per_sm(add, layer, true, true, false);
  return s;
}

// A case's form and shape, for a failure's trace.
std::string form_label(const RowsCase& k, bool layer, bool add) {
  return "layer=" + std::to_string(layer) + " add=" + std::to_string(add) +
         " group=" + std::to_string(k.group) + " N=" + std::to_string(k.cols) +
         " M=" + std::to_string(k.rows);
}

// Rows of 3 x 2^k or 5 x 2^k whole groups take that many groups per thread (no idle slot) once the
// batch fills the GPU (fp8 outputs included); not at small batches (but for RMSNorm's rows of fewer
// than 128 groups: the last test), not five for LayerNorm with the add (which takes three there,
// its threads' last groups partly past the row), not exactly when the rows are not whole, aligned
// groups. Other rows keep four.
TEST(NormConfig, OddItemsWhereTheyCoverTheRowExactly) {
  using Case = RowsCase;
  for (const Case& k : {Case{5120, 16384, 8, 128, 5}, Case{5120, 2048, 8, 128, 5},
                        Case{2560, 65536, 8, 64, 5}, Case{10240, 4096, 8, 256, 5},
                        Case{5120, 16384, 4, 256, 5}, Case{3072, 16384, 8, 128, 3},
                        Case{3072, 2048, 8, 128, 3}, Case{1536, 65536, 8, 64, 3},
                        Case{6144, 16384, 8, 256, 3}, Case{12288, 4096, 8, 512, 3},
                        Case{3072, 16384, 4, 256, 3}, Case{5120, 1, 8, 256, 4},
                        Case{3584, 16384, 8, 128, 4}, Case{7168, 16384, 8, 256, 4},
                        Case{4096, 16384, 8, 128, 4}}) {
    for (const bool add : {false, true}) {
      NormShape s = whole_rows(k.group, false, add);
      SCOPED_TRACE("add=" + std::to_string(add) + " group=" + std::to_string(k.group) +
                   " N=" + std::to_string(k.cols));
      expect_registers_shape(s, k.cols, k.rows, k.threads_per_row, k.items);
      // The odd count a config takes, or 0.
      auto odd_of = [](const NormConfig& c) { return norm_odd_items(c.items) ? c.items : 0; };
      const int odd = norm_odd_items(k.items) ? k.items : 0;
      // Rows that are not whole aligned groups have no exact odd kernel: three at most, where
      // only each thread's last group is tested (the kernels of RowFit::kLastPartial).
      s.whole_groups = false;
      s.cols = k.cols;
      s.rows = k.rows;
      EXPECT_EQ(odd_of(choose_norm_config(s)), 0);  // a padded view
      s.narrow_accesses = true;
      const NormConfig loose = choose_norm_config(s);
      EXPECT_NE(odd_of(loose), 5);
      if (odd_of(loose) == 3) {
        EXPECT_TRUE(items_last_partial(k.cols / k.group, loose.threads_per_row, 3, true));
      }
      s.narrow_accesses = false;
      s.whole_groups = true;
      s.layer = true;
      EXPECT_EQ(odd_of(choose_norm_config(s)), odd == 5 && add ? 3 : odd);
      s.layer = false;
      s.fp8_output = true;
      EXPECT_EQ(odd_of(choose_norm_config(s)), odd);
    }
  }
}

// Rows of more than 2 x 2^k and fewer than 3 x 2^k whole groups (N = 5376 bf16; 9 x 2^k groups
// where no five is taken, below) take three groups per thread on 2^k threads once the batch fills
// the GPU, each thread's last group partly past the row (items_last_partial), where four would
// leave every thread's last slot idle; rows of 7 x 2^k keep four (their last slots partly past
// the row). So do such rows where the groups are not whole and aligned (the next test), but not a
// single row.
TEST(NormConfig, ThreeGroupsWhereTheyCoverTheRowWithTheLastPartly) {
  using Case = RowsCase;
  for (const Case& k : {Case{5376, 16384, 8, 256, 3}, Case{5376, 2048, 4, 512, 3},
                        Case{2688, 16384, 4, 256, 3}, Case{3584, 16384, 8, 128, 4}}) {
    for (const bool layer : {false, true}) {
      for (const bool add : {false, true}) {
        NormShape s = whole_rows(k.group, layer, add);
        SCOPED_TRACE(form_label(k, layer, add));
        const NormConfig c =
            expect_registers_shape(s, k.cols, k.rows, k.threads_per_row, k.items);
        EXPECT_TRUE(items_last_partial(k.cols / k.group, c.threads_per_row, c.items));
        s.whole_groups = false;
        s.narrow_accesses = true;
        expect_registers_shape(s, k.cols, k.rows, k.threads_per_row, k.items);
        s.narrow_accesses = false;
        s.whole_groups = true;
        s.cols = k.cols;
        s.rows = 1;  // latency: a power of two, as few groups per thread as the chain takes
        EXPECT_NE(choose_norm_config(s).items, 3);
      }
    }
  }
}

// Rows of more than 4 x 2^k and fewer than 5 x 2^k whole groups (9 x 2^k: N = 1152, 2304, 4608,
// 9216 bf16) at batches that fill the GPU take five groups per thread on 2^k threads, only each
// thread's last group tested (five_last_partial), in the forms with a five-group kernel and where
// the exact five would be taken: RMSNorm (fp8 forms too) and its fused add, LayerNorm alone past
// kLayerThreeOverFiveRowsPerSm rows an SM. LayerNorm with the add (no five-group kernel),
// LayerNorm's smaller batches and rows of narrow accesses (no such kernel at those widths) take
// three on twice the threads; a single row neither.
TEST(NormConfig, FiveGroupsWhereTheyCoverTheRowWithTheLastPartly) {
  using Case = RowsCase;
  for (const Case& k : {Case{4608, 16384, 8, 128, 5}, Case{4608, 2048, 8, 128, 5},
                        Case{2304, 16384, 8, 64, 5}, Case{1152, 65536, 8, 32, 5},
                        Case{9216, 4096, 8, 256, 5}, Case{2304, 16384, 4, 128, 5}}) {
    for (const bool layer : {false, true}) {
      for (const bool add : {false, true}) {
        NormShape s = whole_rows(k.group, layer, add);
        SCOPED_TRACE(form_label(k, layer, add));
        const int64_t groups = k.cols / k.group;
        const bool five = !(layer && add);
        const NormConfig c = expect_registers_shape(
            s, k.cols, k.rows, five ? k.threads_per_row : 2 * k.threads_per_row, five ? 5 : 3);
        EXPECT_TRUE(takes_last_partial(true, false, groups, c.threads_per_row, c.items));
        EXPECT_EQ(five_last_partial(groups, c.threads_per_row, c.items), five);
        if (!layer) {
          s.fp8_output = true;
          expect_registers_shape(s, k.cols, k.rows, k.threads_per_row, 5);
          s.fp8_output = false;
        }
        if (layer && !add && groups > 256) {  // four rows an SM (not mid-batch pairs): three
          expect_registers_shape(s, k.cols, 4 * s.sm_count, 2 * k.threads_per_row, 3);
        }
        s.whole_groups = false;
        s.narrow_accesses = true;
        const NormConfig narrow =
            expect_registers_shape(s, k.cols, k.rows, 2 * k.threads_per_row, 3);
        EXPECT_FALSE(takes_last_partial(false, true, groups, k.threads_per_row, 5));
        EXPECT_TRUE(takes_last_partial(false, true, groups, narrow.threads_per_row, 3));
        s.narrow_accesses = false;
        s.whole_groups = true;
        s.cols = k.cols;
        s.rows = 1;
        EXPECT_FALSE(norm_odd_items(choose_norm_config(s).items));
      }
    }
  }
}

// LayerNorm alone's rows of 9 x 2^k groups (N = 1152 and 2304 bf16) take three groups a thread on
// twice the threads, in plain kernels, up to 2304 groups an SM (16 rows an SM at 1152, 8 at 2304:
// past LayerNorm's mid batches, where it takes pairs), and five from the next row on; RMSNorm
// takes five at both batches (bench/NOTES.md, "Norm v58").
TEST(NormConfig, LayerNormShortRowsTakeThreeOnTwiceTheThreadsUpToABatchBound) {
  for (const LaunchCase& k : {LaunchCase{1152, 32, 5}, LaunchCase{2304, 64, 5}}) {
    for (const bool layer : {false, true}) {
      NormShape s = whole_rows(8, layer, false);
      s.plain_form = true;
      const int64_t bound_rows = 2304 * s.sm_count / (k.cols / 8);
      SCOPED_TRACE("layer=" + std::to_string(layer) + " N=" + std::to_string(k.cols));
      const NormConfig at_bound =
          layer ? expect_registers_shape(s, k.cols, bound_rows, 2 * k.threads_per_row, 3)
                : expect_registers_shape(s, k.cols, bound_rows, k.threads_per_row, k.items);
      if (layer) {  // the plain kernel of one row a block, which the sweep measured
        EXPECT_TRUE(at_bound.plain);
        EXPECT_EQ(at_bound.rows_per_block, 1);
      }
      expect_registers_shape(s, k.cols, bound_rows + 1, k.threads_per_row, k.items);
    }
  }
}

// Rows of accesses narrower than 16 bytes (N off the group in a contiguous batch: 4100, 4097 bf16;
// or rows at addresses that rule them out) at batches that fill the GPU take three or four groups
// per thread where only each thread's last group needs testing against the row's end, also where
// the launch covers the row exactly (no exact kernel is built for such rows): the kernels of
// RowFit::kLastPartial, which test no other slot (bench/NOTES.md, "Norm v44"), rather than
// RowFit::kAny's, which test every one. Padded views (16-byte accesses, N off the group) keep
// the latter, and so four groups a thread.
TEST(NormConfig, RowsOffTheGroupTestOnlyEachThreadsLastGroup) {
  using Case = RowsCase;
  for (const Case& k : {Case{4100, 16384, 8, 256, 3}, Case{4097, 16384, 8, 256, 3},
                        Case{6140, 16384, 8, 256, 3}, Case{3072, 16384, 8, 128, 3},
                        Case{4096, 16384, 8, 128, 4}, Case{769, 16384, 8, 32, 4},
                        Case{5125, 16384, 8, 256, 3}, Case{4097, 16384, 4, 512, 3}}) {
    for (const bool layer : {false, true}) {
      for (const bool add : {false, true}) {
        NormShape s = whole_rows(k.group, layer, add);
        s.whole_groups = false;
        s.narrow_accesses = true;
        SCOPED_TRACE("layer=" + std::to_string(layer) + " add=" + std::to_string(add) +
                     " group=" + std::to_string(k.group) + " N=" + std::to_string(k.cols));
        const NormConfig c =
            expect_registers_shape(s, k.cols, k.rows, k.threads_per_row, k.items);
        const int64_t groups = (k.cols + k.group - 1) / k.group;
        EXPECT_TRUE(takes_last_partial(false, true, groups, c.threads_per_row, c.items));
        // Padded views (16-byte accesses, N off the group) keep the kernels of RowFit::kAny.
        s.narrow_accesses = false;
        s.cols = k.cols;
        s.rows = k.rows;
        const NormConfig padded = choose_norm_config(s);
        EXPECT_EQ(padded.items, kNormMaxItems);
        EXPECT_FALSE(takes_last_partial(false, false, groups, padded.threads_per_row, 4));
      }
    }
  }
}

// Rows that are not a power-of-two number of groups (N = 1536, 3072, 3584, 5120, 6144, 7168 bf16)
// keep four groups per thread at mid batches, or three or five where those cover the row
// exactly, rather than pairs that leave slots idle: RMSNorm alone and with the add, plain form or
// not. LayerNorm too past 256 groups, taking three on twice the threads rather than five (and
// pairs up to 256 groups, or where the groups are not whole, but for rows that one warp holds in
// three or four groups a lane: exactly three at every batch that fills the GPU, else from four
// rows an SM); its splits over two blocks at up to twice as many rows as SMs are
// test_norm_config_split_rows.cc's.
TEST(NormConfig, MidBatchPairsOnlyWhereTheyCoverTheRow) {
  using Case = LaunchCase;
  for (const bool add : {false, true}) {
    for (const bool plain : {false, true}) {
      NormShape s;  // 132 SMs, bf16
      s.adds_residual = add;
      s.min_blocks_per_sm = add ? 1 : 2;
      s.whole_groups = true;
      s.outputs_apart = true;
      s.plain_form = plain;
      for (const int64_t rows : {128, 200, 256}) {
        SCOPED_TRACE("add=" + std::to_string(add) + " plain=" + std::to_string(plain) +
                     " rows=" + std::to_string(rows));
        for (const Case& k : {Case{1536, 64, 3}, Case{3072, 128, 3}, Case{6144, 256, 3},
                              Case{5120, 128, 5}, Case{3584, 128, 4}, Case{7168, 256, 4}}) {
          const NormConfig c = expect_registers_shape(s, k.cols, rows, k.threads_per_row, k.items);
          EXPECT_FALSE(c.trigger_after_writes);
        }
        // Power-of-two rows keep their pairs where the rules give them (the fused add's
        // mid-batch rule, or the plain form's).
        if (add || plain) expect_registers_shape(s, 4096, rows, 256, 2);
      }
    }
  }
  for (const bool add : {false, true}) {
    NormShape layer;  // no split kernels (as on HIP)
    layer.layer = true;
    layer.adds_residual = add;
    layer.min_blocks_per_sm = 2;
    layer.whole_groups = true;
    for (const int64_t rows : {256, 512}) {
      SCOPED_TRACE("layer add=" + std::to_string(add) + " rows=" + std::to_string(rows));
      expect_registers_shape(layer, 3072, rows, 128, 3);
      expect_registers_shape(layer, 2560, rows, 128, 3);
      expect_registers_shape(layer, 3584, rows, 128, 4);
      expect_registers_shape(layer, 5120, rows, 256, 3);
      expect_registers_shape(layer, 1536, rows, 128, 2);
      expect_registers_shape(layer, 896, rows, 64, 2);
    }
    expect_registers_shape(layer, 2560, 800, 128, 3);
    // Rows that one warp holds in three or four groups a lane take that warp rather than pairs:
    // exactly three (N = 768) at every batch that fills the GPU, four with the last partial (896)
    // from four rows an SM (528 here).
    for (const int64_t rows : {256, 512, 528, 1024, 2048}) {
      SCOPED_TRACE("layer add=" + std::to_string(add) + " rows=" + std::to_string(rows));
      expect_registers_shape(layer, 768, rows, 32, 3);
      expect_registers_shape(layer, 1024, rows, 64, 2);  // a power of two: pairs
      if (rows >= 528) expect_registers_shape(layer, 896, rows, 32, 4);
    }
    expect_registers_shape(layer, 896, 527, 64, 2);
    expect_registers_shape(layer, 768, 32, 128, 1);  // a decode batch: one group a thread
    NormShape unaligned = layer;
    unaligned.whole_groups = false;
    unaligned.narrow_accesses = true;
    expect_registers_shape(unaligned, 3072, 256, 256, 2);
  }
}

// RMSNorm's rows of fewer than 128 whole groups at batches that do not fill the GPU: three groups a
// thread where they cover the row exactly on 2^k threads (N = 768 bf16: 32 x 3, not 128 x 1), in
// every RMSNorm form, and five in the fp8 forms (N = 640: 16 x 5); LayerNorm, rows that are not
// whole groups and rows of other counts keep one group a thread.
TEST(NormConfig, ShortRowsOfOddGroupCountsTakeOddItemsAtSmallBatches) {
  using Case = LaunchCase;
  for (const bool add : {false, true}) {
    for (const bool fp8 : {false, true}) {
      NormShape rms = whole_rows(8, false, add);
      rms.fp8_output = fp8;
      SCOPED_TRACE(std::string(add ? "add " : "") + (fp8 ? "fp8" : ""));
      for (const int64_t rows : {1, 32, 128}) {
        for (const Case& k : {Case{768, 32, 3}, Case{384, 16, 3}, Case{192, 8, 3},
                              fp8 ? Case{640, 16, 5} : Case{640, 128, 1}, Case{896, 128, 1},
                              Case{512, 64, 1}}) {
          expect_registers_shape(rms, k.cols, rows, k.threads_per_row, k.items);
        }
      }
      // float32: 96 groups at N = 384.
      NormShape rms32 = whole_rows(4, false, add);
      rms32.fp8_output = fp8;
      expect_registers_shape(rms32, 384, 1, 32, 3);
      // Not whole groups: the bounds-tested kernel's one group a thread.
      NormShape partial = rms;
      partial.whole_groups = false;
      partial.narrow_accesses = true;
      expect_registers_shape(partial, 768, 1, 128, 1);
    }
  }
  const NormShape layer = whole_rows(8, true, false);
  expect_registers_shape(layer, 768, 1, 128, 1);
  expect_registers_shape(layer, 640, 32, 128, 1);
}

}  // namespace
}  // namespace fusekit::gpu
