// The norm launch heuristic's rules for LayerNorm (plain C++, no GPU needed): where its rows take
// two groups per thread, and its plain form's launches.
#include <initializer_list>
#include <string>

#include "gpu/norm/norm_config.h"
#include "gtest/gtest.h"
#include "norm_config_expect.h"

namespace fusekit::gpu {
namespace {

// LayerNorm's bf16 rows of whole groups on 132 SMs, outputs apart from the inputs, with or without
// the add (two blocks per SM).
NormShape layer_whole_rows(bool add) {
  NormShape s;
  s.layer = true;
  s.adds_residual = add;
  s.min_blocks_per_sm = 2;
  s.whole_groups = true;
  s.outputs_apart = true;
  return s;
}

// LayerNorm, with or without the add (two blocks per SM), takes two groups per thread at mid
// batches (up to twice the fused add's bound: 528 rows of N = 4096 on 132 SMs) where 256 threads
// cover the row; longer rows keep four, as do larger batches of LayerNorm alone (its fused add's
// rows of whole groups keep two: LayerNormFusedAddPairsAtLargeBatches).
// Each case for LayerNorm with and without the add (bf16, two blocks per SM).
void expect_layer_norm_shapes(std::initializer_list<RegistersCase> cases,
                              std::initializer_list<bool> adds = {false, true}) {
  for (const bool add : adds) {
    for (const RegistersCase& k : cases) {
      SCOPED_TRACE("add=" + std::to_string(add));
      NormShape s;
      s.layer = true;
      s.adds_residual = add;
      s.min_blocks_per_sm = 2;
      expect_registers_shape(s, k.cols, k.rows, k.threads_per_row, k.items);
    }
  }
}

TEST(NormConfig, LayerNormShapesAtMidBatches) {
  expect_layer_norm_shapes({{2048, 256, 128, 2}, {4096, 128, 256, 2}, {4096, 256, 256, 2},
                            {4096, 528, 256, 2}, {2048, 1056, 128, 2}, {8192, 256, 256, 4}});
  // Past the mid batches LayerNorm alone takes four groups per thread (the fused add: below).
  expect_layer_norm_shapes({{4096, 529, 128, 4}, {4096, 2048, 128, 4}, {2048, 1057, 64, 4},
                            {8192, 16384, 256, 4}},
                           {false});
}

// LayerNorm's fused add in its two-blocks-per-SM kernels (bf16, one dtype) keeps two groups per
// thread at every batch that fills the GPU where they cover the row exactly on 64 to 512 threads
// (whole groups: N = 1024-8192 bf16). Other row lengths, rows off the 16-byte group, LayerNorm
// alone, fp32 x and the kernels of one block per SM (fp16, mixed dtypes) keep their own rules.
TEST(NormConfig, LayerNormFusedAddPairsAtLargeBatches) {
  for (const int64_t rows : {529, 1057, 2048, 4096, 16384, 65536}) {
    NormShape s;
    s.layer = true;
    s.adds_residual = true;
    s.min_blocks_per_sm = 2;
    s.whole_groups = true;
    for (const RegistersCase& k : {RegistersCase{1024, rows, 64, 2},
                                   RegistersCase{2048, rows, 128, 2},
                                   RegistersCase{4096, rows, 256, 2},
                                   RegistersCase{8192, rows, 512, 2},
                                   RegistersCase{16384, rows, 512, 4}}) {
      expect_registers_shape(s, k.cols, k.rows, k.threads_per_row, k.items);
    }
    s.rows = rows;
    s.cols = 5120;  // 640 groups: no pairs cover them
    EXPECT_NE(choose_norm_config(s).items, 2);
    s.cols = 4096;
    s.whole_groups = false;  // rows off the 16-byte group: test_norm_odd_rows.cc's rules
    s.narrow_accesses = true;
    EXPECT_NE(choose_norm_config(s).items, 2);
    if (rows < 2048) continue;  // below: LayerNorm's mid batches, pairs in every kernel
    s.narrow_accesses = false;
    s.whole_groups = true;
    s.adds_residual = false;  // LayerNorm alone
    expect_registers_shape(s, 2048, rows, 64, 4);
    expect_registers_shape(s, 8192, rows, 256, 4);
    s.adds_residual = true;
    s.min_blocks_per_sm = 1;  // fp16 x, or mixed dtypes
    expect_registers_shape(s, 2048, rows, 64, 4);
    expect_registers_shape(s, 4096, rows, 128, 4);
    s.min_blocks_per_sm = 2;
    s.group_elems = 4;  // fp32 x: 512 groups at N = 2048
    expect_registers_shape(s, 2048, rows, 128, 4);
  }
  // Below a full GPU the rules of small batches hold: N = 1024 on one group a thread.
  NormShape s;
  s.layer = true;
  s.adds_residual = true;
  s.min_blocks_per_sm = 2;
  s.whole_groups = true;
  expect_registers_shape(s, 1024, 1, 128, 1);
}

// LayerNorm, with or without the add, takes two groups per thread at small batches where 128 to
// 512 threads cover the row exactly that way (its weight and bias then load beside the row);
// other lengths, and its fp8-free peers, keep the rules above.
TEST(NormConfig, LayerNormPairsAtSmallBatches) {
  expect_layer_norm_shapes({{2048, 1, 128, 2}, {2048, 32, 128, 2}, {4096, 1, 256, 2},
                            {4096, 32, 256, 2}, {4096, 64, 256, 2}, {8192, 1, 512, 2},
                            {8192, 64, 512, 2}, {1024, 1, 128, 1}, {16384, 1, 512, 4},
                            {5120, 1, 256, 4}, {4104, 1, 256, 4}});
  // RMSNorm keeps its own spread at N = 4096: 128 threads alone, 512 with the add.
  NormShape rms;
  expect_registers_shape(rms, 4096, 1, 128, 4);
  rms.adds_residual = true;
  rms.min_blocks_per_sm = 1;
  expect_registers_shape(rms, 4096, 1, 512, 1);
}

// LayerNorm's plain form keeps the launch shapes and trigger of its other calls and takes the
// plain kernels: at every batch alone, up to twice as many rows as SMs with the fused add. But
// for LayerNorm alone's rows that three groups a thread cover on 64 threads (1536), which take
// those where its other calls take pairs (LayerNormPairsOnRowsOfUpTo256GroupsEndAtABatchBound).
TEST(NormConfig, LayerNormPlainFormKeepsItsShapes) {
  for (const bool add : {false, true}) {
    NormShape s = layer_whole_rows(add);
    for (const int64_t rows : {1, 32, 128, 264, 265, 2048, 65536}) {
      // Rows of 2^k groups, and of three or five groups a thread (1536 = 64 x 3, 3072, 5120 =
      // 128 x 5, 6144, 12288 = 512 x 3), whose plain kernels LayerNorm alone has too.
      for (const int64_t cols : {2048, 4096, 8192, 16384, 1536, 3072, 5120, 6144, 12288}) {
        s.rows = rows;
        s.cols = cols;
        s.plain_form = false;
        const NormConfig other = choose_norm_config(s);
        s.plain_form = true;
        const NormConfig plain = choose_norm_config(s);
        SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + " " + plain.to_string());
        if (!add && cols == 1536) {  // layer_plain_three_rows
          EXPECT_EQ(plain.threads_per_row, 64);
          EXPECT_EQ(plain.items, 3);
        } else {
          EXPECT_EQ(plain.threads_per_row, other.threads_per_row);
          EXPECT_EQ(plain.items, other.items);
        }
        EXPECT_EQ(plain.trigger_after_writes, other.trigger_after_writes);
        // The fused add's plain kernels past 2 x SMs rows only on 512 threads x 4 groups.
        EXPECT_EQ(plain.plain, !add || rows <= 264 || cols == 16384);
        EXPECT_FALSE(other.plain);
      }
    }
  }
  // LayerNorm alone's one-group rows (N = 768: 96 groups, one a thread on 128 threads) keep the
  // bound of twice as many rows as SMs.
  NormShape one_group = layer_whole_rows(false);
  one_group.fixed_threads_built = true;
  one_group.plain_form = true;
  EXPECT_TRUE(expect_registers_shape(one_group, 768, 264, 128, 1).plain);
  EXPECT_FALSE(expect_registers_shape(one_group, 768, 1056, 128, 1).plain);
}

// LayerNorm's rows of 129-255 whole groups, not a power of two (N = 1032-2040 bf16), keep their
// mid-batch pairs (and the split of two blocks up to twice as many rows as SMs) only up to 1024
// groups an SM, and LayerNorm alone's plain calls none where three groups a thread on 64 threads
// cover the row (N = 1032-1536): those take that, one block a row, at every batch (bench/NOTES.md,
// "Norm v59", "Norm v60").
TEST(NormConfig, LayerNormPairsOnRowsOfUpTo256GroupsEndAtABatchBound) {
  for (const bool add : {false, true}) {
    for (const bool plain : {false, true}) {
      NormShape s = layer_whole_rows(add);
      s.plain_form = plain;
      s.split_rows_built = true;
      s.fixed_threads_built = true;
      s.max_cluster_blocks = 8;
      SCOPED_TRACE("add=" + std::to_string(add) + " plain=" + std::to_string(plain));
      const bool three_alone = plain && !add;
      for (const int64_t cols : {1152, 1280, 1536, 1792, 2040}) {
        const bool three_cover = cols <= 1536;
        const int64_t bound_rows = 1024 * s.sm_count / (cols / 8);
        const int past_threads = 64;
        const int past_items = three_cover ? 3 : 4;
        for (const int64_t rows : {int64_t{512}, bound_rows}) {
          if (three_alone && three_cover) {
            expect_registers_shape(s, cols, rows, past_threads, past_items);
          } else {
            expect_registers_shape(s, cols, rows, 128, 2);
          }
        }
        expect_registers_shape(s, cols, bound_rows + 1, past_threads, past_items);
        // Up to twice as many rows as SMs the other forms split their pairs over two blocks (four
        // up to half as many), LayerNorm alone's plain three keep one block a row.
        const bool unsplit = three_alone && three_cover;
        const int64_t sms = s.sm_count;
        for (const int64_t rows : {int64_t{1}, sms / 2, sms / 2 + 1, sms, int64_t{256}}) {
          const NormConfig mid = expect_registers_shape(s, cols, rows, unsplit ? 64 : 128,
                                                        unsplit ? 3 : 2);
          EXPECT_EQ(mid.split_blocks, unsplit ? 1 : 2 * rows <= s.sm_count ? 4 : 2);
          EXPECT_EQ(mid.plain, plain);
        }
      }
    }
  }
}

// Plain rows of three groups on 256 and 512 threads without the add, LayerNorm's and RMSNorm's,
// take the kernels of more blocks an SM (NormConfig::packed_row, in the plain form) past twice
// the rows that the SMs hold at 1024 threads (132 SMs: 1056 rows of 256 threads, 528 of 512), in
// 16-bit rows whose fixed-thread kernels are built; not in the general form, with the add, on
// fewer threads, at five groups or four.
TEST(NormConfig, PlainRowsPackedPastTwoWaves) {
  for (const bool layer : {true, false}) {
    SCOPED_TRACE(layer ? "layer_norm" : "rms_norm");
    NormShape s;  // 132 SMs, bf16
    s.layer = layer;
    s.min_blocks_per_sm = 2;
    s.whole_groups = true;
    s.outputs_apart = true;
    s.fixed_threads_built = true;
    s.plain_form = true;
    struct Case {
      int64_t cols, rows;
      int threads, items;
      bool packed;
    };
    for (const Case& k : {Case{12288, 528, 512, 3, false}, Case{12288, 529, 512, 3, true},
                          Case{12288, 65536, 512, 3, true}, Case{6144, 1056, 256, 3, false},
                          Case{6144, 1057, 256, 3, true}, Case{6144, 16384, 256, 3, true},
                          Case{3072, 16384, 128, 3, false}, Case{1536, 16384, 64, 3, false},
                          Case{10240, 16384, 256, 5, false}, Case{16384, 16384, 512, 4, false}}) {
      SCOPED_TRACE(std::to_string(k.rows) + " x " + std::to_string(k.cols));
      const NormConfig c = expect_registers_shape(s, k.cols, k.rows, k.threads, k.items);
      EXPECT_EQ(c.packed_row, k.packed);
      if (c.packed_row) EXPECT_TRUE(c.plain);  // the packed kernels are plain ones
    }
    // The general form, 32-bit rows (no fixed-thread kernels: N = 6144 is 1536 groups of four),
    // the fused add.
    NormShape general = s;
    general.plain_form = false;
    NormShape float32 = s;
    float32.group_elems = 4;
    float32.source_elem_bytes = 4;
    float32.fixed_threads_built = false;
    NormShape add = s;
    add.adds_residual = true;
    add.min_blocks_per_sm = layer ? 2 : 1;
    for (NormShape other : {general, float32, add}) {
      other.rows = 16384;
      for (const int64_t cols : {6144, 12288}) {
        other.cols = cols;
        const NormConfig c = choose_norm_config(other);
        SCOPED_TRACE(std::to_string(cols) + " " + c.to_string());
        EXPECT_FALSE(c.packed_row);
      }
    }
  }
}

}  // namespace
}  // namespace fusekit::gpu
