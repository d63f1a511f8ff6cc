// Rows whose threads are split over the blocks of a thread-block cluster
// (NormConfig::split_blocks).
//
// Each block loads, reduces and writes only its own threads' groups and gathers the other blocks'
// per-thread values before each fold, so a split launch must give the bits of the same row on one
// block: every output (y or fp8 codes, the residual sum, rstd, mean, a dynamic scale), in place
// and out of place, for every form that has these kernels (16-bit tensors of one dtype; fp8 codes
// in e4m3fn, the format NVIDIA's GPUs use). Launches the kernels cannot take are refused with a
// message and write nothing.
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu/norm/norm_gpu.h"
#include "gtest/gtest.h"
#include "norm/norm_problem.h"
#include "norm_launch_inputs.h"
#include "test_support.h"

namespace fusekit::testing {
namespace {

// One case: the form and the tensors' layout.
struct SplitForm {
  bool layer;
  bool add;
  bool fp8;      // RMSNorm only
  bool dynamic;  // fp8: a dynamic scale, else a static one
  Fp8Format format = Fp8Format::kE4M3FN;
};

std::string form_name(const SplitForm& f) {
  std::string s = f.layer ? "layer" : "rms";
  if (f.add) s += "+add";
  if (f.fp8) s += f.dynamic ? " fp8 dynamic" : " fp8 static";
  if (f.fp8 && f.format == Fp8Format::kE4M3FNUZ) s += " e4m3fnuz";
  return s;
}

// The inputs and outputs of one launch, made afresh from `seed` each time (an in-place launch
// overwrites its inputs), and every output's bits after the launch.
class SplitRun {
 public:
  SplitRun(const SplitForm& f, DType dtype, int64_t m, int64_t n, bool in_place, bool stats,
           uint32_t seed)
      : in_(f.layer, f.add, dtype, m, n, seed),
        out_(Backend::kGPU, f.fp8 ? fp8_format_dtype(f.format) : dtype, m, n),
        r_out_(Backend::kGPU, dtype, m, n), rstd_(Backend::kGPU, DType::kFloat32, 1, m),
        mean_(Backend::kGPU, DType::kFloat32, 1, m), scale_(Backend::kGPU, DType::kFloat32, 1, m) {
    poison_outputs();
    detail::NormProblem& p = in_.p;
    // In place: out is x (fp8: codes cannot overwrite x), residual_out is residual.
    const bool out_in_place = in_place && !f.fp8;
    p.out = out_in_place ? in_.x.data() : out_.data();
    p.out_stride = n;
    p.residual_out = in_place ? in_.r.data() : r_out_.data();
    p.residual_out_stride = n;
    p.rstd = stats ? static_cast<float*>(rstd_.data()) : nullptr;
    p.mean = stats && f.layer ? static_cast<float*>(mean_.data()) : nullptr;
    if (f.fp8) {
      in_.output_fp8(f.format);
      p.dynamic_scale = f.dynamic ? static_cast<float*>(scale_.data()) : nullptr;
      p.static_scale = f.dynamic ? nullptr : static_cast<const float*>(in_.static_scale.data());
    }
    outputs_ = {out_in_place ? &in_.x : &out_, in_place ? &in_.r : &r_out_, &rstd_, &mean_,
                &scale_};
  }

  const detail::NormProblem& problem() const { return in_.p; }

  // The inputs of `seed` again and every output poisoned, as a fresh run's: the next launch on
  // the same buffers (allocations are what a sanitizer slows the most, so the cases reuse them).
  void reset(uint32_t seed) {
    in_.refill(seed);
    poison_outputs();
  }

  // Every output buffer's bits (whole storage, so untouched poison counts too).
  std::vector<uint8_t> bits() {
    std::vector<uint8_t> all;
    for (RowBuffer* o : outputs_) {
      o->download();
      const std::vector<uint8_t> s = o->snapshot();
      all.insert(all.end(), s.begin(), s.end());
    }
    return all;
  }

 private:
  void poison_outputs() {
    for (RowBuffer* o : {&out_, &r_out_, &rstd_, &mean_, &scale_}) {
      o->poison();
      o->upload();
    }
  }

