// Rows in runs: rms_norm and layer_norm on views whose leading dimensions flatten into two
// strides, on every backend present.
//
// The common case is a per-head norm (the q / k norms of Qwen3, Gemma 3 or Command R) on a view
// of a fused projection's output: q = qkv[:, :H * D].view(T, H, D) is T runs of H rows of stride
// D, the runs qkv's row width apart. Such a call must give the bits of the same rows laid out one
// stride apart (a row's result depends on its values alone, and the GPU's kernels of rows in runs
// keep the reduction order of the one-stride call they stand in for), whatever the gaps between
// runs (aligned to 16 bytes, odd, which narrows the GPU's accesses, or negative, rows padded past
// N within a run), for every output form and each launch path the one-stride call would take
// (short rows at small and large batches, rows of three or five groups a thread, rows split over
// a cluster, long rows on clusters or the staged path). Calls whose tensors' runs differ, whose
// runs overlap or whose dimensions flatten into three strides are refused with an error naming
// the argument, and write nothing; the fused adds, the fp8 forms and the other op families take
// rows of one stride only.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fusekit/activation.h"
#include "fusekit/norm.h"
#include "gtest/gtest.h"
#include "norm_cases.h"
#include "norm_fp8_cases.h"

namespace fusekit::testing {
namespace {

class NormRowRuns : public BackendTest {};

// Every output of a run: out (x for in place), rstd and mean.
std::vector<uint64_t> norm_bits(const NormCase& c, const NormRun& run) {
  const RowBuffer& out = is_in_place(c.op) ? run.x : run.out;
  std::vector<uint64_t> bits;
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t j = 0; j < c.cols; ++j) bits.push_back(out.raw(r, j));
    bits.push_back(run.rstd.raw(0, r));
    if (is_layer(c.op)) bits.push_back(run.mean.raw(0, r));
  }
  return bits;
}

// Gaps between runs, x's and out's, with the pads (row strides past N) that go with them.
struct RunLayout {
  const char* what;
  int64_t x_gap, out_gap, x_pad, out_pad;
};
// 16-byte aligned gaps (the GPU's full-width accesses), and out of one run beside x in runs; odd
// gaps (narrow accesses, each tensor at its own phase); a negative gap (rows padded past N within
// a run: the runs' starts closer than the rows' stride alone would put them).
constexpr RunLayout kRunLayouts[] = {
    {"aligned", 64, 0, 0, 8},
    {"odd", 3, 5, 0, 0},
    {"negative", -5, -8, 8, 8},
};

NormCase with_runs(NormCase c, int64_t runs, const RunLayout& l) {
  c.rank3_d0 = static_cast<int>(runs);
  c.x_run_gap = l.x_gap;
  c.out_run_gap = l.out_gap;
  c.x_pad = l.x_pad;
  c.out_pad = l.out_pad;
  return c;
}

// (runs, rows per run, N): per-head rows at decode and mid batches and many rows (the GPU's
// latency shapes, several rows a block, and its large-batch shapes), rows of three groups a
// thread (N = 96 bf16) and of five (5120 at batches that fill the GPU), rows split over a
// cluster's blocks at decode (4096), rows off the 16-byte group, and long rows (clusters, odd and
// covered exactly, or the staged path).
struct Shape {
  int64_t runs, run_rows, cols;
};
constexpr Shape kShapes[] = {
    {1, 8, 128},   {4, 8, 128},    {96, 40, 128},  {12, 6, 256},  {40, 10, 96},
    {5, 3, 769},   {300, 5, 896},  {2, 2, 4096},   {4, 2, 4100},  {200, 4, 5120},
    {64, 2, 5125}, {3, 2, 20483},  {2, 2, 32768},
};

