// The normalization ops against the float64 reference, on every backend present: every dtype
// combination, odd and large N, M in {0, 1, 3, 257}, strided rows, unaligned base pointers,
// rank-3 and 1-D views, and each option; and RMSNorm's product order, bit for bit in float32.
// Outputs are poisoned with NaN before every call.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "norm_cases.h"

namespace fusekit::testing {
namespace {

using Param = std::tuple<Backend, NormOp>;

class NormValues : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    FUSEKIT_SKIP_UNLESS_AVAILABLE(backend());
  }
  Backend backend() const { return std::get<0>(GetParam()); }
  NormOp op() const { return std::get<1>(GetParam()); }

  // Every supported combination: x dtype; weight x's or float32; residual x's or float32.
  std::vector<NormCase> dtype_combinations() const {
    std::vector<NormCase> out;
    for (DType x : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      const std::vector<DType> x_or_float =
          x == DType::kFloat32 ? std::vector<DType>{x} : std::vector<DType>{x, DType::kFloat32};
      for (DType w : x_or_float) {
        for (DType r : is_add(op()) ? x_or_float : std::vector<DType>{x}) {
          NormCase c;
          c.op = op();
          c.x_dtype = x;
          c.weight_dtype = w;
          c.residual_dtype = r;
          c.eps = is_layer(op()) ? 1e-5f : 1e-6f;
          out.push_back(c);
        }
      }
    }
    return out;
  }

  void expect_case(const NormCase& c) {
    SCOPED_TRACE(c.name());
    NormRun before;
    const NormRun run = run_norm_case(c, backend(), &before);
    EXPECT_TRUE(check_norm_run(c, before, run));
  }
};

TEST_P(NormValues, DtypesSizesAndBatches) {
  uint32_t seed = 1;
  for (NormCase c : dtype_combinations()) {
    for (int64_t n :
         {1, 7, 64, 640, 768, 769, 2304, 3072, 4096, 5120, 5125, 8192, 12288, 14336, 16384}) {
      // The GPU's three- and five-group kernels (N = 12288 also takes three on the GPU, and runs
      // on the CPU as a long row; 2304 takes three with each thread's last group partly past the
      // row; RMSNorm's 768 bf16 takes three at small batches too, and 640 five in the fp8 forms).
      if ((n == 2304 || n == 3072 || n == 5120) && backend() != Backend::kGPU) continue;
      for (int64_t m : {0, 1, 3, 257}) {
        // Many rows of long rows only for the single-dtype combinations: the mixed ones share
        // every code path but the conversions, which short batches cover.
        const bool single_dtype = c.weight_dtype == c.x_dtype && c.residual_dtype == c.x_dtype;
        if (m == 257 && n > 5125 && !single_dtype) continue;
        c.rows = m;
        c.cols = n;
        c.seed = seed++;
        expect_case(c);
      }
    }
  }
}

TEST_P(NormValues, StridedRowsUnalignedBasesRank3AndRuns) {
  uint32_t seed = 1000;
  for (NormCase c : dtype_combinations()) {
    for (int64_t n : {8, 769, 4096, 5125, 12288}) {
      c.cols = n;
      c.seed = seed++;
      for_each_row_layout(c, [this](const NormCase& v) { expect_case(v); });
      // Rows in runs (rms_norm and layer_norm): [3, 3, N] views of x and out whose three runs
      // of three rows lie further apart than their rows (per-head views of a fused projection's
      // output).
      if (is_add(c.op)) continue;
      NormCase runs = c;
      runs.rows = 9;
      runs.rank3_d0 = 3;
      runs.x_pad = 16;
      runs.out_pad = 8;
      runs.x_run_gap = 40;
      runs.out_run_gap = 8;
      expect_case(runs);
    }
  }
}

TEST_P(NormValues, Options) {
  uint32_t seed = 2000;
  for (NormCase c : dtype_combinations()) {
    for (int64_t n : {769, 4096, 12288}) {
      c.cols = n;
      c.rows = 3;
      c.seed = seed++;
      c.stats = true;
      expect_case(c);
      c.stats = false;
      if (!is_layer(op())) {
        c.weight_offset = 1.0f;  // Gemma: (1 + w)
        expect_case(c);
        c.weight_offset = 0.0f;
      }
      c.weight_after_cast = true;  // Hugging Face Llama order
      expect_case(c);
      c.weight_after_cast = false;
      if (is_layer(op())) {
        c.input_mean = 5.0;  // a large mean: the variance must not cancel
        c.stats = true;
        expect_case(c);
        // A mean ~1800 times the spread (float16 and float32 x; bfloat16 rounds these rows to
        // constants): a variance formed in one pass over float sums loses ~(mean / std)^2 x
        // 2^-24 of itself, 1e-3 to 1e-2 here, past the rstd's tolerance (the CPU backend changed
        // to that form failed here for both dtypes); the two-pass form keeps it.
        c.input_mean = 1024.0;
        expect_case(c);
        c.input_mean = 0.0;
        c.stats = false;
        c.has_bias = false;
        expect_case(c);
        c.has_weight = false;
        expect_case(c);
        c.has_bias = true;
        expect_case(c);
        c.has_weight = true;
      }
    }
  }
}

