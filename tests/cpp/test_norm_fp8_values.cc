// RMSNorm with an fp8 output (rms_norm_quant_fp8[_static], fused_add_rms_norm_quant_fp8[_static])
// on every backend present: against the float64 reference over every dtype combination, both
// formats, static and dynamic scales, N in {1, 7, 769, 5125, 14336} (the GPU also 32768, 40003),
// M in {0, 1, 3, 257}, N = 40003 and 262144 on every backend, strided rows, unaligned bases,
// rank-3 and 1-D views, the residual updated in
// place, both scale shapes; bit for bit against the quantization of the plain op's float32
// output; and the edge cases: a scale upper bound that binds, a static scale small enough to
// saturate, NaN rows, all-zero rows, y beyond float32's range. Outputs start poisoned with NaN. On the GPU every case is also compared
// with the CPU backend (residual_out bit for bit, codes within one step, scales within float32's
// error; see norm_fp8_cases.h).
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "norm_fp8_cases.h"

namespace fusekit::testing {
namespace {

using Param = std::tuple<Backend, NormFp8Op, Fp8Scale>;

constexpr Fp8Format kFormats[] = {Fp8Format::kE4M3FN, Fp8Format::kE4M3FNUZ};

class NormFp8Values : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    FUSEKIT_SKIP_UNLESS_AVAILABLE(backend());
  }
  Backend backend() const { return std::get<0>(GetParam()); }
  NormFp8Op op() const { return std::get<1>(GetParam()); }
  Fp8Scale scale() const { return std::get<2>(GetParam()); }
  bool add() const { return op() == NormFp8Op::kAddRms; }

  NormFp8Case base() const {
    NormFp8Case c;
    c.op = op();
    c.scale = scale();
    return c;
  }

  // Every supported combination: x dtype; weight x's or float32; residual x's or float32.
  std::vector<NormFp8Case> dtype_combinations() const {
    std::vector<NormFp8Case> out;
    for (DType x : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      const std::vector<DType> x_or_float =
          x == DType::kFloat32 ? std::vector<DType>{x} : std::vector<DType>{x, DType::kFloat32};
      for (DType w : x_or_float) {
        for (DType r : add() ? x_or_float : std::vector<DType>{x}) {
          NormFp8Case c = base();
          c.x_dtype = x;
          c.weight_dtype = w;
          c.residual_dtype = r;
          out.push_back(c);
        }
      }
    }
    return out;
  }

  // Runs `c` on this backend, checks it against the float64 reference, and on the GPU compares
  // it with the CPU backend's run of the same inputs. Returns the run.
  NormFp8Run expect_case(const NormFp8Case& c, const NormFp8Fill& fill = {}) {
    SCOPED_TRACE(c.name());
    NormFp8Run before;
    NormFp8Run run = run_norm_fp8_case(c, backend(), &before, fill);
    EXPECT_TRUE(check_norm_fp8_run(c, before, run));
    if (backend() == Backend::kGPU) {
      const NormFp8Run cpu = run_norm_fp8_case(c, Backend::kCPU, nullptr, fill);
      EXPECT_TRUE(agree_across_backends(c, run, cpu)) << "GPU and CPU differ";
    }
    return run;
  }
};

TEST_P(NormFp8Values, DtypesSizesAndBatches) {
  uint32_t seed = 1;
  for (NormFp8Case c : dtype_combinations()) {
    for (Fp8Format format : kFormats) {
      // 64, 3072, 4096 and 5120: rows that the launch covers exactly (norm_launch.cuh's
      // RowFit::kExact), with one, two, three, four and five groups per thread (640 and 768 bf16
      // with five and three at small batches too). Past one block's registers: 32768 and 20480,
      // which clusters of 2 blocks of 512 threads and 5 of 128 cover exactly (where the GPU has
      // clusters; 14336 float32 too, in 7 of 128), 18432 in 9 blocks of 64, and 40003 on the staged
      // path (gpu::cluster_covers_row).
      for (int64_t n :
           {1, 7, 64, 640, 768, 769, 3072, 4096, 5120, 5125, 14336, 18432, 20480, 32768,
            40003}) {
        // The GPU's three- and five-group kernels, and its long rows.
        if ((n == 3072 || n == 5120 || n > 16384) && backend() != Backend::kGPU) continue;
        for (int64_t m : {0, 1, 3, 257}) {
          // Many rows of long rows only for the single-dtype combinations: the mixed ones share
          // every code path but the conversions, which short batches cover.
          const bool single_dtype = c.weight_dtype == c.x_dtype && c.residual_dtype == c.x_dtype;
          if (m == 257 && n > 5125 && !single_dtype) continue;
          c.format = format;
          c.rows = m;
          c.cols = n;
          c.seed = seed++;
          expect_case(c);
        }
      }
    }
  }
}