TEST_P(NormRowRuns, GiveTheBitsOfRowsOfOneStride) {
  const Backend backend = GetParam();
  uint32_t seed = 1;
  for (NormOp op : {NormOp::kRms, NormOp::kLayer}) {
    for (const auto& [x_dtype, weight_dtype] :
         {std::pair{DType::kBFloat16, DType::kBFloat16},
          std::pair{DType::kFloat32, DType::kFloat32},
          std::pair{DType::kFloat16, DType::kFloat32}}) {
      for (const Shape s : kShapes) {
        NormCase c;
        c.op = op;
        c.x_dtype = x_dtype;
        c.weight_dtype = weight_dtype;
        c.residual_dtype = x_dtype;
        c.rows = s.runs * s.run_rows;
        c.cols = s.cols;
        c.stats = true;
        c.seed = seed++;
        const NormRun plain = run_norm_case(c, backend);
        ASSERT_TRUE(plain.status.ok()) << plain.status.to_string();
        const std::vector<uint64_t> expected = norm_bits(c, plain);
        for (const RunLayout& l : kRunLayouts) {
          const NormCase in_runs = with_runs(c, s.runs, l);
          SCOPED_TRACE(in_runs.name() + " (" + l.what + ")");
          const NormRun run = run_norm_case(in_runs, backend);
          ASSERT_TRUE(run.status.ok()) << run.status.to_string();
          ASSERT_EQ(norm_bits(in_runs, run), expected);
          ASSERT_TRUE(run.out.padding_untouched());
        }
      }
    }
  }
}

// The refused calls' view of x: [4, 3, 128] whose runs of three rows lie 392 elements apart where
// one stride would need 384 (the numbers the one-stride error names), for either case type.
template <class Case>
void lay_x_in_runs(Case* c) {
  c->rows = 12;
  c->cols = 128;
  c->rank3_d0 = 4;
  c->x_run_gap = 8;
}

// The fused adds (whose residual stream is rows of one stride) and the fp8 forms (whose outputs
// feed GEMMs) take rows of one stride: rows in runs get the one-stride error, naming the tensor,
// and nothing is written.
TEST_P(NormRowRuns, FusedAddsAndFp8FormsRefuseRowsInRuns) {
  const Backend backend = GetParam();
  const std::string one_stride =
      "x: expected leading dimensions that flatten into rows of one stride, but dim 0 has stride "
      "392 where 384 was needed";
  for (NormOp op : {NormOp::kAddRms, NormOp::kAddRmsInPlace, NormOp::kAddLayer,
                    NormOp::kAddLayerInPlace}) {
    NormCase c;
    c.op = op;
    lay_x_in_runs(&c);
    SCOPED_TRACE(c.name());
    NormRun before;
    const NormRun run = run_norm_case(c, backend, &before);
    ASSERT_FALSE(run.status.ok());
    EXPECT_NE(run.status.to_string().find(one_stride), std::string::npos)
        << run.status.to_string();
    // The outputs still hold their NaN poison (in place: the inputs as they were).
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t j = 0; j < c.cols; ++j) {
        if (is_in_place(op)) {
          ASSERT_EQ(run.x.raw(r, j), before.x.raw(r, j)) << "x written at " << r << ", " << j;
          ASSERT_EQ(run.residual.raw(r, j), before.residual.raw(r, j)) << "residual written";
        } else {
          ASSERT_TRUE(std::isnan(run.out.get(r, j))) << "out written at " << r << ", " << j;
          ASSERT_TRUE(std::isnan(run.residual_out.get(r, j))) << "residual_out written";
        }
      }
    }
  }
  for (NormFp8Op op : {NormFp8Op::kRms, NormFp8Op::kAddRms}) {
    for (Fp8Scale scale : {Fp8Scale::kDynamic, Fp8Scale::kStatic}) {
      NormFp8Case c;
      c.op = op;
      c.scale = scale;
      lay_x_in_runs(&c);
      SCOPED_TRACE(c.name());
      const NormFp8Run run = run_norm_fp8_case(c, backend);
      ASSERT_FALSE(run.status.ok());
      EXPECT_NE(run.status.to_string().find(one_stride), std::string::npos)
          << run.status.to_string();
      EXPECT_TRUE(run.out.padding_untouched());
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int64_t j = 0; j < c.cols; ++j) {
          ASSERT_EQ(run.out.raw(r, j), run.out.poison_byte()) << "out written at " << r << ", "
                                                              << j;
        }
      }
    }
  }
}

