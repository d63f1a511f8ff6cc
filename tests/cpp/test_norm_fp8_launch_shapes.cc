// Launch shapes of RMSNorm's fp8 forms on the GPU: the explicit NormConfigs that the heuristic
// may choose (rows shared among blocks, the row's thread count fixed at compile time or not, the
// cluster path) must give the bits of the reference launch, or (the cluster path, whose sums run
// in another order) agree with it to within one fp8 step. Each runs one NormProblem under several
// configs (gpu::run_norm_gpu_with) and compares the outputs.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gpu/norm/norm_gpu.h"
#include "gtest/gtest.h"
#include "norm_launch_inputs.h"
#include "norm/norm_problem.h"

namespace fusekit::testing {
namespace {

// One launch of `in`'s fp8 problem (p.out_fp8 set) under `config`, with a dynamic scale or
// in.static_scale, into fresh NaN-poisoned outputs: the bits of the codes, of the dynamic scales,
// of rstd and (the fused add) of the residual sum. Every row's rstd and dynamic scale must have
// been written; a failed launch fails the test and gives no bits.
std::vector<uint64_t> fp8_launch_bits(LaunchShapeInputs& in, const gpu::NormConfig& config,
                                      bool dynamic) {
  detail::NormProblem& p = in.p;
  const int64_t m = p.rows, n = p.cols;
  RowBuffer codes(Backend::kGPU, fp8_format_dtype(p.out_fp8_format), m, n);
  RowBuffer scale(Backend::kGPU, DType::kFloat32, 1, m);
  RowBuffer rstd(Backend::kGPU, DType::kFloat32, 1, m);
  RowBuffer r_out(Backend::kGPU, p.x_dtype, m, n);
  p.out = codes.data();
  p.out_stride = n;
  p.dynamic_scale = dynamic ? static_cast<float*>(scale.data()) : nullptr;
  p.static_scale = dynamic ? nullptr : static_cast<const float*>(in.static_scale.data());
  p.rstd = static_cast<float*>(rstd.data());
  p.residual_out = r_out.data();
  p.residual_out_stride = n;
  gpu::NormLaunchOverrides overrides;
  overrides.config = &config;
  const Status launched = gpu::run_norm_gpu_with(p, nullptr, overrides);
  if (!launched.ok() || !gpu_synchronize(0).ok()) {
    ADD_FAILURE() << "launch failed: " << launched.message();
    return {};
  }
  std::vector<uint64_t> bits;
  for (RowBuffer* b : {&codes, &scale, &rstd, &r_out}) {
    if ((b == &scale && !dynamic) || (b == &r_out && !p.add_residual)) continue;
    b->download();
    for (int64_t row = 0; row < b->rows(); ++row) {
      for (int64_t j = 0; j < b->cols(); ++j) bits.push_back(b->raw(row, j));
    }
  }
  for (int64_t row = 0; row < m; ++row) {
    EXPECT_FALSE(std::isnan(rstd.get(0, row))) << "rstd of row " << row << " not written";
    if (dynamic) EXPECT_FALSE(std::isnan(scale.get(0, row))) << "scale of row " << row;
  }
  return bits;
}

// RMSNorm's fp8 forms with each row's outputs shared by 2 and 4 blocks (NormConfig::output_parts):
// every block reduces the whole row and so finds the same scale, and the codes, the scales and
// rstd must be bitwise those of one block a row, at 1, 2 and 4 groups per thread, for a dynamic
// scale (one part stores it) and a static one. The fused add's fp8 forms have no such kernels:
// asked for one, the launch is refused and writes nothing.
TEST(NormLaunchShapes, Fp8SharedRowsGiveTheBitsOfOneBlockARow) {
  FUSEKIT_SKIP_UNLESS_AVAILABLE(Backend::kGPU);
  const int64_t m = 3;
  for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
    for (int64_t n : {2048, 4096, 8192}) {
      for (const bool dynamic : {true, false}) {
        LaunchShapeInputs in(false, false, dtype, m, n, static_cast<uint32_t>(n + dynamic));
        detail::NormProblem& p = in.p;
        in.output_fp8(dynamic ? Fp8Format::kE4M3FN : Fp8Format::kE4M3FNUZ);
        gpu::NormShape shape;
        ASSERT_TRUE(gpu::norm_shape_of(p, &shape).ok());
        const int64_t groups = n / shape.group_elems;
        std::vector<uint64_t> reference;
        for (int items : {1, 2, 4}) {
          const int64_t threads = groups / items;
          if (threads > gpu::kNormMaxThreads) continue;
          gpu::NormConfig config;
          ASSERT_TRUE(gpu::make_norm_config(shape, gpu::NormConfig::Path::kRegisters,
                                            static_cast<int>(threads), items, &config));
          for (int parts : {1, 2, gpu::kNormMaxOutputParts}) {
            for (const bool late : {false, true}) {
              gpu::NormConfig variant = config;
              variant.output_parts = parts;
              variant.trigger_after_writes = late;
              SCOPED_TRACE(std::string(dtype_name(dtype)) + " N=" + std::to_string(n) +
                           (dynamic ? " dynamic " : " static ") + variant.to_string());
              const std::vector<uint64_t> bits = fp8_launch_bits(in, variant, dynamic);
              expect_bits_of_first_launch(&reference, bits);
            }
          }
        }
      }
    }
  }
  // The fused add with an fp8 output, outputs apart from the inputs: refused, nothing written.
  const int64_t n = 4096;
  LaunchShapeInputs in(false, true, DType::kBFloat16, m, n, 11);
  detail::NormProblem& p = in.p;
  in.output_fp8(Fp8Format::kE4M3FN);
  RowBuffer codes(Backend::kGPU, DType::kFloat8E4M3FN, m, n);  // poisoned
  RowBuffer scale(Backend::kGPU, DType::kFloat32, 1, m);
  RowBuffer r_out(Backend::kGPU, DType::kBFloat16, m, n);
  const std::vector<std::vector<uint8_t>> before = {codes.snapshot(), scale.snapshot(),
                                                    r_out.snapshot()};
  p.out = codes.data();
  p.out_stride = n;
  p.dynamic_scale = static_cast<float*>(scale.data());
  p.residual_out = r_out.data();
  p.residual_out_stride = n;
  gpu::NormShape shape;
  ASSERT_TRUE(gpu::norm_shape_of(p, &shape).ok());
  gpu::NormConfig config;
  ASSERT_TRUE(gpu::make_norm_config(shape, gpu::NormConfig::Path::kRegisters, 256, 2, &config));
  config.output_parts = 2;
  gpu::NormLaunchOverrides overrides;
  overrides.config = &config;
  const Status s = gpu::run_norm_gpu_with(p, nullptr, overrides);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("fp8"), std::string::npos) << s.message();
  ASSERT_TRUE(gpu_synchronize(0).ok());
  int k = 0;
  for (RowBuffer* b : {&codes, &scale, &r_out}) {
    b->download();
    EXPECT_TRUE(b->equals_snapshot(before[k++])) << "an output was written";
  }
}