TEST_P(NormFp8Values, StridedRowsUnalignedBasesAndRank3) {
  uint32_t seed = 1000;
  for (NormFp8Case c : dtype_combinations()) {
    for (int64_t n : {8, 769, 5125}) {
      c.cols = n;
      c.seed = seed++;
      c.format = kFormats[seed % 2];
      // The other scale shape, and when adding the residual also updated in place.
      c.scale_keepdim = true;
      c.scalar_scale = true;
      for_each_row_layout(c, [this](NormFp8Case v) {
        expect_case(v);
        v.residual_in_place = add();
        if (v.residual_in_place) expect_case(v);
      });
    }
  }
}

// Gemma's (1 + w), a static scale that is not a power of two (its reciprocal rounds), and a
// larger eps.
TEST_P(NormFp8Values, Options) {
  uint32_t seed = 2000;
  for (NormFp8Case c : dtype_combinations()) {
    for (Fp8Format format : kFormats) {
      c.format = format;
      c.cols = 769;
      c.seed = seed++;
      c.weight_offset = 1.0f;
      c.static_scale = 0.03f;
      c.eps = 1e-2f;
      expect_case(c);
    }
  }
}

// For float32 tensors the plain op's output is y itself: quantizing it by the definition must give
// the fp8 op's codes and scales bit for bit, on each backend. On the GPU only up to N = 8192,
// where float32 rows take the registers path, whose summation order does not depend on the launch
// shape (longer rows may be split differently by the plain and the fp8 kernels).
TEST_P(NormFp8Values, QuantizesThePlainOpsOutputExactly) {
  uint32_t seed = 3000;
  for (Fp8Format format : kFormats) {
    for (int64_t n : {1, 7, 769, 4096, 5125, 14336}) {
      if (backend() == Backend::kGPU && n > 8192) continue;
      for (int64_t m : {3, 257}) {
        for (float offset : {0.0f, 1.0f}) {
          NormFp8Case c = base();
          c.x_dtype = c.weight_dtype = c.residual_dtype = DType::kFloat32;
          c.format = format;
          c.rows = m;
          c.cols = n;
          c.weight_offset = offset;
          c.scale_upper_bound = offset > 0.0f ? 4e-3f : 0.0f;  // binds for some rows
          c.x_pad = 3;
          c.seed = seed++;
          SCOPED_TRACE(c.name());
          NormFp8Run before;
          const NormFp8Run run = run_norm_fp8_case(c, backend(), &before);
          EXPECT_TRUE(matches_quantized_plain_op(c, backend(), before, run));
        }
      }
    }
  }
}

// Long rows on every backend (DtypesSizesAndBatches takes rows past 16384 on the GPU alone): up
// to N = 262144, the longest the norms promise, on the CPU too; each x dtype, both formats.
TEST_P(NormFp8Values, LongRows) {
  uint32_t seed = 5000;
  for (NormFp8Case c : dtype_combinations()) {
    if (c.weight_dtype != c.x_dtype || c.residual_dtype != c.x_dtype) continue;
    for (int64_t n : {40003, 262144}) {
      for (int64_t m : {1, 3}) {
        c.format = kFormats[seed % 2];
        c.rows = m;
        c.cols = n;
        c.seed = seed++;
        expect_case(c);
      }
    }
  }
}

