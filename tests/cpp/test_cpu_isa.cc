// The CPU backend's two builds of its row loops (src/cpu/common/cpu_isa.h): the AVX2 + FMA one,
// taken where the CPU has both, and the build's baseline one (the forward ops and the gated
// activations' backward; the norm backward pass has one build). They must write the same bits,
// since the CPU backend is the reference the GPU's fp8 codes are checked against and a result
// must not depend on the machine. Every op runs here once in each, over the three dtypes, widths
// that are and are not multiples of the vector width, strided rows and the options that change
// the loops (weight_after_cast, absent weight or bias, both fp8 formats, static and dynamic
// scales), and every buffer each run wrote is compared byte for byte. The inputs are random
// normal values: NaN bits (sign, payload) are the one thing IEEE leaves open, and are not
// compared. Skipped where the CPU or the build has the baseline alone.
#include <string>
#include <vector>

#include "act_cases.h"
#include "cpu/common/cpu_isa.h"
#include "gtest/gtest.h"
#include "norm_cases.h"
#include "norm_fp8_cases.h"
#include "test_support.h"

namespace fusekit::testing {
namespace {

// Runs the baseline loops while it lives.
class BaselineForced {
 public:
  BaselineForced() { detail::cpu_baseline_forced().store(true); }
  ~BaselineForced() { detail::cpu_baseline_forced().store(false); }
  BaselineForced(const BaselineForced&) = delete;
  BaselineForced& operator=(const BaselineForced&) = delete;
};

template <typename Case, typename Run>
std::pair<Run, Run> run_both(const Case& c, Run (*run)(const Case&, Backend)) {
  Run fast = run(c, Backend::kCPU);
  BaselineForced baseline;
  Run slow = run(c, Backend::kCPU);
  return {std::move(fast), std::move(slow)};
}

::testing::AssertionResult same_bytes(const std::vector<const RowBuffer*>& a,
                                      const std::vector<const RowBuffer*>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i]->snapshot() != b[i]->snapshot()) {
      return ::testing::AssertionFailure() << "buffer " << i << " differs";
    }
  }
  return ::testing::AssertionSuccess();
}

const DType kDtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
const int64_t kWidths[] = {1, 7, 9, 64, 769, 4104, 5125};

constexpr const char* kBaselineOnly =
    "this CPU or build runs the baseline loops alone (no AVX2 + FMA variant)";

TEST(CpuIsa, NormWritesTheSameBitsInBothBuilds) {
  if (!detail::cpu_has_avx2_fma()) GTEST_SKIP() << kBaselineOnly;
  NormRun (*run)(const NormCase&, Backend) = [](const NormCase& c, Backend b) {
    return run_norm_case(c, b);
  };
  for (NormOp op : {NormOp::kRms, NormOp::kAddRmsInPlace, NormOp::kAddRms, NormOp::kLayer,
                    NormOp::kAddLayerInPlace, NormOp::kAddLayer}) {
    for (DType dtype : kDtypes) {
      for (int64_t cols : kWidths) {
        for (int variant = 0; variant < 3; ++variant) {
          NormCase c;
          c.op = op;
          c.x_dtype = c.residual_dtype = dtype;
          c.weight_dtype = variant == 2 ? DType::kFloat32 : dtype;
          c.rows = 5;
          c.cols = cols;
          c.stats = true;
          c.weight_after_cast = variant == 1;
          c.weight_offset = variant == 1 && !is_layer(op) ? 1.0f : 0.0f;
          c.has_bias = variant != 1;
          c.has_weight = !(variant == 2 && is_layer(op));
          c.x_pad = variant == 2 ? 3 : 0;
          c.out_pad = variant == 2 ? 5 : 0;
          c.seed = static_cast<uint32_t>(cols + variant);
          SCOPED_TRACE(c.name());
          const auto [fast, slow] = run_both(c, run);
          ASSERT_TRUE(fast.status.ok()) << fast.status.to_string();
          EXPECT_TRUE(same_bytes({&fast.x, &fast.residual, &fast.out, &fast.residual_out,
                                  &fast.rstd, &fast.mean},
                                 {&slow.x, &slow.residual, &slow.out, &slow.residual_out,
                                  &slow.rstd, &slow.mean}));
        }
      }
    }
  }
}

TEST(CpuIsa, NormFp8WritesTheSameBitsInBothBuilds) {
  if (!detail::cpu_has_avx2_fma()) GTEST_SKIP() << kBaselineOnly;
  NormFp8Run (*run)(const NormFp8Case&, Backend) = [](const NormFp8Case& c, Backend b) {
    return run_norm_fp8_case(c, b);
  };
  for (NormFp8Op op : {NormFp8Op::kRms, NormFp8Op::kAddRms}) {
    for (Fp8Scale scale : {Fp8Scale::kDynamic, Fp8Scale::kStatic}) {
      for (Fp8Format format : {Fp8Format::kE4M3FN, Fp8Format::kE4M3FNUZ}) {
        for (DType dtype : kDtypes) {
          for (int64_t cols : kWidths) {
            NormFp8Case c;
            c.op = op;
            c.scale = scale;
            c.format = format;
            c.x_dtype = c.weight_dtype = c.residual_dtype = dtype;
            c.rows = 5;
            c.cols = cols;
            c.x_pad = 3;
            c.scale_upper_bound = cols == 769 ? 0.01f : 0.0f;
            c.seed = static_cast<uint32_t>(cols);
            SCOPED_TRACE(c.name());
            const auto [fast, slow] = run_both(c, run);
            ASSERT_TRUE(fast.status.ok()) << fast.status.to_string();
            EXPECT_TRUE(same_bytes({&fast.out, &fast.scale, &fast.residual, &fast.residual_out},
                                   {&slow.out, &slow.scale, &slow.residual, &slow.residual_out}));
          }
        }
      }
    }
  }
}

TEST(CpuIsa, ActWritesTheSameBitsInBothBuilds) {
  if (!detail::cpu_has_avx2_fma()) GTEST_SKIP() << kBaselineOnly;
  ActRun (*run)(const ActCase&, Backend) = [](const ActCase& c, Backend b) {
    return run_act_case(c, b);
  };
  for (Activation act : {Activation::kSilu, Activation::kGeluTanh, Activation::kGelu}) {
    for (ActMode mode : {ActMode::kForward, ActMode::kQuantFp8, ActMode::kBackward}) {
      for (Fp8Format format : {Fp8Format::kE4M3FN, Fp8Format::kE4M3FNUZ}) {
        if (mode != ActMode::kQuantFp8 && format != Fp8Format::kE4M3FN) continue;
        for (DType dtype : kDtypes) {
          for (int64_t cols : kWidths) {
            ActCase c;
            c.act = act;
            c.mode = mode;
            c.format = format;
            c.layout = cols % 2 ? ActLayout::kSplitSeparate : ActLayout::kFused;
            c.dtype = dtype;
            c.rows = 5;
            c.cols = cols;
            c.in_pad = 3;
            c.seed = static_cast<uint32_t>(cols);
            SCOPED_TRACE(c.name());
            const auto [fast, slow] = run_both(c, run);
            ASSERT_TRUE(fast.status.ok()) << fast.status.to_string();
            EXPECT_TRUE(same_act_outputs(c, fast, slow));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace fusekit::testing