// RMSNorm's fp8 forms, with and without the add, at one row per block of 128-512 threads (16-bit
// rows in e4m3fn on CUDA: the kernels with the row's thread count fixed at compile time,
// NormTraits::kFixedRowThreads) and at two rows per block (the count from the arguments): the
// codes, the scales, rstd and the residual sum must be the same bits, at 1, 2 and 4 groups per
// thread, for a dynamic scale (with and without an upper bound, the latter in e4m3fnuz, whose
// kernels take the count from their arguments either way) and a static one.
TEST(NormLaunchShapes, Fp8FixedThreadCountsGiveTheBitsOfTheGeneralKernels) {
  FUSEKIT_SKIP_UNLESS_AVAILABLE(Backend::kGPU);
  const int64_t m = 5;
  for (const bool add : {false, true}) {
    for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
      for (int64_t n : {1024, 2048, 4096, 8192}) {
        for (const int scale_kind : {0, 1, 2}) {  // dynamic, dynamic with a bound, static
          const bool dynamic = scale_kind < 2;
          LaunchShapeInputs in(false, add, dtype, m, n, static_cast<uint32_t>(7 * n + scale_kind));
          detail::NormProblem& p = in.p;
          in.output_fp8(scale_kind == 1 ? Fp8Format::kE4M3FNUZ : Fp8Format::kE4M3FN);
          p.scale_upper_bound = scale_kind == 1 ? 0.004f : 0.0f;
          gpu::NormShape shape;
          ASSERT_TRUE(gpu::norm_shape_of(p, &shape).ok());
          const int64_t groups = n / shape.group_elems;
          for (int items : {1, 2, 4}) {
            const int64_t threads = groups / items;
            if (threads < 128 || threads > gpu::kNormMaxThreads) continue;
            gpu::NormConfig fixed;
            ASSERT_TRUE(gpu::make_norm_config(shape, gpu::NormConfig::Path::kRegisters,
                                              static_cast<int>(threads), items, &fixed));
            ASSERT_EQ(fixed.rows_per_block, 1);
            gpu::NormConfig general = fixed;
            general.rows_per_block = 2;
            general.block_threads = 2 * fixed.block_threads;
            if (general.block_threads > gpu::kNormMaxThreads) general = fixed;
            std::vector<uint64_t> reference;
            for (const gpu::NormConfig& variant : {fixed, general}) {
              SCOPED_TRACE(std::string(add ? "add " : "") + dtype_name(dtype) +
                           " N=" + std::to_string(n) + " scale kind " +
                           std::to_string(scale_kind) + " " + variant.to_string());
              const std::vector<uint64_t> bits = fp8_launch_bits(in, variant, dynamic);
              expect_bits_of_first_launch(&reference, bits);
            }
          }
        }
      }
    }
  }
}

