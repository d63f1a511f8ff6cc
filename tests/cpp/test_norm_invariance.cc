// Batch invariance and determinism of the normalization ops, on every backend present.
//
// A row normalized inside a batch of 257 rows must be bitwise identical to the same row
// normalized alone, whether the lone row sits in a fresh aligned buffer or one element off
// alignment (which changes the kernels' access width but must not change the result); and two
// runs on the same inputs must be bitwise identical. Sizes cover both kernel paths.
#include <vector>

#include "gtest/gtest.h"
#include "norm_cases.h"

namespace fusekit::testing {
namespace {

using Param = std::tuple<Backend, NormOp>;

class NormInvariance : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    std::string reason;
    if (!backend_available(std::get<0>(GetParam()), &reason)) GTEST_SKIP() << reason;
  }
};

// The bits of out (and residual_out, rstd) of row `r` of a run.
std::vector<uint64_t> row_bits(const NormCase& c, const NormRun& run, int64_t r) {
  const RowBuffer& out = is_in_place(c.op) ? run.x : run.out;
  const RowBuffer& r_out = is_in_place(c.op) ? run.residual : run.residual_out;
  std::vector<uint64_t> bits;
  for (int64_t j = 0; j < c.cols; ++j) bits.push_back(out.raw(r, j));
  if (is_add(c.op)) {
    for (int64_t j = 0; j < c.cols; ++j) bits.push_back(r_out.raw(r, j));
  }
  if (c.stats) bits.push_back(run.rstd.raw(0, r));
  return bits;
}

TEST_P(NormInvariance, RowAloneEqualsRowInBatchAndRunsRepeat) {
  const Backend backend = std::get<0>(GetParam());
  const NormOp op = std::get<1>(GetParam());
  for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
    for (int64_t n : {769, 4096, 5125, 12288, 65536}) {
      NormCase batch;
      batch.op = op;
      batch.x_dtype = batch.weight_dtype = batch.residual_dtype = dtype;
      batch.rows = 257;
      batch.cols = n;
      batch.stats = true;
      batch.seed = static_cast<uint32_t>(n);
      SCOPED_TRACE(batch.name());
      NormRun inputs;
      const NormRun first = run_norm_case(batch, backend, &inputs);
      ASSERT_TRUE(first.status.ok()) << first.status.to_string();
      const NormRun second = run_norm_case(batch, backend);
      for (int64_t r = 0; r < batch.rows; ++r) {
        ASSERT_EQ(row_bits(batch, first, r), row_bits(batch, second, r))
            << "run-to-run difference in row " << r;
      }
      for (int64_t r : {int64_t{0}, int64_t{100}, batch.rows - 1}) {
        for (int64_t offset : {0, 1}) {
          NormCase alone = batch;
          alone.rows = 1;
          alone.x_offset = alone.out_offset = alone.residual_offset = offset;
          // The lone row holds row r's inputs; the weight is the batch's.
          const NormFill copy_row = [&](const std::string& name, RowBuffer& b, std::mt19937&) {
            const RowBuffer& from = name == "x"          ? inputs.x
                                    : name == "residual" ? inputs.residual
                                    : name == "weight"   ? inputs.weight
                                                         : inputs.bias;
            const int64_t src_row = b.rows() == 1 && from.rows() > 1 ? r : 0;
            for (int64_t j = 0; j < b.cols(); ++j) b.set(0, j, from.get(src_row, j));
          };
          const NormRun single = run_norm_case(alone, backend, nullptr, copy_row);
          ASSERT_TRUE(single.status.ok()) << single.status.to_string();
          EXPECT_EQ(row_bits(alone, single, 0), row_bits(batch, first, r))
              << "row " << r << " alone (offset " << offset << ") differs from the batch";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllOps, NormInvariance,
    ::testing::Combine(::testing::Values(Backend::kCPU, Backend::kGPU),
                       ::testing::Values(NormOp::kRms, NormOp::kAddRmsInPlace, NormOp::kAddRms,
                                         NormOp::kLayer, NormOp::kAddLayerInPlace,
                                         NormOp::kAddLayer)),
    [](const ::testing::TestParamInfo<Param>& info) {
      return std::string(backend_name(std::get<0>(info.param))) + "_" +
             norm_op_name(std::get<1>(info.param));
    });

}  // namespace
}  // namespace fusekit::testing