// LayerNorm rows whose spread lies in their first group: values of 1000 (of either sign) in the
// first eight columns of x (of h too, with the add), the rest normal. The worst rows for a
// variance taken about the first group's mean (LayerNorm's 16-bit GPU outputs on rows that are
// not 2^k whole groups, the fused add's too: the ShiftedMoments of norm_moments.cuh), which
// cancels there by up to (N / 8) x 2^-24 x log2(N) of itself, and a plain case for the others.
TEST_P(NormValues, LayerNormSpreadInTheFirstGroup) {
  if (!is_layer(op())) GTEST_SKIP() << "LayerNorm's moments";
  uint32_t seed = 2500;
  const NormFill first_group_outliers = [](const std::string& name, RowBuffer& b,
                                           std::mt19937& rng) {
    b.fill_random(rng, 1.0, 0.0);
    if (name != "x") return;
    for (int64_t r = 0; r < b.rows(); ++r) {
      for (int64_t col = 0; col < std::min<int64_t>(8, b.cols()); ++col) {
        b.set(r, col, (r + col) % 3 == 0 ? -1000.0 : 1000.0);
      }
    }
  };
  for (NormCase c : dtype_combinations()) {
    for (int64_t n : {768, 2304, 5120, 5125, 12288, 16384}) {
      c.rows = 3;
      c.cols = n;
      c.seed = seed++;
      c.stats = true;
      SCOPED_TRACE(c.name());
      NormRun before;
      const NormRun run = run_norm_case(c, backend(), &before, first_group_outliers);
      EXPECT_TRUE(check_norm_run(c, before, run));
    }
  }
}

TEST_P(NormValues, LongRows) {
  uint32_t seed = 3000;
  for (NormCase c : dtype_combinations()) {
    // Every x dtype, float16 included (N = 262144 is the longest row the ops promise for each);
    // a float32 weight shares these rows' code paths but its conversion.
    if (c.weight_dtype != c.x_dtype) continue;
    // 20480: clusters of 5 blocks of 128 threads (bf16) or of 256 (float32) cover it exactly;
    // 65545 takes 9 of 256 (bf16).
    for (int64_t n : {20480, 32768, 65545, 262144}) {
      for (int64_t m : {1, 3}) {
        c.rows = m;
        c.cols = n;
        c.seed = seed++;
        c.stats = true;
        expect_case(c);
      }
    }
    // The Hugging Face Llama order (weight after the cast) on rows the cluster path covers
    // exactly (bf16: 16 blocks of 512 threads at 262144), where RMSNorm takes the order's branch
    // once a row rather than per element (norm_cluster_kernel.cuh).
    for (int64_t n : {32768, 262144}) {
      c.rows = 3;
      c.cols = n;
      c.seed = seed++;
      c.stats = false;
      c.weight_after_cast = true;
      expect_case(c);
      c.weight_after_cast = false;
    }
    // On the GPU, many more rows than it holds clusters of the cluster path, so that each
    // cluster normalizes a dozen rows or so in turn, its exchange slots cycling through their
    // reuses (norm_cluster_kernel.cuh).
    if (backend() == Backend::kGPU) {
      for (int64_t n : {32768, 20480}) {  // clusters of 2 and 5 blocks (bf16)
        c.rows = 1500;
        c.cols = n;
        c.seed = seed++;
        expect_case(c);
      }
    }
  }
}