// The values themselves, against the float64 reference, on a per-head view of a fused q/k/v
// projection's output normalized in place: [T, H, D] inside rows of (H + 2 * Hkv) * D.
TEST_P(NormRowRuns, PerHeadNormInPlaceOnAFusedProjection) {
  const Backend backend = GetParam();
  constexpr int64_t kTokens = 7, kHeads = 4, kKvHeads = 2, kHeadDim = 128;
  constexpr int64_t kWidth = (kHeads + 2 * kKvHeads) * kHeadDim;
  RowBuffer qkv(backend, DType::kBFloat16, kTokens, kWidth);
  RowBuffer weight(backend, DType::kBFloat16, 1, kHeadDim);
  std::mt19937 rng(7);
  qkv.fill_random(rng);
  weight.fill_random(rng);
  qkv.upload();
  weight.upload();
  const std::vector<uint8_t> before = qkv.snapshot();
  RowBuffer expected_input(Backend::kCPU, DType::kBFloat16, kTokens, kWidth);
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t j = 0; j < kWidth; ++j) expected_input.set(t, j, qkv.get(t, j));
  }
  // k: heads kHeads .. kHeads + kKvHeads - 1 of each token.
  const TensorView k = TensorView::strided(
      static_cast<char*>(qkv.data()) + kHeads * kHeadDim * 2, DType::kBFloat16,
      device_of(backend), {kTokens, kKvHeads, kHeadDim}, {kWidth, kHeadDim, 1});
  const Status s = rms_norm(k, k, weight.view_1d(), 1e-6f, 0.0f, {}, nullptr);
  ASSERT_TRUE(s.ok()) << s.to_string();
  qkv.download();
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t j = 0; j < kWidth; ++j) {
      const int64_t head = j / kHeadDim;
      if (head < kHeads || head >= kHeads + kKvHeads) {
        ASSERT_EQ(qkv.get(t, j), expected_input.get(t, j)) << "token " << t << " col " << j;
        continue;
      }
      double sum = 0.0;
      for (int64_t e = 0; e < kHeadDim; ++e) {
        const double v = expected_input.get(t, head * kHeadDim + e);
        sum += v * v;
      }
      const double rstd = 1.0 / std::sqrt(sum / kHeadDim + 1e-6);
      const double want = expected_input.get(t, j) * rstd * weight.get(0, j % kHeadDim);
      // bf16 output: half an ulp of rounding, plus float32 statistics.
      ASSERT_NEAR(qkv.get(t, j), want, std::abs(want) * 1.0 / 128 + 1e-6)
          << "token " << t << " col " << j;
    }
  }
  ASSERT_FALSE(qkv.equals_snapshot(before));
}

