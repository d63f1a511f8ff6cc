// Batch invariance and determinism of the normalization ops, on every backend present.
//
// A row normalized inside a batch of 257 rows must be bitwise identical to the same row
// normalized alone, whether the lone row sits in a fresh aligned buffer or one element off
// alignment (which changes the kernels' access width but must not change the result); and two
// runs on the same inputs must be bitwise identical (not compared under a sanitizer:
// repeat_runs_compared). Sizes cover both kernel paths.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu/norm/norm_gpu.h"
#include "gtest/gtest.h"
#include "norm_cases.h"
#include "norm_launch_inputs.h"
#include "norm/norm_problem.h"

namespace fusekit::testing {
namespace {

// The dtype is a parameter too, so that a sanitizer's runs, a process per test, spread the
// large batches over the GPU (scripts/sanitize_tests.sh).
using Param = std::tuple<Backend, NormOp, DType>;

class NormInvariance : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    FUSEKIT_SKIP_UNLESS_AVAILABLE(std::get<0>(GetParam()));
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
  const DType dtype = std::get<2>(GetParam());
  for (int64_t n :
       {64, 128, 769, 896, 1024, 2304, 4096, 5120, 5125, 7168, 8192, 12288, 16384, 20480,
        65536, 262144}) {
    const bool gpu = backend == Backend::kGPU;
    // The GPU's five-group kernel, and (2304 and 7168 bf16) its three- and four-group kernels
    // whose threads' last groups lie partly past the row (RowFit::kLastPartial); the CPU has
    // no such paths. 12288 float32 and 20480 take clusters of 3 and 5 blocks. A lone row of
    // 896 bf16 (112 groups) is split over the blocks of a cluster, one group a thread.
    // 8192 and 16384 bf16: rows split over blocks of 128 threads at mid batches (below); 1024
    // bf16: one group a thread on 128 threads at mid batches.
    if ((n == 896 || n == 1024 || n == 2304 || n == 5120 || n == 7168 || n == 8192 ||
         n == 16384 || n == 20480) &&
        !gpu) {
      continue;
    }
    NormCase batch;
    batch.op = op;
    batch.x_dtype = batch.weight_dtype = batch.residual_dtype = dtype;
    // On the GPU, enough rows that it picks its large-batch launch shape for the registers path,
    // and on the cluster path more rows than the GPU holds clusters (each cluster then
    // normalizes several rows in turn: 32 rows of 262144 against at most ~14 clusters of 16
    // blocks on an H100, 128 of 65536 against ~30-62 clusters of 4).
    // Short rows (N = 64, 128) in batches that fill the GPU with them: blocks of several rows.
    const int64_t large_batch =
        n > 16384 ? (gpu ? std::max<int64_t>(3, (int64_t{1} << 23) / n) : 3)
        : n <= 128 ? (gpu ? 16384 : 257)
                   : (gpu ? 1100 : 257);
    // And on the GPU a mid batch, where LayerNorm's rows that are not 2^k groups split over two
    // blocks of a cluster (128 threads at 2304 and, one group a thread, at 896 up to twice as
    // many rows as SMs: 200 rows; 256 threads at 5120 and 7168 bf16 up to as many: 100).
    std::vector<int64_t> batch_sizes = {large_batch};
    if (gpu && (n == 2304 || n == 5120 || n == 7168)) batch_sizes.push_back(100);
    if (gpu && n == 896) batch_sizes.push_back(200);
    // And 200 rows (between one and two rows an SM) of 1024 and of 7168 bf16: RMSNorm's rows on
    // 128 threads of one group, the fused add's of 256 x 4 split over two blocks of 128.
    if (gpu && (n == 1024 || n == 7168)) batch_sizes.push_back(200);
    // And 256 rows, one to two blocks an SM, where the launch moves the trigger after the writes
    // if the kernel's blocks leave no room for the next grid's (gpu::next_grid_crowded).
    if (gpu && (n == 4096 || n == 12288)) batch_sizes.push_back(256);
    // And 160 rows of 1024 groups or more, split over blocks of 128 threads (RMSNorm alone's
    // rows of 1024 groups over two blocks of 256), and 232 of 2048, RMSNorm's split over two
    // blocks of 256 (take_split_rows).
    if (gpu && (n == 8192 || n == 12288 || n == 16384)) batch_sizes.push_back(160);
    if (gpu && n == 16384) batch_sizes.push_back(232);
    for (const int64_t rows : batch_sizes) {
      batch.rows = rows;
      batch.cols = n;
      batch.stats = true;
      batch.seed = static_cast<uint32_t>(n);
      SCOPED_TRACE(batch.name());
      NormRun inputs;
      const NormRun first = run_norm_case(batch, backend, &inputs);
      ASSERT_TRUE(first.status.ok()) << first.status.to_string();
      // The inputs are finite, so any NaN left is unwritten poison: without this, a batch and a
      // lone row that both wrote nothing would compare equal.
      ASSERT_TRUE((is_in_place(op) ? first.x : first.out).rows_hold_no_nan());
      if (is_add(op)) {
        ASSERT_TRUE((is_in_place(op) ? first.residual : first.residual_out).rows_hold_no_nan());
      }
      ASSERT_TRUE(first.rstd.rows_hold_no_nan());
      if (repeat_runs_compared()) {
        const NormRun second = run_norm_case(batch, backend);
        for (int64_t r = 0; r < batch.rows; ++r) {
          ASSERT_EQ(row_bits(batch, first, r), row_bits(batch, second, r))
              << "run-to-run difference in row " << r;
        }
      }
      for (int64_t r : {int64_t{0}, batch.rows / 2, batch.rows - 1}) {
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
                                         NormOp::kAddLayer),
                       ::testing::Values(DType::kBFloat16, DType::kFloat32)),
    [](const ::testing::TestParamInfo<Param>& info) {
      return std::string(backend_name(std::get<0>(info.param))) + "_" +
             norm_op_name(std::get<1>(info.param)) + "_" + dtype_name(std::get<2>(info.param));
    });

// The determinism half of the invariance tests runs unless scripts/sanitize_tests.sh's flag says
// a sanitizer is checking the launches (test_support.h); "0" or empty is the flag unset.
TEST(RepeatRunsCompared, UnlessTheSanitizerFlagIsSet) {
  const char* name = "FUSEKIT_TEST_UNDER_SANITIZER";
  const char* was = std::getenv(name);
  const std::string saved = was != nullptr ? was : "";
  ASSERT_EQ(unsetenv(name), 0);
  EXPECT_TRUE(repeat_runs_compared());
  ASSERT_EQ(setenv(name, "1", 1), 0);
  EXPECT_FALSE(repeat_runs_compared());
  ASSERT_EQ(setenv(name, "0", 1), 0);
  EXPECT_TRUE(repeat_runs_compared());
  ASSERT_EQ(setenv(name, "", 1), 0);
  EXPECT_TRUE(repeat_runs_compared());
  if (was != nullptr) {
    ASSERT_EQ(setenv(name, saved.c_str(), 1), 0);
  } else {
    ASSERT_EQ(unsetenv(name), 0);
  }
}

// The registers path sums in one order for every power-of-two number of groups per thread, and
// for three and five (kNormOddItemCounts) where those cover the row exactly, which is what lets
// the GPU choose that number from the batch size: each launch shape must give the same bits, as
// must the choices that only move loads or the next launch (NormConfig::weight_at_output,
// trigger_after_writes) or share a row's outputs among blocks (output_parts), and with each the
// plain kernels (a weight and nothing else: NormConfig::plain, where built) against the general
// ones (rstd asked for). One form and dtype a test, so that a sanitizer's runs, a process per
// test, spread them over the GPU (scripts/sanitize_tests.sh): LayerNorm or not, the fused add or
// not, the dtype.
using LaunchShapeParam = std::tuple<bool, bool, DType>;

// Runs *p under `config` (rstd asked for where `stats`) into fresh GPU outputs and puts the bits
// of out (and of residual_out, with the add) in *bits, row by row.
void launch_bits(detail::NormProblem* p, const gpu::NormConfig& config, bool stats,
                 std::vector<uint64_t>* bits) {
  const int64_t m = p->rows, n = p->cols;
  RowBuffer out(Backend::kGPU, p->x_dtype, m, n), r_out(Backend::kGPU, p->x_dtype, m, n);
  RowBuffer rstd(Backend::kGPU, DType::kFloat32, 1, m);
  p->rstd = stats ? static_cast<float*>(rstd.data()) : nullptr;
  p->out = out.data();
  p->out_stride = n;
  p->residual_out = r_out.data();
  p->residual_out_stride = n;
  gpu::NormLaunchOverrides overrides;
  overrides.config = &config;
  ASSERT_TRUE(gpu::run_norm_gpu_with(*p, nullptr, overrides).ok());
  ASSERT_TRUE(gpu_synchronize(0).ok());
  out.download();
  r_out.download();
  bits->clear();
  for (int64_t row = 0; row < m; ++row) {
    for (int64_t j = 0; j < n; ++j) {
      bits->push_back(out.raw(row, j));
      if (p->add_residual) bits->push_back(r_out.raw(row, j));
    }
  }
}

class NormLaunchShapeBits : public ::testing::TestWithParam<LaunchShapeParam> {};

TEST_P(NormLaunchShapeBits, GroupsPerThreadDoNotChangeResults) {
  FUSEKIT_SKIP_UNLESS_AVAILABLE(Backend::kGPU);
  const auto [layer, add, dtype] = GetParam();
  for (int64_t n :
       {7, 24, 40, 64, 384, 640, 768, 769, 1016, 1536, 2304, 2560, 3072, 3584, 4096, 4100,
        4608, 5120, 5125, 6140, 6144, 7168, 8192, 9216, 12288, 14336, 16384}) {
    const int64_t m = 7;
    LaunchShapeInputs in(layer, add, dtype, m, n, static_cast<uint32_t>(n));
    detail::NormProblem& p = in.p;
    gpu::NormShape shape;
    ASSERT_TRUE(gpu::norm_shape_of(p, &shape).ok());
    std::vector<uint64_t> reference;
    // Registers path with 1, 2 and 4 groups per thread, and 3 and 5 where they cover the row
    // exactly (N = 3072 and 5120: 128 threads of bf16, 256 of fp32; N = 384: 16 and 32
    // threads, rows sharing a block; N = 640 and 768: 16 x 5 and 32 x 3 bf16; N = 24 and 40:
    // one thread a row, 64 rows a block) in the forms that have that kernel
    // (gpu::odd_items_built); LayerNorm alone's plain ones with the row's thread count
    // fixed (16-bit rows) on 64 (N = 1536 and 2560 bf16), 128 (3072, 5120), 256 (6144) and
    // 512 threads (12288), the last two also packed (NormConfig::packed_row), as are RMSNorm
    // alone's. N = 3584 at four groups per thread and 2304 at three: every thread's last
    // group tested against the row's end and its others not (RowFit::kLastPartial); 3584
    // also against twice the threads (RowFit::kWhole); 2304 and 4608 (2304 of fp32) at five
    // on half the threads too, full-width rows only (gpu::five_last_partial; not LayerNorm
    // with the add, which has no five-group kernel). LayerNorm alone's plain kernels of those
    // fits on each fixed thread count: 64 (2304 x 5), 128 (2304 x 3, 3584 x 4, 4608 x 5), 256
    // (4608 x 3, 7168 x 4, 9216 x 5) and 512 threads (9216 x 3, 14336 x 4). Rows off the
    // group (769 at four, 4100, 5125 and 6140 at three: the last group partial, the rows
    // unaligned) take those kernels too, 6140 covering the row exactly. N = 640, 768 and 1016
    // at one group a thread on 128 threads, one row a block (16-bit rows): the kernel that
    // tests each thread's only group (gpu::one_group_last_partial), its last warp idle at 640.
    for (int items : {1, 2, 4, 3, 5}) {
      SCOPED_TRACE("layer=" + std::to_string(layer) + " add=" + std::to_string(add) +
                   " " + dtype_name(dtype) + " N=" + std::to_string(n) +
                   " items=" + std::to_string(items));
      const int64_t groups = (n + shape.group_elems - 1) / shape.group_elems;
      int threads = 1;
      while (threads * items < groups) threads *= 2;
      if (threads > gpu::kNormMaxThreads) continue;  // needs more groups per thread
      gpu::NormConfig config;
      const bool made = gpu::make_norm_config(shape, gpu::NormConfig::Path::kRegisters,
                                              threads, items, &config);
      if (gpu::norm_odd_items(items)) {
        const bool covers =
            (shape.whole_groups && threads * items == groups) ||
            gpu::takes_last_partial(shape.whole_groups, shape.narrow_accesses, groups,
                                    threads, items);
        ASSERT_EQ(made, covers && gpu::odd_items_built(layer, add, items));
        if (!made) continue;
      }
      ASSERT_TRUE(made);
      // The config as made, with the trigger after the writes, and (the fused add's
      // four-group rows) with the weight loaded at the output.
      std::vector<gpu::NormConfig> variants = {config, config};
      variants[1].trigger_after_writes = true;
      if (add && !layer && items == 4) {
        variants.push_back(config);
        variants.back().weight_at_output = true;
      }
      // Plain three-group rows without the add on 256 and 512 threads (N = 6144 and 12288
      // bf16) in the kernels of more blocks an SM, their rows packed through the reductions.
      if (!add && items == 3) {
        variants.push_back(config);
        variants.back().packed_row = true;
      }
      // Two rows per block where they fit: kernels that take the row's thread count from
      // their arguments, where one row per block of 128-512 threads takes (16-bit rows) a
      // kernel with the count fixed at compile time.
      if (config.rows_per_block == 1 && config.block_threads * 2 <= gpu::kNormMaxThreads) {
        variants.push_back(config);
        variants.back().rows_per_block = 2;
        variants.back().block_threads = 2 * config.block_threads;
      }
      // Short rows in the heuristic's blocks of 256 groups at large batches
      // (gpu::widen_short_row_blocks), more rows a block than the batch's seven: rows past
      // the batch must be left alone.
      gpu::NormConfig short_rows = config;
      gpu::widen_short_row_blocks(groups, &short_rows);
      if (short_rows.rows_per_block > 2) variants.push_back(short_rows);
      // Twice the threads the row needs, where a block holds them: slots or whole threads
      // past the row, which the sums (and LayerNorm's merged moments) must leave out.
      gpu::NormConfig wide;
      if (!gpu::norm_odd_items(items) && 2 * threads <= gpu::kNormMaxThreads &&
          gpu::make_norm_config(shape, gpu::NormConfig::Path::kRegisters, 2 * threads,
                                items, &wide)) {
        variants.push_back(wide);
      }
      // Each row's outputs shared by two and four blocks that each read all of it (exact
      // rows of their own blocks, of one, two or four groups per thread, only).
      const bool exact_rows = n % shape.group_elems == 0 && threads * items == groups &&
                              !gpu::norm_odd_items(items) && config.rows_per_block == 1;
      for (int parts : {2, gpu::kNormMaxOutputParts}) {
        if (!exact_rows) break;
        variants.push_back(config);
        variants.back().output_parts = parts;
        variants.push_back(variants.back());
        variants.back().trigger_after_writes = true;
      }
      for (size_t v = 0; v < 2 * variants.size(); ++v) {
        gpu::NormConfig variant = variants[v / 2];
        const bool stats = v % 2 == 1;
        variant.plain = !stats;
        SCOPED_TRACE(variant.to_string() + (stats ? " with rstd" : ""));
        std::vector<uint64_t> bits;
        ASSERT_NO_FATAL_FAILURE(launch_bits(&p, variant, stats, &bits));
        expect_bits_of_first_launch(&reference, bits);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Forms, NormLaunchShapeBits,
    ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                       ::testing::Values(DType::kBFloat16, DType::kFloat16, DType::kFloat32)),
    [](const ::testing::TestParamInfo<LaunchShapeParam>& info) {
      return std::string("gpu_") + (std::get<1>(info.param) ? "fused_add_" : "") +
             (std::get<0>(info.param) ? "layer_norm_" : "rms_norm_") +
             dtype_name(std::get<2>(info.param));
    });

// Sharing a row's outputs among blocks (NormConfig::output_parts) needs rows of their own blocks,
// not the fused add with an fp8 output, and outputs apart from the inputs; a launch asked for it
// otherwise is refused with a message, and writes nothing.
TEST(NormLaunchShapes, SharedRowOutputsAreRefusedWhereBlocksCouldRace) {
  FUSEKIT_SKIP_UNLESS_AVAILABLE(Backend::kGPU);
  const int64_t m = 3, n = 4096;
  LaunchShapeInputs in(false, true, DType::kBFloat16, m, n, 7);
  detail::NormProblem& p = in.p;
  gpu::NormShape shape;
  ASSERT_TRUE(gpu::norm_shape_of(p, &shape).ok());
  gpu::NormConfig config;
  ASSERT_TRUE(gpu::make_norm_config(shape, gpu::NormConfig::Path::kRegisters, 512, 1, &config));
  config.output_parts = 2;
  gpu::NormLaunchOverrides overrides;
  overrides.config = &config;
  const std::vector<uint64_t> x_before = [&] {
    in.x.download();
    std::vector<uint64_t> bits;
    for (int64_t j = 0; j < n; ++j) bits.push_back(in.x.raw(0, j));
    return bits;
  }();
  // In place: out is x and residual_out is residual.
  p.out = in.x.data();
  p.out_stride = p.x_stride;
  p.residual_out = in.r.data();
  p.residual_out_stride = p.residual_stride;
  Status s = gpu::run_norm_gpu_with(p, nullptr, overrides);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("apart"), std::string::npos) << s.message();
  ASSERT_TRUE(gpu_synchronize(0).ok());
  in.x.download();
  for (int64_t j = 0; j < n; ++j) ASSERT_EQ(in.x.raw(0, j), x_before[j]) << j;
  // Outputs apart, but two rows per block.
  RowBuffer out(Backend::kGPU, DType::kBFloat16, m, n);
  RowBuffer r_out(Backend::kGPU, DType::kBFloat16, m, n);
  p.out = out.data();
  p.out_stride = n;
  p.residual_out = r_out.data();
  p.residual_out_stride = n;
  gpu::NormConfig paired = config;
  ASSERT_TRUE(gpu::make_norm_config(shape, gpu::NormConfig::Path::kRegisters, 128, 4, &paired));
  paired.rows_per_block = 2;
  paired.block_threads = 256;
  paired.output_parts = 2;
  overrides.config = &paired;
  s = gpu::run_norm_gpu_with(p, nullptr, overrides);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("one row per block"), std::string::npos) << s.message();
  // And the same config with one row per block runs.
  paired.rows_per_block = 1;
  paired.block_threads = 128;
  EXPECT_TRUE(gpu::run_norm_gpu_with(p, nullptr, overrides).ok());
  ASSERT_TRUE(gpu_synchronize(0).ok());
}

// The cluster kernel's plain form (a weight and nothing else: rows its blocks cover exactly,
// NormConfig::plain) against its general form on the same launch (rstd asked for): the same bits,
// in every form and both 16-bit dtypes. N = 20480: 5 blocks of 128 threads, 32768: 2 of 512,
// 262144: 16 of 512 over 40 rows, more than the GPU holds such clusters, so that each cluster
// loops over rows (the plain kernel's slot reuse and prefetch); LayerNorm with and without a
// bias. Zero weights of both signs (LaunchShapeInputs) catch a +0 offset added where the plain
// form adds none.
TEST(NormLaunchShapes, PlainClusterKernelsGiveTheGeneralBits) {
  FUSEKIT_SKIP_UNLESS_AVAILABLE(Backend::kGPU);
  struct Shape {
    int64_t n, m;
    int threads;
  };
  for (int form = 0; form < 4; ++form) {
    const bool layer = (form & 1) != 0, add = (form & 2) != 0;
    for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
      for (const Shape& shape_case : {Shape{20480, 3, 128}, Shape{32768, 3, 512},
                                      Shape{262144, 40, 512}}) {
        const int64_t n = shape_case.n, m = shape_case.m;
        if (n == 262144 && dtype != DType::kBFloat16) continue;
        SCOPED_TRACE("layer=" + std::to_string(layer) + " add=" + std::to_string(add) + " " +
                     dtype_name(dtype) + " N=" + std::to_string(n));
        LaunchShapeInputs in(layer, add, dtype, m, n, static_cast<uint32_t>(n + form));
        detail::NormProblem& p = in.p;
        gpu::NormShape shape;
        ASSERT_TRUE(gpu::norm_shape_of(p, &shape).ok());
        if (shape.max_cluster_blocks < 2) GTEST_SKIP() << "this GPU has no thread-block clusters";
        gpu::NormConfig config;
        if (!gpu::make_norm_config(shape, gpu::NormConfig::Path::kCluster, shape_case.threads,
                                   gpu::kNormClusterMaxItems, &config)) {
          continue;  // more blocks than this GPU's clusters hold
        }
        ASSERT_TRUE(gpu::cluster_covers_row(shape, config));
        // The plain kernel's bits against the general one's (rstd asked for) on this launch.
        auto expect_plain_bits_general = [&] {
          std::vector<uint64_t> reference;
          for (bool plain : {false, true}) {
            config.plain = plain;
            SCOPED_TRACE(config.to_string() + (layer && p.bias == nullptr ? " no bias" : ""));
            std::vector<uint64_t> bits;
            ASSERT_NO_FATAL_FAILURE(launch_bits(&p, config, !plain, &bits));
            expect_bits_of_first_launch(&reference, bits);
          }
        };
        expect_plain_bits_general();
        if (layer) {  // and without a bias, where the plain kernel's bias is zeros
          p.bias = nullptr;
          expect_plain_bits_general();
        }
      }
    }
  }
}

// The cluster path's shapes (blocks per row x groups per thread) change the summation order, so
// they need not agree bitwise; each must agree with the staged path (one block per row) to within
// the rounding of the output: 2^-6 relative (a few ulps of bf16; the float32 sums of 32768 terms
// differ far less). N = 32768 is covered exactly by each shape's blocks; N = 32765 is not whole
// groups (the bounds-checked kernel); N = 20480 (2560 groups) by clusters of 5 blocks (128 x 4,
// 256 x 2, 512 x 1) exactly, of 2 and 3 in part.
TEST(NormLaunchShapes, ClusterShapesAgreeWithTheStagedPath) {
  FUSEKIT_SKIP_UNLESS_AVAILABLE(Backend::kGPU);
  // Each form at N = 32768, 32765 and 20480.
  for (int form = 0; form < 12; ++form) {
    const bool layer = (form & 1) != 0, add = (form & 2) != 0;
    const int64_t n = form < 4 ? 32768 : form < 8 ? 32768 - 3 : 20480;
    const DType dtype = DType::kBFloat16;
    const int64_t m = 3;
    LaunchShapeInputs in(layer, add, dtype, m, n, static_cast<uint32_t>(n + layer + 2 * add));
    detail::NormProblem& p = in.p;
    gpu::NormShape shape;
    ASSERT_TRUE(gpu::norm_shape_of(p, &shape).ok());
    if (shape.max_cluster_blocks < 8) GTEST_SKIP() << "this GPU has no thread-block clusters";
    auto run = [&](const gpu::NormConfig& config, RowBuffer* out, RowBuffer* r_out) {
      p.out = out->data();
      p.out_stride = n;
      p.residual_out = r_out->data();
      p.residual_out_stride = n;
      gpu::NormLaunchOverrides overrides;
      overrides.config = &config;
      ASSERT_TRUE(gpu::run_norm_gpu_with(p, nullptr, overrides).ok());
      ASSERT_TRUE(gpu_synchronize(0).ok());
      out->download();
      r_out->download();
    };
    gpu::NormConfig staged;
    ASSERT_TRUE(gpu::make_norm_config(shape, gpu::NormConfig::Path::kStaged,
                                      gpu::kNormStagedThreads, 0, &staged));
    RowBuffer expected(Backend::kGPU, dtype, m, n), expected_r(Backend::kGPU, dtype, m, n);
    run(staged, &expected, &expected_r);
    // 32768 and 32765: 8, 4 and 2 blocks of 512 threads; 20480: the 5-block shapes, 2 and 3.
    using Shapes = std::vector<std::pair<int, int>>;  // threads, items
    const Shapes shapes = n == 20480 ? Shapes{{128, 4}, {256, 2}, {512, 1}, {512, 4}, {256, 4}}
                                     : Shapes{{512, 1}, {512, 2}, {512, 4}};
    for (const auto& [threads, items] : shapes) {
      SCOPED_TRACE("N=" + std::to_string(n) + " layer=" + std::to_string(layer) +
                   " add=" + std::to_string(add) + " threads=" + std::to_string(threads) +
                   " items=" + std::to_string(items));
      gpu::NormConfig config;
      ASSERT_TRUE(gpu::make_norm_config(shape, gpu::NormConfig::Path::kCluster, threads, items,
                                        &config));
      RowBuffer out(Backend::kGPU, dtype, m, n), r_out(Backend::kGPU, dtype, m, n);
      run(config, &out, &r_out);
      int bad = 0;
      for (int64_t row = 0; row < m; ++row) {
        for (int64_t j = 0; j < n; ++j) {
          const double want = expected.get(row, j), got = out.get(row, j);
          if (!(std::fabs(got - want) <= 0x1p-6 * std::fabs(want) + 1e-6) && bad++ < 5) {
            ADD_FAILURE() << "row " << row << " col " << j << ": " << got << " vs " << want;
          }
          if (add && r_out.raw(row, j) != expected_r.raw(row, j) && bad++ < 5) {
            ADD_FAILURE() << "residual_out differs at row " << row << " col " << j;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace fusekit::testing