// RMSNorm forms y as (h * (w + weight_offset)) * rstd in float32 (include/fusekit/norm.h), so a
// row's max|y| is max|h * w| * rstd exactly, which the fp8 forms' dynamic scale relies on. With
// float32 tensors out is y itself: every element must be that product with the call's own rstd,
// bit for bit, on each backend and launch path (N = 7 to 40003: bounds, exact rows, and on the GPU
// the cluster and staged paths), with and without Gemma's weight offset.
TEST_P(NormValues, RmsNormWeighsBeforeItScales) {
  if (is_layer(op())) GTEST_SKIP() << "RMSNorm only";
  uint32_t seed = 4000;
  for (int64_t n : {7, 769, 4096, 5125, 16384, 40003}) {
    for (float offset : {0.0f, 1.0f}) {
      NormCase c;
      c.op = op();
      c.x_dtype = c.weight_dtype = c.residual_dtype = DType::kFloat32;
      c.rows = 5;
      c.cols = n;
      c.stats = true;
      c.weight_offset = offset;
      c.seed = seed++;
      SCOPED_TRACE(c.name());
      NormRun before;
      const NormRun run = run_norm_case(c, backend(), &before);
      ASSERT_TRUE(run.status.ok()) << run.status.to_string();
      // In place, x holds the output and residual h (norm_cases.h).
      const bool in_place = is_in_place(op());
      const RowBuffer& out = in_place ? run.x : run.out;
      const RowBuffer& h = in_place ? run.residual : is_add(op()) ? run.residual_out : before.x;
      int mismatches = 0;
      for (int64_t r = 0; r < c.rows; ++r) {
        const float rstd = static_cast<float>(run.rstd.get(0, r));
        for (int64_t j = 0; j < n; ++j) {
          const float w = static_cast<float>(before.weight.get(0, j)) + offset;
          const float expected = (static_cast<float>(h.get(r, j)) * w) * rstd;
          const float got = static_cast<float>(out.get(r, j));
          uint32_t expected_bits, got_bits;
          std::memcpy(&expected_bits, &expected, sizeof(float));
          std::memcpy(&got_bits, &got, sizeof(float));
          if (expected_bits != got_bits && mismatches++ < 3) {
            ADD_FAILURE() << "row " << r << " column " << j << ": " << got << " against "
                          << expected;
          }
        }
      }
      EXPECT_EQ(mismatches, 0);
    }
  }
}

