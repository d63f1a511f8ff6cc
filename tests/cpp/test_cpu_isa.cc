// The CPU backend's two builds of its row loops (src/cpu/common/cpu_isa.h): the AVX2 + FMA one,
// taken where the CPU has both, and the build's baseline one (every op, the backward passes
// included). They must write the same bits,
// since the CPU backend is the reference the GPU's fp8 codes are checked against and a result
// must not depend on the machine. Every op runs here once in each, over the three dtypes, widths
// that are and are not multiples of the vector width, strided rows and the options that change
// the loops (weight_after_cast, absent weight or bias, both fp8 formats, static and dynamic
// scales), and every buffer each run wrote is compared byte for byte. The inputs are random
// normal values: NaN bits (sign, payload) are the one thing IEEE leaves open, and are not
// compared there. Skipped where the CPU or the build has the baseline alone. The fp16 rows'
// conversions, F16C's where the CPU has it, are checked on their own against the software ones,
// over every fp16 pattern and the floats around every rounding boundary, NaN bits included.
#include <algorithm>
#include <string>
#include <vector>

#include "act_cases.h"
#include "core/half.h"
#include "cpu/common/cpu_isa.h"
#include "cpu/common/row_convert.h"
#include "gtest/gtest.h"
#include "norm_backward_cases.h"
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

TEST(CpuIsa, NormBackwardWritesTheSameBitsInBothBuilds) {
  if (!detail::cpu_has_avx2_fma()) GTEST_SKIP() << kBaselineOnly;
  BackwardRun (*run)(const BackwardCase&, Backend) = run_backward_case;
  for (BackwardOp op : {BackwardOp::kRms, BackwardOp::kAddRms, BackwardOp::kLayer,
                        BackwardOp::kAddLayer}) {
    for (DType dtype : kDtypes) {
      for (int64_t cols : kWidths) {
        for (int variant = 0; variant < 2; ++variant) {
          BackwardCase c;
          c.op = op;
          c.grad_dtype = c.x_dtype = dtype;
          c.weight_dtype = variant == 1 ? DType::kFloat32 : dtype;
          c.rows = 5;
          c.cols = cols;
          c.pad = variant == 1 ? 3 : 0;
          c.has_weight = !(variant == 1 && backward_is_layer(op));
          c.weight_grad = c.has_weight;
          c.weight_offset = variant == 1 && !backward_is_layer(op) ? 1.0f : 0.0f;
          c.seed = static_cast<uint32_t>(cols + variant);
          SCOPED_TRACE(c.name());
          const auto [fast, slow] = run_both(c, run);
          ASSERT_TRUE(fast.status.ok()) << fast.status.to_string();
          EXPECT_TRUE(same_bytes({&fast.grad_x, &fast.grad_weight, &fast.grad_bias},
                                 {&slow.grad_x, &slow.grad_weight, &slow.grad_bias}));
        }
      }
    }
  }
}

// fp16 rows' conversions (cpu/common/row_convert.h): F16C's, where the CPU has it, give
// core/half.h's bits, NaN included, on every fp16 pattern and on floats at and around every
// rounding boundary. The runs have odd lengths, so the tails past the last eight are covered.
std::vector<uint32_t> widen_bits(const std::vector<uint16_t>& halves) {
  std::vector<float> floats(halves.size(), -1.0f);
  const auto* src = reinterpret_cast<const detail::HostHalf*>(halves.data());
  for (size_t j0 = 0, run = 1; j0 < halves.size(); j0 += run, run = run % 19 + 1) {
    const int64_t count = static_cast<int64_t>(std::min(run, halves.size() - j0));
    detail::widen_row(src + j0, floats.data() + j0, count);
  }
  std::vector<uint32_t> bits(floats.size());
  for (size_t j = 0; j < floats.size(); ++j) bits[j] = detail::float_bits(floats[j]);
  return bits;
}

std::vector<uint16_t> narrow_bits(const std::vector<float>& floats) {
  std::vector<uint16_t> halves(floats.size(), 0xdeadu & 0xffffu);
  auto* dst = reinterpret_cast<detail::HostHalf*>(halves.data());
  for (size_t j0 = 0, run = 1; j0 < floats.size(); j0 += run, run = run % 19 + 1) {
    const int64_t count = static_cast<int64_t>(std::min(run, floats.size() - j0));
    detail::narrow_row(floats.data() + j0, dst + j0, count);
  }
  return halves;
}

constexpr const char* kNoF16c = "this CPU or build has no F16C conversions";

TEST(CpuIsa, Fp16RowsWidenToTheSoftwareBits) {
  if (!detail::cpu_has_f16c()) GTEST_SKIP() << kNoF16c;
  std::vector<uint16_t> halves(1u << 16);
  for (uint32_t h = 0; h < halves.size(); ++h) halves[h] = static_cast<uint16_t>(h);
  const std::vector<uint32_t> fast = widen_bits(halves);
  std::vector<uint32_t> slow;
  {
    BaselineForced baseline;
    slow = widen_bits(halves);
  }
  for (uint32_t h = 0; h < halves.size(); ++h) {
    const uint32_t expected = detail::float_bits(detail::fp16_to_float(static_cast<uint16_t>(h)));
    ASSERT_EQ(fast[h], expected) << "fp16 pattern " << h << " (F16C)";
    ASSERT_EQ(slow[h], expected) << "fp16 pattern " << h << " (software)";
  }
}

TEST(CpuIsa, Fp16RowsNarrowToTheSoftwareBits) {
  if (!detail::cpu_has_f16c()) GTEST_SKIP() << kNoF16c;
  // Every sign, exponent and top seven mantissa bits, each with low halves at and around fp16's
  // rounding boundaries for normal results (bit 12: half an ulp) and a few others; the high
  // halves cover the subnormal results' boundaries (bits 13 and up) and NaN payloads.
  const uint32_t low_halves[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001,
                                 0x1fff, 0x2000, 0x3000, 0x8001, 0xffff};
  std::vector<float> floats;
  for (uint32_t high = 0; high < (1u << 16); ++high) {
    for (uint32_t low : low_halves) floats.push_back(detail::bits_float(high << 16 | low));
  }
  const std::vector<uint16_t> fast = narrow_bits(floats);
  std::vector<uint16_t> slow;
  {
    BaselineForced baseline;
    slow = narrow_bits(floats);
  }
  for (size_t j = 0; j < floats.size(); ++j) {
    const uint16_t expected = detail::float_to_fp16(floats[j]);
    ASSERT_EQ(fast[j], expected) << "float bits " << detail::float_bits(floats[j]) << " (F16C)";
    ASSERT_EQ(slow[j], expected) << "float bits " << detail::float_bits(floats[j])
                                 << " (software)";
  }
}

}  // namespace
}  // namespace fusekit::testing