// A dynamic scale capped by scale_upper_bound: every row's scale is the bound, and the values
// beyond bound * fp8_max saturate.
TEST_P(NormFp8Values, ScaleUpperBoundCaps) {
  if (scale() != Fp8Scale::kDynamic) GTEST_SKIP() << "dynamic scales only";
  for (Fp8Format format : kFormats) {
    NormFp8Case c = base();
    c.format = format;
    c.rows = 4;
    c.cols = 1000;
    c.scale_upper_bound = 1e-3f;
    const NormFp8Run run = expect_case(c);
    if (!run.status.ok()) continue;
    const double fp8_max = fp8_format_max(format);
    int saturated = 0;
    for (int64_t r = 0; r < c.rows; ++r) {
      EXPECT_EQ(run.scale.get(0, r), static_cast<double>(1e-3f)) << c.name() << " row " << r;
      for (int64_t j = 0; j < c.cols; ++j) saturated += std::fabs(run.out.get(r, j)) == fp8_max;
    }
    EXPECT_GT(saturated, 0) << c.name();
  }
}

// A static scale small enough that most values saturate to +-fp8_max (never beyond, never NaN).
TEST_P(NormFp8Values, StaticScaleSaturates) {
  if (scale() != Fp8Scale::kStatic) GTEST_SKIP() << "static scales only";
  for (Fp8Format format : kFormats) {
    NormFp8Case c = base();
    c.format = format;
    c.rows = 4;
    c.cols = 1000;
    c.static_scale = 1e-3f;
    const NormFp8Run run = expect_case(c);
    if (!run.status.ok()) continue;
    const double fp8_max = fp8_format_max(format);
    int positive = 0, negative = 0;
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t j = 0; j < c.cols; ++j) {
        const double q = run.out.get(r, j);
        ASSERT_LE(std::fabs(q), fp8_max) << c.name();
        positive += q == fp8_max;
        negative += q == -fp8_max;
      }
    }
    EXPECT_GT(positive, c.rows * c.cols / 8) << c.name();
    EXPECT_GT(negative, c.rows * c.cols / 8) << c.name();
  }
}

// A NaN in a row makes that row's codes NaN (its rstd is NaN) and its dynamic scale NaN; the other
// rows are unaffected. When adding, residual_out carries the NaN where it arose.
TEST_P(NormFp8Values, NaNRow) {
  for (Fp8Format format : kFormats) {
    NormFp8Case c = base();
    c.format = format;
    c.rows = 3;
    c.cols = 130;
    const NormFp8Fill fill = [](const std::string& name, RowBuffer& b, std::mt19937& rng) {
      b.fill_random(rng);
      if (name == "x") b.set(1, 17, NAN);
    };
    const NormFp8Run run = expect_case(c, fill);
    if (!run.status.ok()) continue;
    for (int64_t j = 0; j < c.cols; ++j) {
      ASSERT_TRUE(std::isnan(run.out.get(1, j))) << c.name() << " j=" << j;
      ASSERT_FALSE(std::isnan(run.out.get(0, j))) << c.name() << " j=" << j;
      ASSERT_FALSE(std::isnan(run.out.get(2, j))) << c.name() << " j=" << j;
    }
    if (scale() == Fp8Scale::kDynamic) {
      EXPECT_TRUE(std::isnan(run.scale.get(0, 1))) << c.name();
      EXPECT_FALSE(std::isnan(run.scale.get(0, 0))) << c.name();
    }
  }
}

// A NaN in one product h * w only, its row's sum of squares finite or infinite but not NaN: a
// weight that is NaN at one column (every row's max|y| and dynamic scale NaN), or an infinite x
// (row 1) against a zero weight (inf * 0: row 1's alone). A NaN x (NaNRow) reaches the scale
// through rstd as well; these reach it only through the row's max. The NaN goes at several
// places of the first, a middle and the last group, in rows of whole groups (exact, whole and
// last-partial launches) and in one that ends mid-group.
TEST_P(NormFp8Values, NaNProductInOneElement) {
  for (const bool weight_nan : {true, false}) {
    for (const int64_t cols : {int64_t{256}, int64_t{1000}, int64_t{7168}, int64_t{133}}) {
      for (const int64_t col : {int64_t{0}, int64_t{1}, int64_t{6}, int64_t{7}, int64_t{8},
                                cols / 2 + 1, cols - 2, cols - 1}) {
        NormFp8Case c = base();
        c.format = kFormats[(cols + col) % 2];
        c.rows = 3;
        c.cols = cols;
        c.seed = static_cast<uint32_t>(cols * 16 + col);
        const NormFp8Fill fill = [&](const std::string& name, RowBuffer& b, std::mt19937& rng) {
          b.fill_random(rng);
          if (name == "weight") b.set(0, col, weight_nan ? NAN : 0.0);
          if (name == "x" && !weight_nan) b.set(1, col, INFINITY);
        };
        const NormFp8Run run = expect_case(c, fill);
        if (!run.status.ok()) continue;
        if (scale() != Fp8Scale::kDynamic) continue;
        for (int64_t r = 0; r < c.rows; ++r) {
          const bool nan_row = weight_nan || r == 1;
          EXPECT_EQ(std::isnan(run.scale.get(0, r)), nan_row)
              << c.name() << " row " << r << " column " << col;
        }
      }
    }
  }
}