// Refused calls name the argument and write nothing.
TEST_P(NormRowRuns, BadLayoutsAreRefused) {
  const Backend backend = GetParam();
  const Device device = device_of(backend);
  constexpr int64_t n = 16;
  RowBuffer x(backend, DType::kFloat32, 12, n, n, 0, 3, 5);    // 4 runs of 3
  RowBuffer out(backend, DType::kFloat32, 12, n, n, 0, 6, 5);  // 2 runs of 6
  RowBuffer weight(backend, DType::kFloat32, 1, n);
  std::mt19937 rng(3);
  x.fill_random(rng);
  weight.fill_random(rng);
  x.upload();
  weight.upload();
  out.poison();
  out.upload();
  const std::vector<uint8_t> out_before = out.snapshot();
  auto expect_refused = [&](const Status& s, const std::string& message) {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.to_string().find(message), std::string::npos) << s.to_string();
    out.download();
    EXPECT_TRUE(out.equals_snapshot(out_before));
  };
  const TensorView w = weight.view_1d();
  // Runs of different lengths, both [2, 2, 3, n]: x's of 3 rows, out's of 6.
  const TensorView x_runs_of_3 = TensorView::strided(
      x.data(), DType::kFloat32, device, {2, 2, 3, n}, {2 * (3 * n + 5), 3 * n + 5, n, 1});
  const TensorView out_runs_of_6 = TensorView::strided(out.data(), DType::kFloat32, device,
                                                       {2, 2, 3, n}, {6 * n + 5, 3 * n, n, 1});
  expect_refused(rms_norm(out_runs_of_6, x_runs_of_3, w, 1e-6f, 0.0f, {}, nullptr),
                 "rms_norm: out: expected rows in runs of 3 (as x's) or in one run but got runs "
                 "of 6");
  // Runs that overlap: 4 runs of 3 rows of stride 16, starting 40 elements apart.
  const TensorView overlapping = TensorView::strided(x.data(), DType::kFloat32, device,
                                                     {4, 3, n}, {40, n, 1});
  expect_refused(layer_norm(out_runs_of_6, overlapping, w, {}, 1e-5f, {}, nullptr),
                 "layer_norm: x: expected runs of 3 rows of stride 16 at least 48 elements "
                 "apart (each run ending before the next) but got 40");
  // Three strides: [2, 2, 3, n] with each level apart.
  const TensorView three_levels = TensorView::strided(x.data(), DType::kFloat32, device,
                                                      {2, 2, 3, n}, {200, 60, n, 1});
  expect_refused(rms_norm(out_runs_of_6, three_levels, w, 1e-6f, 0.0f, {}, nullptr),
                 "rms_norm: x: expected leading dimensions that flatten into at most two "
                 "strides (runs of rows), but dim 0 has stride 200 where 120 was needed");
  // The other op families take rows of one stride.
  RowBuffer act_in(backend, DType::kFloat32, 12, 2 * n, 2 * n, 0, 3, 8);
  act_in.fill_random(rng);
  act_in.upload();
  const TensorView act_out =
      TensorView::contiguous(out.data(), DType::kFloat32, device, {4, 3, n});
  expect_refused(silu_and_mul(act_out, act_in.view_3d(4), nullptr),
                 "silu_and_mul: x: expected leading dimensions that flatten into rows of one "
                 "stride, but dim 0 has stride 104 where 96 was needed");
}

// Rows in runs are divided as 32-bit integers on the GPU, and their skips held in 32 bits: at
// least 2^31 rows, or a skip of 2^31 elements, are refused (checked before any memory is touched,
// so no such tensor is allocated).
TEST_P(NormRowRuns, TwoToThe31RowsOrSkipsAreRefused) {
  const Backend backend = GetParam();
  const Device device = device_of(backend);
  // N = 1: 2^16 runs of 2^15 rows, each run one element further on.
  auto* x_data = reinterpret_cast<void*>(uintptr_t{1} << 40);
  auto* out_data = reinterpret_cast<void*>(uintptr_t{1} << 41);
  auto* w_data = reinterpret_cast<void*>(uintptr_t{1} << 42);
  const TensorView x = TensorView::strided(x_data, DType::kFloat32, device,
                                           {int64_t{1} << 16, int64_t{1} << 15, 1},
                                           {(int64_t{1} << 15) + 1, 1, 1});
  const TensorView out = TensorView::contiguous(out_data, DType::kFloat32, device,
                                                {int64_t{1} << 16, int64_t{1} << 15, 1});
  const TensorView w = TensorView::contiguous(w_data, DType::kFloat32, device, {1});
  const Status s = rms_norm(out, x, w, 1e-6f, 0.0f, {}, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.to_string().find("rms_norm: x: expected fewer than 2^31 rows for rows in runs but "
                               "got 2147483648"),
            std::string::npos)
      << s.to_string();
  // And runs 2^31 elements further apart than their rows: 2 runs of 2 rows of N = 1.
  const TensorView far = TensorView::strided(x_data, DType::kFloat32, device, {2, 2, 1},
                                             {(int64_t{1} << 31) + 2, 1, 1});
  const TensorView far_out = TensorView::contiguous(out_data, DType::kFloat32, device, {2, 2, 1});
  const Status s2 = rms_norm(far_out, far, w, 1e-6f, 0.0f, {}, nullptr);
  EXPECT_FALSE(s2.ok());
  EXPECT_NE(s2.to_string().find("rms_norm: x: expected runs less than 2^31 elements further apart "
                                "than their rows but got 2147483648"),
            std::string::npos)
      << s2.to_string();
}

INSTANTIATE_TEST_SUITE_P(Backends, NormRowRuns, ::testing::Values(Backend::kCPU, Backend::kGPU),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(backend_name(info.param));
                         });

}  // namespace
}  // namespace fusekit::testing
