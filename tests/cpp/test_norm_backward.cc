// The normalization backward passes against the float64 reference, on every backend present:
// every dtype combination, odd and long rows (long enough that the GPU sums parameter gradients in
// global memory instead of shared memory), M in {0, 1, 3, 257}, strided and unaligned rows, each
// gradient requested or not, Gemma's weight offset; then run-to-run determinism of every output
// and batch invariance of the input gradient; on the CPU, the same bits whatever the thread count.
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "gtest/gtest.h"
#include "norm_backward_cases.h"

namespace fusekit::testing {
namespace {

using Param = std::tuple<Backend, BackwardOp>;

class NormBackward : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    FUSEKIT_SKIP_UNLESS_AVAILABLE(backend());
  }
  Backend backend() const { return std::get<0>(GetParam()); }
  BackwardOp op() const { return std::get<1>(GetParam()); }

  // grad_out's dtype; h's: grad_out's or (after a fused add) float32; weight: grad_out's or
  // float32.
  std::vector<BackwardCase> dtype_combinations() const {
    std::vector<BackwardCase> out;
    for (DType g : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      const std::vector<DType> g_or_float =
          g == DType::kFloat32 ? std::vector<DType>{g} : std::vector<DType>{g, DType::kFloat32};
      for (DType w : g_or_float) {
        for (DType x : backward_is_add(op()) ? g_or_float : std::vector<DType>{g}) {
          BackwardCase c;
          c.op = op();
          c.grad_dtype = g;
          c.x_dtype = x;
          c.weight_dtype = w;
          out.push_back(c);
        }
      }
    }
    return out;
  }

  void expect_case(const BackwardCase& c) {
    SCOPED_TRACE(c.name());
    EXPECT_TRUE(check_backward_run(c, run_backward_case(c, backend())));
  }
};

TEST_P(NormBackward, DtypesSizesAndBatches) {
  uint32_t seed = 1;
  for (BackwardCase c : dtype_combinations()) {
    for (int64_t n : {1, 7, 64, 769, 4096, 5125}) {
      for (int64_t m : {0, 1, 3, 257}) {
        c.rows = m;
        c.cols = n;
        c.seed = seed++;
        expect_case(c);
      }
    }
  }
}

TEST_P(NormBackward, LongRows) {
  // 32768 floats of weight and bias sums per row, 65545 of weight sums: more than a block's
  // shared memory, so the GPU sums in the workspace.
  for (int64_t n : {12288, 32768, 65545}) {
    BackwardCase c;
    c.op = op();
    c.rows = 5;
    c.cols = n;
    c.seed = static_cast<uint32_t>(n);
    expect_case(c);
  }
}

TEST_P(NormBackward, StridedUnalignedAndOptionalGradients) {
  uint32_t seed = 500;
  for (BackwardCase c : dtype_combinations()) {
    for (int64_t n : {8, 769, 4096}) {
      c.cols = n;
      c.rows = 7;
      c.seed = seed++;
      c.pad = 3;  // odd row strides: narrow accesses
      expect_case(c);
      c.pad = 8;
      c.offset = 1;  // unaligned bases
      expect_case(c);
      c.pad = 0;
      c.offset = 0;
      c.weight_grad = false;  // grad_x alone (and grad_bias for layer norms)
      expect_case(c);
      c.weight_grad = true;
      c.bias_grad = false;
      expect_case(c);
      c.bias_grad = true;
    }
  }
}

TEST_P(NormBackward, WeightOffsetAndNoWeight) {
  BackwardCase c;
  c.op = op();
  c.rows = 33;
  c.cols = 1000;
  if (backward_is_layer(op())) {
    c.has_weight = false;  // LayerNorm without weight (grad_bias alone, or nothing)
    expect_case(c);
    c.bias_grad = false;
    expect_case(c);
  } else {
    c.weight_offset = 1.0f;  // Gemma: (1 + w)
    expect_case(c);
  }
}

// The bits of every output of a run: grad_x rows, then grad_weight and grad_bias.
std::vector<uint64_t> output_bits(const BackwardRun& run, int64_t first_row, int64_t rows) {
  std::vector<uint64_t> bits;
  for (int64_t r = first_row; r < first_row + rows; ++r) {
    for (int64_t j = 0; j < run.grad_x.cols(); ++j) bits.push_back(run.grad_x.raw(r, j));
  }
  return bits;
}

std::vector<uint64_t> param_bits(const BackwardRun& run) {
  std::vector<uint64_t> bits;
  for (const RowBuffer* b : {&run.grad_weight, &run.grad_bias}) {
    for (int64_t j = 0; j < b->cols() && b->rows() > 0; ++j) bits.push_back(b->raw(0, j));
  }
  return bits;
}