// An all-zero row (x and residual zero) quantizes to zero codes, with the floor scale
// 1 / (fp8_max * 512) when dynamic.
TEST_P(NormFp8Values, AllZeroRows) {
  for (Fp8Format format : kFormats) {
    NormFp8Case c = base();
    c.format = format;
    c.rows = 3;
    c.cols = 100;
    const NormFp8Fill fill = [](const std::string& name, RowBuffer& b, std::mt19937& rng) {
      b.fill_random(rng);
      if (name == "weight") return;
      for (int64_t r = 0; r < b.rows(); r += 2) {  // rows 0 and 2
        for (int64_t j = 0; j < b.cols(); ++j) b.set(r, j, 0.0);
      }
    };
    const NormFp8Run run = expect_case(c, fill);
    if (!run.status.ok()) continue;
    const float floor = 1.0f / (fp8_format_max(format) * 512.0f);
    for (int64_t r : {0, 2}) {
      for (int64_t j = 0; j < c.cols; ++j) ASSERT_EQ(run.out.get(r, j), 0.0) << c.name();
      if (scale() == Fp8Scale::kDynamic) EXPECT_EQ(run.scale.get(0, r), floor) << c.name();
    }
  }
}

// y beyond float32's range (a float32 weight near its largest value times a normalized value
// above 1) is taken as +-FLT_MAX: the dynamic scale stays finite and those elements saturate.
TEST_P(NormFp8Values, BeyondFloat32Range) {
  for (Fp8Format format : kFormats) {
    NormFp8Case c = base();
    c.format = format;
    c.x_dtype = c.residual_dtype = DType::kBFloat16;
    c.weight_dtype = DType::kFloat32;
    c.rows = 2;
    c.cols = 7;
    // Row 0 is (1, 0, ..., 0) (with the residual), so h * rstd = sqrt(7) at column 0.
    const NormFp8Fill fill = [](const std::string& name, RowBuffer& b, std::mt19937& rng) {
      b.fill_random(rng);
      if (name == "weight") {
        b.set(0, 0, 3e38);
        b.set(0, 1, -3e38);
      } else {
        for (int64_t j = 0; j < b.cols(); ++j) b.set(0, j, name == "x" && j == 0 ? 1.0 : 0.0);
      }
    };
    const NormFp8Run run = expect_case(c, fill);
    if (!run.status.ok()) continue;
    const double fp8_max = fp8_format_max(format);
    for (int64_t j = 0; j < c.cols; ++j) ASSERT_FALSE(std::isnan(run.out.get(0, j))) << c.name();
    if (scale() == Fp8Scale::kDynamic) {
      EXPECT_TRUE(std::isfinite(run.scale.get(0, 0))) << c.name();
      EXPECT_EQ(run.out.get(0, 0), fp8_max) << c.name();
    } else {
      EXPECT_EQ(run.out.get(0, 0), fp8_max) << c.name();
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto [backend, op, scale] = info.param;
  return std::string(backend_name(backend)) + "_" + norm_fp8_op_name(op, scale);
}

INSTANTIATE_TEST_SUITE_P(
    AllOps, NormFp8Values,
    ::testing::Combine(::testing::Values(Backend::kCPU, Backend::kGPU),
                       ::testing::Values(NormFp8Op::kRms, NormFp8Op::kAddRms),
                       ::testing::Values(Fp8Scale::kDynamic, Fp8Scale::kStatic)),
    param_name);

}  // namespace
}  // namespace fusekit::testing