  LaunchShapeInputs in_;
  RowBuffer out_, r_out_, rstd_, mean_, scale_;
  std::vector<RowBuffer*> outputs_;
};

// One form and dtype per test, so that a sanitizer's runs, a process per test, spread them over
// the GPU (scripts/sanitize_tests.sh).
using SplitParam = std::tuple<SplitForm, DType>;

class SplitRowsBits : public ::testing::TestWithParam<SplitParam> {};

TEST_P(SplitRowsBits, SplitRowsGiveTheBitsOfOneBlockARow) {
  FUSEKIT_SKIP_UNLESS_AVAILABLE(Backend::kGPU);
  const auto [f, dtype] = GetParam();
  const int64_t m = 3;
  int split_launches = 0;
  // Rows of 2^k groups, and the others' coverings: three groups a thread exactly (3072, 12288)
  // and one, two, three or four with each thread's last group partly past the row (520, 768,
  // 1016, 1536, 2560, 3584 on 128 threads, the first two with a block of threads that hold no
  // group; 4608, 7168 on 256; 14336 on 512).
  for (int64_t n : {2048, 4096, 8192, 16384, 520, 768, 1016, 1536, 2560, 3072, 3584, 4608, 7168,
                    12288, 14336}) {
    for (const bool in_place : {false, true}) {
      for (const bool stats : {false, true}) {
        const uint32_t seed = static_cast<uint32_t>(n) + (in_place ? 1 : 0);
        SplitRun run(f, dtype, m, n, in_place, stats, seed);
        gpu::NormShape shape;
        ASSERT_TRUE(gpu::norm_shape_of(run.problem(), &shape).ok());
        if (shape.max_cluster_blocks < 2) GTEST_SKIP() << "no thread-block clusters";
        ASSERT_TRUE(shape.split_rows_built);
        const int64_t groups = n / shape.group_elems;
        std::vector<uint8_t> reference;
        for (const auto [threads, items] : {std::pair{128, 1}, {128, 2}, {128, 3}, {128, 4},
                                            {256, 1}, {256, 2}, {256, 3}, {256, 4},
                                            {512, 1}, {512, 2}, {512, 3}, {512, 4}}) {
          if (!gpu::split_rows_cover(groups, threads, items)) continue;
          gpu::NormConfig one_block;
          ASSERT_TRUE(gpu::make_norm_config(shape, gpu::NormConfig::Path::kRegisters, threads,
                                            items, &one_block));
          std::vector<gpu::NormConfig> variants = {one_block};
          for (int blocks = 2; blocks <= gpu::kNormMaxSplitBlocks; blocks *= 2) {
            for (const bool late : {false, true}) {
              gpu::NormConfig split = one_block;
              split.trigger_after_writes = late;
              if (gpu::split_norm_rows(shape, blocks, &split)) variants.push_back(split);
            }
          }
          for (gpu::NormConfig variant : variants) {
            variant.plain = !stats;
            SCOPED_TRACE(form_name(f) + " " + dtype_name(dtype) + " N=" + std::to_string(n) +
                         (in_place ? " in place " : " apart ") + (stats ? "stats " : "") +
                         variant.to_string());
            run.reset(seed);
            gpu::NormLaunchOverrides overrides;
            overrides.config = &variant;
            ASSERT_TRUE(gpu::run_norm_gpu_with(run.problem(), nullptr, overrides).ok());
            ASSERT_TRUE(gpu_synchronize(0).ok());
            const std::vector<uint8_t> bits = run.bits();
            expect_bits_of_first_launch(&reference, bits);
            split_launches += variant.split_blocks > 1 ? 1 : 0;
          }
        }
      }
    }
  }
  EXPECT_GT(split_launches, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Forms, SplitRowsBits,
    ::testing::Combine(
        ::testing::Values(SplitForm{false, false, false, false},
                          SplitForm{false, true, false, false},
                          SplitForm{true, false, false, false}, SplitForm{true, true, false, false},
                          SplitForm{false, false, true, true}, SplitForm{false, false, true, false},
                          SplitForm{false, true, true, true}, SplitForm{false, true, true, false}),
        ::testing::Values(DType::kBFloat16, DType::kFloat16)),
    [](const ::testing::TestParamInfo<SplitParam>& info) {
      std::string name = "gpu_" + form_name(std::get<0>(info.param)) + "_" +
                         dtype_name(std::get<1>(info.param));
      for (char& ch : name) {
        if (ch == ' ' || ch == '+') ch = '_';
      }
      return name;
    });

// Forms without these kernels (float32 rows; e4m3fnuz codes on CUDA, AMD's format),
// more blocks than a portable cluster, and blocks of less than a warp are refused with a message,
// and nothing is written; the heuristic does not take the split for those forms.
TEST(NormLaunchShapes, SplitRowsAreRefusedWhereNoKernelTakesThem) {
  FUSEKIT_SKIP_UNLESS_AVAILABLE(Backend::kGPU);
  const SplitForm add = {false, true, false, false};
  const SplitForm fnuz = {false, true, true, true, Fp8Format::kE4M3FNUZ};
  struct Refused {
    SplitForm form;
    DType dtype;
    int threads;
    int blocks;
    bool built;  // the form has split kernels (only the launch shape is refused)
  };
  for (const Refused& c : {Refused{add, DType::kFloat32, 256, 2, false},
                           Refused{fnuz, DType::kBFloat16, 128, 2, false},
                           Refused{fnuz, DType::kFloat16, 256, 4, false},
                           Refused{add, DType::kBFloat16, 128, 16, true},
                           Refused{add, DType::kBFloat16, 128, 8, true}}) {
    const int64_t m = 2;
    const int64_t n = 256 * 16 / static_cast<int64_t>(dtype_size(c.dtype));  // 256 groups
    SplitRun run(c.form, c.dtype, m, n, !c.form.fp8, true, 5);
    const std::vector<uint8_t> before = run.bits();
    gpu::NormShape shape;
    ASSERT_TRUE(gpu::norm_shape_of(run.problem(), &shape).ok());
    if (shape.max_cluster_blocks < 2) GTEST_SKIP() << "no thread-block clusters";
    EXPECT_EQ(shape.split_rows_built, c.built) << form_name(c.form);
    if (!c.built) EXPECT_EQ(gpu::choose_norm_config(shape).split_blocks, 1) << form_name(c.form);
    gpu::NormConfig config;
    ASSERT_TRUE(gpu::make_norm_config(shape, gpu::NormConfig::Path::kRegisters, c.threads,
                                      256 / c.threads, &config));
    EXPECT_FALSE(gpu::split_norm_rows(shape, c.blocks, &config));
    config.split_blocks = c.blocks;
    config.block_threads = c.threads / c.blocks;
    SCOPED_TRACE(form_name(c.form) + " " + config.to_string() + " " + dtype_name(c.dtype));
    gpu::NormLaunchOverrides overrides;
    overrides.config = &config;
    const Status s = gpu::run_norm_gpu_with(run.problem(), nullptr, overrides);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("split_blocks"), std::string::npos) << s.message();
    ASSERT_TRUE(gpu_synchronize(0).ok());
    EXPECT_EQ(run.bits(), before) << "an output was written";
  }
}

}  // namespace
}  // namespace fusekit::testing