// RMSNorm's fp8 forms on the cluster path, with a dynamic scale: each cluster shape (2-16 blocks a
// row, 1-4 groups per thread) against the staged path. The sums' order differs between them, so
// y may differ in its last bits: each row's scale must agree to 2^-16 relative, and each value
// (code x scale) to within one fp8 step (2^-3 relative, or the smallest subnormal step). N =
// 32768 and 20480 (2560 groups: clusters of 5 and 10 blocks cover it exactly, of 2 and 3 in
// part) and 32765 (not whole groups).
TEST(NormLaunchShapes, Fp8ClusterShapesAgreeWithTheStagedPath) {
  FUSEKIT_SKIP_UNLESS_AVAILABLE(Backend::kGPU);
  for (int form = 0; form < 6; ++form) {
    const bool add = (form & 1) != 0;
    const int64_t n = form < 2 ? 32768 : form < 4 ? 32768 - 3 : 20480;
    const DType dtype = DType::kBFloat16;
    const Fp8Format format = add ? Fp8Format::kE4M3FNUZ : Fp8Format::kE4M3FN;
    const int64_t m = 3;
    LaunchShapeInputs in(false, add, dtype, m, n, static_cast<uint32_t>(n + 2 * add));
    detail::NormProblem& p = in.p;
    in.output_fp8(format);
    gpu::NormShape shape;
    ASSERT_TRUE(gpu::norm_shape_of(p, &shape).ok());
    if (shape.max_cluster_blocks < 16) GTEST_SKIP() << "this GPU has no 16-block clusters";
    struct Out {
      RowBuffer codes, scale, r_out;
    };
    auto run = [&](const gpu::NormConfig& config, Out* o) {
      o->codes = RowBuffer(Backend::kGPU, fp8_format_dtype(format), m, n);
      o->scale = RowBuffer(Backend::kGPU, DType::kFloat32, 1, m);
      o->r_out = RowBuffer(Backend::kGPU, dtype, m, n);
      p.out = o->codes.data();
      p.out_stride = n;
      p.dynamic_scale = static_cast<float*>(o->scale.data());
      p.residual_out = o->r_out.data();
      p.residual_out_stride = n;
      gpu::NormLaunchOverrides overrides;
      overrides.config = &config;
      ASSERT_TRUE(gpu::run_norm_gpu_with(p, nullptr, overrides).ok());
      ASSERT_TRUE(gpu_synchronize(0).ok());
      for (RowBuffer* b : {&o->codes, &o->scale, &o->r_out}) b->download();
    };
    gpu::NormConfig staged;
    ASSERT_TRUE(gpu::make_norm_config(shape, gpu::NormConfig::Path::kStaged,
                                      gpu::kNormStagedThreads, 0, &staged));
    Out expected;
    run(staged, &expected);
    // N = 32768: 8, 4, 2, 16 and 4 blocks; 20480: 5 (exact), 5 (two groups a thread), 2, 3, 10.
    using Shapes = std::vector<std::pair<int, int>>;  // threads, items
    const Shapes shapes = n == 20480 ? Shapes{{128, 4}, {256, 2}, {512, 4}, {256, 4}, {64, 4}}
                                     : Shapes{{512, 1}, {512, 2}, {512, 4}, {256, 1}, {256, 4}};
    for (const auto& [threads, items] : shapes) {
      gpu::NormConfig config;
      ASSERT_TRUE(gpu::make_norm_config(shape, gpu::NormConfig::Path::kCluster, threads, items,
                                        &config));
      SCOPED_TRACE("N=" + std::to_string(n) + " add=" + std::to_string(add) + " " +
                   config.to_string());
      Out got;
      run(config, &got);
      int bad = 0;
      for (int64_t row = 0; row < m; ++row) {
        const double scale = got.scale.get(0, row), want_scale = expected.scale.get(0, row);
        ASSERT_LE(std::fabs(scale - want_scale), 0x1p-16 * want_scale) << "row " << row;
        for (int64_t j = 0; j < n; ++j) {
          const double want = expected.codes.get(row, j) * want_scale;
          const double value = got.codes.get(row, j) * scale;
          if (!(std::fabs(value - want) <= 0x1p-3 * std::fabs(want) + 0x1p-9 * scale) &&
              bad++ < 5) {
            ADD_FAILURE() << "row " << row << " col " << j << ": " << value << " vs " << want;
          }
          if (add && got.r_out.raw(row, j) != expected.r_out.raw(row, j) && bad++ < 5) {
            ADD_FAILURE() << "residual_out differs at row " << row << " col " << j;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace fusekit::testing
