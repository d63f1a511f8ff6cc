// Batch invariance and determinism of the gated-activation ops, on every backend present.
//
// A row computed inside a batch (of 257 rows, or 48) must be bitwise identical to the same row
// computed alone, whether the lone row sits in a fresh aligned buffer or one element off alignment
// (which changes the kernels' access width but must not change the result); and two runs on the
// same inputs must be bitwise identical (not compared under a sanitizer: repeat_runs_compared).
// That covers the fp8 codes and the per-row scales too. The sizes put the batch on the GPU's
// large-batch launch shape (four groups per thread, blocks looping over rows) and the lone row on
// its small-batch one, the quantized op's mid batch on its pair of cluster blocks a row and a
// decode-sized batch on fewer, wider clusters than the lone row's, and its longest row on its
// two-pass path.
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "act_cases.h"
#include "gtest/gtest.h"

namespace fusekit::testing {
namespace {

class ActInvariance : public ::testing::TestWithParam<ActParam> {
 protected:
  void SetUp() override {
    FUSEKIT_SKIP_UNLESS_AVAILABLE(std::get<0>(GetParam()));
  }
};

// The bits of everything row `r` of a run wrote: out (or grad_x / grad_gate), grad_up, scale.
std::vector<uint64_t> row_bits(const ActRun& run, int64_t r) {
  std::vector<uint64_t> bits;
  for (int64_t j = 0; j < run.out.cols(); ++j) bits.push_back(run.out.raw(r, j));
  for (int64_t j = 0; j < run.grad_up.cols(); ++j) bits.push_back(run.grad_up.raw(r, j));
  if (run.scale.cols() > 0) bits.push_back(run.scale.raw(0, r));
  return bits;
}

void copy_row(const RowBuffer& from, int64_t r, RowBuffer& to) {
  for (int64_t j = 0; j < to.cols(); ++j) to.set(0, j, from.get(r, j));
}

// A batch of the quantized op's, bf16 with a fused input, seeded by its row length.
ActCase quant_batch(Activation act, int64_t rows, int64_t cols, Fp8Format format) {
  ActCase c;
  c.act = act;
  c.mode = ActMode::kQuantFp8;
  c.dtype = DType::kBFloat16;
  c.rows = rows;
  c.cols = cols;
  c.format = format;
  c.seed = static_cast<uint32_t>(cols);
  return c;
}

std::vector<ActCase> batch_cases(Activation act, ActMode mode) {
  std::vector<ActCase> cases;
  for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
    for (ActLayout layout : {ActLayout::kFused, ActLayout::kSplitSeparate}) {
      for (int64_t n : {7, 769, 5125, 14336}) {
        // The longest rows once per activation and mode (CPU time): bf16, fused input.
        if (n == 14336 && (dtype != DType::kBFloat16 || layout != ActLayout::kFused)) continue;
        for (Fp8Format format : {Fp8Format::kE4M3FN, Fp8Format::kE4M3FNUZ}) {
          if (mode != ActMode::kQuantFp8 && format != Fp8Format::kE4M3FN) continue;
          ActCase c;
          c.act = act;
          c.mode = mode;
          c.layout = layout;
          c.dtype = dtype;
          c.rows = 257;
          c.cols = n;
          c.format = format;
          c.seed = static_cast<uint32_t>(n) + static_cast<uint32_t>(dtype);
          cases.push_back(c);
        }
      }
    }
  }
  if (mode == ActMode::kQuantFp8) {
    const Fp8Format format = act == Activation::kGelu ? Fp8Format::kE4M3FNUZ : Fp8Format::kE4M3FN;
    // A mid batch whose rows each take a pair of a cluster's blocks on a GPU of about 132 SMs or
    // more (N = 4096 bf16: 2 x 128 threads at two groups each; MidBatchesSplitRowsOverPairs),
    // against the lone row's decode split (three blocks at one group each).
    cases.push_back(quant_batch(act, 257, 4096, format));
    // A decode-sized batch past kActQuantSplitThreadsPerSm at one group a thread (48 rows of
    // N = 11008 on 132 SMs: two groups a thread in 4 x 192), against the lone row's 7 x 224.
    cases.push_back(quant_batch(act, 48, 11008, format));
  }
  if (mode == ActMode::kQuantFp8 && act == Activation::kSilu) {
    // Beyond 1024 threads x 32 elements and beyond an eight-block cluster (N = 57344 bf16): the
    // GPU's two-pass quantizer (shared by every activation, so once).
    ActCase c = quant_batch(act, 257, 66000, Fp8Format::kE4M3FNUZ);
    c.scale_upper_bound = 0.05f;
    cases.push_back(c);
    // Past the compact block (N > 14336): a cluster per row at every batch, four groups per
    // thread in the batch and fewer alone (the decode split), in both dtypes.
    for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
      c = quant_batch(act, 257, 18944,
                      dtype == DType::kFloat32 ? Fp8Format::kE4M3FNUZ : Fp8Format::kE4M3FN);
      c.dtype = dtype;
      c.seed = 18944 + static_cast<uint32_t>(dtype);
      cases.push_back(c);
    }
    // Past 1024 threads x 32 elements, within eight blocks: a cluster of seven.
    cases.push_back(quant_batch(act, 257, 45000, Fp8Format::kE4M3FNUZ));
  }
  return cases;
}

TEST_P(ActInvariance, RowAloneEqualsRowInBatchAndRunsRepeat) {
  const auto [backend, act, mode] = GetParam();
  for (const ActCase& batch : batch_cases(act, mode)) {
    SCOPED_TRACE(batch.name());
    const ActRun first = run_act_case(batch, backend);
    ASSERT_TRUE(first.status.ok()) << first.status.to_string();
    // The inputs are finite, so any NaN left is unwritten poison (every column, grad_up and the
    // scales too: row_bits of two runs that both wrote nothing would compare equal).
    ASSERT_TRUE(first.out.rows_hold_no_nan()) << "an output element was not written";
    if (first.grad_up.cols() > 0) ASSERT_TRUE(first.grad_up.rows_hold_no_nan());
    if (first.scale.cols() > 0) ASSERT_TRUE(first.scale.rows_hold_no_nan());
    if (repeat_runs_compared()) {
      const ActRun second = run_act_case(batch, backend);
      ASSERT_TRUE(second.status.ok()) << second.status.to_string();
      for (int64_t r = 0; r < batch.rows; ++r) {
        ASSERT_EQ(row_bits(first, r), row_bits(second, r)) << "run-to-run difference in row " << r;
      }
    }
    for (int64_t r : {int64_t{0}, batch.rows / 2, batch.rows - 1}) {
      for (int64_t offset : {0, 1}) {
        ActCase alone = batch;
        alone.rows = 1;
        alone.in_offset = alone.out_offset = offset;
        const ActFill row_r = [&](ActRun& lone, std::mt19937&) {
          copy_row(first.in, r, lone.in);
          if (lone.up.cols() > 0) copy_row(first.up, r, lone.up);
          if (lone.grad_out.cols() > 0) copy_row(first.grad_out, r, lone.grad_out);
        };
        const ActRun single = run_act_case(alone, backend, row_r);
        ASSERT_TRUE(single.status.ok()) << single.status.to_string();
        EXPECT_EQ(row_bits(single, 0), row_bits(first, r))
            << "row " << r << " alone (offset " << offset << ") differs from the batch";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, ActInvariance, every_act_param(), act_param_name);

}  // namespace
}  // namespace fusekit::testing