// The fused add's h = x + residual, rounded to the residual's dtype, bit for bit against the sum
// of the two as floats rounded once (what every backend promises; the GPU adds 16-bit pairs as
// such, platform.h): halfway cases rounding to even, up and down, sums past the largest finite
// value, subnormal sums, signed zeros, infinities and NaN, each pair both ways round, in rows and
// batches of each GPU path's kinds (bounds, exact groups, split rows, one row a block). Only
// residual_out is checked: these rows' norms are infinities and NaN.
TEST_P(NormValues, FusedAddRoundsEachSumOnce) {
  if (!is_add(op())) GTEST_SKIP() << "the fused add only";
  struct Format {
    int digits;        // significand bits, the leading one included
    int max_exponent;  // the largest finite value's
    double max, min_normal, min_subnormal;
  };
  auto format_of = [](DType d) {
    if (d == DType::kBFloat16) {
      return Format{8, 127, std::ldexp(2.0 - std::ldexp(1.0, -7), 127), std::ldexp(1.0, -126),
                    std::ldexp(1.0, -133)};
    }
    if (d == DType::kFloat16) {
      return Format{11, 15, 65504.0, std::ldexp(1.0, -14), std::ldexp(1.0, -24)};
    }
    return Format{24, 127, std::numeric_limits<float>::max(), std::ldexp(1.0, -126),
                  std::ldexp(1.0, -149)};
  };
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  uint32_t seed = 5000;
  for (NormCase c : dtype_combinations()) {
    const Format f = format_of(c.x_dtype);
    const double half_ulp_of_one = std::ldexp(1.0, -f.digits);
    const double half_ulp_of_max = std::ldexp(1.0, f.max_exponent - f.digits);
    const std::vector<std::pair<double, double>> pairs = {
        {1.0, half_ulp_of_one},                                   // halfway: to even, down
        {1.0 + 2 * half_ulp_of_one, half_ulp_of_one},             // halfway: to even, up
        {1.0, half_ulp_of_one * (1.0 + 2 * half_ulp_of_one)},     // just past halfway
        {1.0, -half_ulp_of_one / 2},                              // halfway below one
        {1.0, std::ldexp(half_ulp_of_one, -12)},                  // far apart
        {-1.0, -std::ldexp(half_ulp_of_one, -12)},
        {f.max, f.max},                                           // overflow
        {f.max, half_ulp_of_max},                                 // halfway past the max
        {-f.max, -f.max},
        {f.max, -f.max},
        {f.min_subnormal, f.min_subnormal},                       // subnormal sums
        {f.min_normal, -f.min_subnormal},
        {3 * f.min_subnormal, -f.min_subnormal},
        {-0.0, -0.0},                                             // signed zeros
        {-0.0, 0.0},
        {2.5, -2.5},
        {inf, 1.0},
        {inf, -inf},
        {nan, 1.0},
        {0.3, 0.7},
    };
    const int64_t kinds = static_cast<int64_t>(pairs.size());
    const NormFill special_pairs = [&](const std::string& name, RowBuffer& b,
                                       std::mt19937& rng) {
      b.fill_random(rng, 1.0, 0.0);
      if (name != "x" && name != "residual") return;
      for (int64_t r = 0; r < b.rows(); ++r) {
        for (int64_t col = 0; col < b.cols(); ++col) {
          const int64_t k = (col + 7 * r) % (2 * kinds);  // each pair, then each swapped
          const auto& pair = pairs[static_cast<size_t>(k % kinds)];
          const bool first = (name == "x") == (k < kinds);
          b.set(r, col, first ? pair.first : pair.second);
        }
      }
    };
    for (int64_t n : {40, 769, 5120, 16384}) {
      // On the GPU: the one-row, decode and batch kernels. The CPU backend's path is the same at
      // any M.
      const std::vector<int64_t> batches =
          backend() == Backend::kGPU ? std::vector<int64_t>{1, 3, 300} : std::vector<int64_t>{1, 3};
      for (int64_t m : batches) {
        c.rows = m;
        c.cols = n;
        c.seed = seed++;
        SCOPED_TRACE(c.name());
        NormRun before;
        const NormRun run = run_norm_case(c, backend(), &before, special_pairs);
        ASSERT_TRUE(run.status.ok()) << run.status.to_string();
        const RowBuffer& h = is_in_place(op()) ? run.residual : run.residual_out;
        int mismatches = 0;
        for (int64_t r = 0; r < c.rows; ++r) {
          for (int64_t j = 0; j < n; ++j) {
            const float a = static_cast<float>(before.x.get(r, j));
            const float b = static_cast<float>(before.residual.get(r, j));
            const double expected = round_to_dtype(a + b, c.residual_dtype);
            const double got = h.get(r, j);
            const bool same_sign = std::signbit(got) == std::signbit(expected);
            const bool same =
                std::isnan(expected) ? std::isnan(got) : got == expected && same_sign;
            if (!same && mismatches++ < 5) {
              ADD_FAILURE() << "row " << r << " column " << j << ": " << a << " + " << b
                            << " gave " << got << ", expected " << expected;
            }
          }
        }
        EXPECT_EQ(mismatches, 0);
      }
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(backend_name(std::get<0>(info.param))) + "_" +
         norm_op_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    AllOps, NormValues,
    ::testing::Combine(::testing::Values(Backend::kCPU, Backend::kGPU),
                       ::testing::Values(NormOp::kRms, NormOp::kAddRmsInPlace, NormOp::kAddRms,
                                         NormOp::kLayer, NormOp::kAddLayerInPlace,
                                         NormOp::kAddLayer)),
    param_name);

// 64-bit indexing: a tensor of more than 2^31 elements (GPU only: 4 GiB per bf16 tensor).
TEST(NormHugeTensor, MoreThan2To31Elements) {
  FUSEKIT_SKIP_UNLESS_AVAILABLE(Backend::kGPU);
  const int64_t n = 4096;
  const int64_t m = (int64_t{1} << 31) / n + 3;  // 2^31 + 3 * 4096 elements
  RowBuffer x(Backend::kGPU, DType::kBFloat16, m, n);
  RowBuffer out(Backend::kGPU, DType::kBFloat16, m, n);
  RowBuffer w(Backend::kGPU, DType::kBFloat16, 1, n);
  std::mt19937 rng(7);
  // Random values in the rows that are checked; the rest keep a constant finite value.
  const int64_t checked[] = {0, 1, m / 2, m - 2, m - 1};
  std::vector<double> pattern(n);
  for (int64_t j = 0; j < n; ++j) pattern[j] = 0.5 + static_cast<double>(j % 7);
  x.fill_rows(pattern);
  for (int64_t r : checked) {
    std::normal_distribution<double> d(0.0, 1.0);
    for (int64_t j = 0; j < n; ++j) x.set(r, j, d(rng) + 0.01);
  }
  w.fill_random(rng);
  x.upload();
  w.upload();
  ASSERT_TRUE(rms_norm(out.view(), x.view(), w.view_1d(), 1e-6f).ok());
  ASSERT_TRUE(gpu_synchronize(0).ok());
  out.download();
  const Tolerance tol = output_tolerance(DType::kBFloat16);
  for (int64_t r : checked) {
    double ss = 0.0;
    for (int64_t j = 0; j < n; ++j) ss += x.get(r, j) * x.get(r, j);
    const double rstd = 1.0 / std::sqrt(ss / n + 1e-6);
    for (int64_t j = 0; j < n; ++j) {
      const double ref = x.get(r, j) * rstd * w.get(0, j);
      ASSERT_LE(std::fabs(out.get(r, j) - ref), tol.rel * std::fabs(ref) + tol.abs)
          << "row " << r << " col " << j;
    }
  }
}

}  // namespace
}  // namespace fusekit::testing