TEST_P(NormBackward, DeterministicAndBatchInvariant) {
  for (int64_t n : {769, 4096, 32768}) {
    BackwardCase batch;
    batch.op = op();
    batch.rows = backend() == Backend::kGPU ? 3000 : 300;
    batch.cols = n;
    batch.seed = static_cast<uint32_t>(n);
    SCOPED_TRACE(batch.name());
    const BackwardRun first = run_backward_case(batch, backend());
    ASSERT_TRUE(first.status.ok()) << first.status.to_string();
    // Finite inputs: a NaN left is unwritten poison, which the bit comparisons would accept.
    ASSERT_TRUE(first.grad_x.rows_hold_no_nan());
    ASSERT_TRUE(first.grad_weight.rows_hold_no_nan());
    ASSERT_TRUE(first.grad_bias.rows_hold_no_nan());
    const BackwardRun second = run_backward_case(batch, backend());
    EXPECT_EQ(output_bits(first, 0, batch.rows), output_bits(second, 0, batch.rows));
    EXPECT_EQ(param_bits(first), param_bits(second));
    // The first row alone (the same inputs: rows are drawn one by one) gives the same grad_x bits.
    BackwardCase alone = batch;
    alone.rows = 1;
    const BackwardRun single = run_backward_case(alone, backend());
    ASSERT_TRUE(single.status.ok()) << single.status.to_string();
    EXPECT_EQ(output_bits(single, 0, 1), output_bits(first, 0, 1));
  }
}

// The CPU's partial ranges are OpenMP work items: one thread, two or three (more than this
// machine may have cores) must give the same bits, the parameter sums included.
TEST_P(NormBackward, CpuThreadCountDoesNotChangeBits) {
#if defined(_OPENMP)
  if (backend() != Backend::kCPU) GTEST_SKIP() << "a CPU backend property";
  // Restores the thread count however the test ends.
  struct ThreadCountGuard {
    int before = omp_get_max_threads();
    ~ThreadCountGuard() { omp_set_num_threads(before); }
  } guard;
  for (int64_t n : {769, 4096}) {
    BackwardCase c;
    c.op = op();
    c.rows = 301;  // ten partial ranges on the CPU, of 30 and 31 rows
    c.cols = n;
    c.seed = static_cast<uint32_t>(n + 7);
    SCOPED_TRACE(c.name());
    std::vector<BackwardRun> runs;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      runs.push_back(run_backward_case(c, backend()));
      ASSERT_TRUE(runs.back().status.ok()) << runs.back().status.to_string();
    }
    for (size_t i = 1; i < runs.size(); ++i) {
      EXPECT_EQ(output_bits(runs[0], 0, c.rows), output_bits(runs[i], 0, c.rows));
      EXPECT_EQ(param_bits(runs[0]), param_bits(runs[i]));
    }
  }
#else
  GTEST_SKIP() << "built without OpenMP: the CPU backend runs on one thread";
#endif
}

INSTANTIATE_TEST_SUITE_P(
    AllOps, NormBackward,
    ::testing::Combine(::testing::Values(Backend::kCPU, Backend::kGPU),
                       ::testing::Values(BackwardOp::kRms, BackwardOp::kAddRms,
                                         BackwardOp::kLayer, BackwardOp::kAddLayer)),
    [](const ::testing::TestParamInfo<Param>& info) {
      return std::string(backend_name(std::get<0>(info.param))) + "_" +
             backward_op_name(std::get<1>(info.param));
    });

TEST(NormBackwardWorkspace, PartialsAndSize) {
  EXPECT_EQ(norm_backward_partials(0), 0);
  EXPECT_EQ(norm_backward_partials(1), 1);
  EXPECT_EQ(norm_backward_partials(4), 1);
  EXPECT_EQ(norm_backward_partials(5), 2);
  EXPECT_EQ(norm_backward_partials(2048), 512);
  EXPECT_EQ(norm_backward_partials(int64_t{1} << 40), 512);
  EXPECT_EQ(norm_backward_workspace_size(100, 4096, false, false), 0);
  EXPECT_EQ(norm_backward_workspace_size(100, 4096, true, false), 25 * 4096);
  EXPECT_EQ(norm_backward_workspace_size(100, 4096, true, true), 25 * 2 * 4096);
  EXPECT_EQ(norm_backward_workspace_size(0, 4096, true, true), 0);
}

}  // namespace
}  // namespace fusekit::testing
