// Batch invariance and determinism of RMSNorm with an fp8 output, on every backend present.
//
// A row normalized and quantized inside a batch must be bitwise identical to the same row done
// alone, whether the lone row sits in a fresh aligned buffer or one element off alignment (which
// changes the kernels' access width but must not change the result); and two runs on the same
// inputs must be bitwise identical (not compared under a sanitizer: repeat_runs_compared). That
// covers the codes, the per-row scales and residual_out. On the GPU the batch is large enough
// for its large-batch launch shape.
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "norm_fp8_cases.h"

namespace fusekit::testing {
namespace {

using Param = std::tuple<Backend, NormFp8Op, Fp8Scale>;

class NormFp8Invariance : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    FUSEKIT_SKIP_UNLESS_AVAILABLE(std::get<0>(GetParam()));
  }
};

TEST_P(NormFp8Invariance, RowAloneEqualsRowInBatchAndRunsRepeat) {
  const auto [backend, op, scale] = GetParam();
  for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
    for (int64_t n :
         {64, 769, 2304, 3072, 4096, 5120, 5125, 5376, 14336, 20000, 20480, 32768}) {
      // N = 3072 and 5120 exercise the GPU's three- and five-groups-per-thread kernels, 2304 its
      // five, 5376 its three and 14336 (bf16) its four with each thread's last group partly past
      // the row (2304 in fp32 at five too), 64 its blocks of many short rows (16384 of them fill
      // the GPU), 20000 its staged path, 32768 its cluster path in 2 blocks (bf16), 20480 in 5 and
      // 14336 (float32) in 7; the CPU has no such path.
      if ((n == 2304 || n == 3072 || n == 5120 || n == 5376 || n > 16384) &&
          backend != Backend::kGPU) {
        continue;
      }
      NormFp8Case batch;
      batch.op = op;
      batch.scale = scale;
      batch.format = n == 5125 ? Fp8Format::kE4M3FNUZ : Fp8Format::kE4M3FN;
      batch.x_dtype = batch.weight_dtype = dtype;
      batch.residual_dtype = DType::kFloat32;  // an fp32 residual stream
      batch.rows = backend == Backend::kGPU ? (n == 64 ? 16384 : 1100) : 257;
      batch.cols = n;
      batch.scale_upper_bound = n == 769 ? 5e-3f : 0.0f;
      batch.seed = static_cast<uint32_t>(n) + static_cast<uint32_t>(dtype);
      SCOPED_TRACE(batch.name());
      NormFp8Run inputs;
      const NormFp8Run first = run_norm_fp8_case(batch, backend, &inputs);
      ASSERT_TRUE(first.status.ok()) << first.status.to_string();
      for (int64_t r = 0; r < batch.rows; ++r) {
        ASSERT_FALSE(std::isnan(first.out.get(r, 0))) << "row " << r << " was not written";
      }
      if (repeat_runs_compared()) {
        const NormFp8Run second = run_norm_fp8_case(batch, backend);
        ASSERT_TRUE(second.status.ok()) << second.status.to_string();
        for (int64_t r = 0; r < batch.rows; ++r) {
          ASSERT_EQ(norm_fp8_row_bits(batch, first, r), norm_fp8_row_bits(batch, second, r))
              << "run-to-run difference in row " << r;
        }
      }
      for (int64_t r : {int64_t{0}, batch.rows / 2, batch.rows - 1}) {
        for (int64_t offset : {0, 1}) {
          NormFp8Case alone = batch;
          alone.rows = 1;
          alone.x_offset = alone.out_offset = alone.residual_offset = offset;
          // The lone row holds row r's inputs; the weight is the batch's.
          const NormFp8Fill row_r = [&](const std::string& name, RowBuffer& b, std::mt19937&) {
            const RowBuffer& from = name == "x"          ? inputs.x
                                    : name == "residual" ? inputs.residual
                                                         : inputs.weight;
            const int64_t src_row = name == "weight" ? 0 : r;
            for (int64_t j = 0; j < b.cols(); ++j) b.set(0, j, from.get(src_row, j));
          };
          const NormFp8Run single = run_norm_fp8_case(alone, backend, nullptr, row_r);
          ASSERT_TRUE(single.status.ok()) << single.status.to_string();
          EXPECT_EQ(norm_fp8_row_bits(alone, single, 0), norm_fp8_row_bits(batch, first, r))
              << "row " << r << " alone (offset " << offset << ") differs from the batch";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllOps, NormFp8Invariance,
    ::testing::Combine(::testing::Values(Backend::kCPU, Backend::kGPU),
                       ::testing::Values(NormFp8Op::kRms, NormFp8Op::kAddRms),
                       ::testing::Values(Fp8Scale::kDynamic, Fp8Scale::kStatic)),
    [](const ::testing::TestParamInfo<Param>& info) {
      return std::string(backend_name(std::get<0>(info.param))) + "_" +
             norm_fp8_op_name(std::get<1>(info.param), std::get<2>(info.param));
    });

}  // namespace
}  // namespace fusekit::testing
