// Gated activations against the float64 reference on every backend: each activation, forward,
// fp8-quantized (both formats) and backward, over dtypes, N in {1, 7, 769, 5125, 14336}, M in
// {0, 1, 3, 257}, the fused [..., 2N] input, two strided halves of one buffer and two separate
// buffers (fp8 also 160 rows of 14336-40003), padded rows, unaligned bases, rank-3 and 1-D
// views.
// Outputs start poisoned with NaN. On the GPU every output (fp8 codes and scales included) must
// also equal the CPU backend's bit for bit.
// Then the overflow cases: the largest finite inputs give the right values and never NaN, and
// NaN propagates.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "act_cases.h"
#include "gpu/act/act_config.h"
#include "gtest/gtest.h"

namespace fusekit::testing {
namespace {

std::vector<ActCase> cases_for(Activation act, ActMode mode) {
  std::vector<ActCase> cases;
  const DType dtypes[] = {DType::kBFloat16, DType::kFloat16, DType::kFloat32};
  const ActLayout layouts[] = {ActLayout::kFused, ActLayout::kSplitHalves,
                               ActLayout::kSplitSeparate};
  const Fp8Format formats[] = {Fp8Format::kE4M3FN, Fp8Format::kE4M3FNUZ};
  uint32_t seed = 100 + 10 * static_cast<uint32_t>(act) + static_cast<uint32_t>(mode);
  // A case of this activation and mode with the next seed (each case its own inputs).
  const auto next_case = [&] {
    ActCase c;
    c.act = act;
    c.mode = mode;
    c.seed = seed++;
    return c;
  };
  for (DType dtype : dtypes) {
    for (ActLayout layout : layouts) {
      if (mode == ActMode::kBackward && layout == ActLayout::kSplitHalves) continue;
      for (int64_t n : {1, 7, 769, 5125, 14336}) {
        for (int f = 0; f < (mode == ActMode::kQuantFp8 ? 2 : 1); ++f) {
          ActCase c = next_case();
          c.layout = layout;
          c.dtype = dtype;
          c.rows = 3;
          c.cols = n;
          c.format = formats[f];
          // Strided rows and unaligned bases on alternate cases; aligned ones keep the widest
          // vector path covered.
          const bool odd = (c.seed & 1) != 0;
          c.in_pad = odd ? 3 : 8;
          c.out_pad = odd ? 1 : 0;
          c.in_offset = odd ? 1 : 0;
          c.scale_keepdim = odd;
          cases.push_back(c);
        }
      }
    }
  }
  // Batch sizes: empty, one row, many rows (and a rank-3 view of them).
  for (int64_t m : {0, 1, 257}) {
    for (int64_t n : {769, 14336}) {
      if (m == 257 && n == 14336 && act != Activation::kSilu) continue;  // CPU time
      ActCase c = next_case();
      c.rows = m;
      c.cols = n;
      c.rank3_d0 = m == 257 ? 257 : 0;
      c.format = m == 1 ? Fp8Format::kE4M3FNUZ : Fp8Format::kE4M3FN;
      cases.push_back(c);
    }
  }
  // 1-D inputs (rank 1: one row), each layout, unaligned, the scale as out's shape with last
  // dimension 1 (which for 1-D is [1]).
  for (ActLayout layout : {ActLayout::kFused, ActLayout::kSplitHalves, ActLayout::kSplitSeparate}) {
    if (mode == ActMode::kBackward && layout == ActLayout::kSplitHalves) continue;
    ActCase c = next_case();
    c.layout = layout;
    c.rows = 1;
    c.rank1 = true;
    c.cols = 769;
    c.in_offset = 1;
    c.scale_keepdim = true;
    cases.push_back(c);
  }
  {
    ActCase c = next_case();  // many short rows: a warp's threads span several rows
    c.rows = 40000;
    c.cols = 67;
    c.in_pad = 5;
    cases.push_back(c);
  }
  if (mode == ActMode::kQuantFp8) {
    ActCase c = next_case();  // a scale upper bound that binds: values beyond it saturate
    c.layout = ActLayout::kSplitHalves;
    c.scale_upper_bound = 1e-3f;
    cases.push_back(c);
    // More rows than an H100 has SMs, with long rows: 2500 bf16 groups (a cluster of three
    // blocks where the GPU has clusters, else the wide build's 640 threads), 14336 float32 (the
    // compact block's 448 threads) and 5001 groups (past 1024 threads x 4: a cluster of six, else
    // two passes).
    const std::pair<DType, int64_t> long_rows[] = {
        {DType::kBFloat16, 20000}, {DType::kFloat32, 14336}, {DType::kBFloat16, 40003}};
    for (const auto& [dtype, n] : long_rows) {
      ActCase l = next_case();
      l.dtype = dtype;
      l.rows = 160;
      l.cols = n;
      l.in_pad = n % 2 == 1 ? 3 : 0;
      l.in_offset = n % 2 == 1 ? 1 : 0;
      cases.push_back(l);
    }
  }
  return cases;
}

class ActValues : public ::testing::TestWithParam<ActParam> {};

TEST_P(ActValues, MatchesFloat64Reference) {
  const auto [backend, act, mode] = GetParam();
  FUSEKIT_SKIP_UNLESS_AVAILABLE(backend);
  for (const ActCase& c : cases_for(act, mode)) {
    const ActRun run = run_act_case(c, backend);
    ASSERT_TRUE(check_act_run(c, run));
    if (backend == Backend::kGPU && gpu_writes_cpu_bits(c)) {
      const ActRun cpu = run_act_case(c, Backend::kCPU);
      ASSERT_TRUE(same_act_outputs(c, run, cpu)) << "GPU and CPU differ";
    }
  }
}

// Rows of special gate values (up = 1, -0.5 or the largest value) on each dtype: the largest
// finite values, values where exp / x^3 / erfc switch regimes or overflow float32, NaN. The
// backward pass also with up and grad_out both the largest value, whose product overflows
// float32 where the gate's derivative is 0.
TEST_P(ActValues, LargestFiniteInputsAndNaN) {
  const auto [backend, act, mode] = GetParam();
  FUSEKIT_SKIP_UNLESS_AVAILABLE(backend);
  for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    const double largest = dtype == DType::kFloat16 ? 65504.0
                           : dtype == DType::kBFloat16
                               ? 3.3895313892515355e38
                               : static_cast<double>(std::numeric_limits<float>::max());
    const std::vector<double> gates = {largest, -largest, largest / 2, -largest / 3, 1e13, -1e13,
                                       88.7,    -88.7,    104.0,       -104.0,       10.6, -10.6,
                                       7.0,     -7.0,     0.0,         -0.0,         1e-30, -1e-30,
                                       // act(g) far below float32's normals, above its
                                       // subnormals' resolution: no absolute slack hides it.
                                       -95.0};
    for (int variant = 0; variant < 4; ++variant) {
      if (variant == 3 && mode != ActMode::kBackward) continue;
      ActCase c;
      c.act = act;
      c.mode = mode;
      c.layout = ActLayout::kSplitSeparate;
      c.dtype = dtype;
      c.rows = 2;
      c.cols = static_cast<int64_t>(gates.size());
      c.format = variant == 1 ? Fp8Format::kE4M3FNUZ : Fp8Format::kE4M3FN;
      const double up = variant == 0 ? 1.0 : (variant == 1 ? -0.5 : largest);
      const double dy = variant == 3 ? largest : 1.0;
      // Where the NaN goes: an odd and an even place of the first group, and the group that
      // ends the row (partial).
      const int64_t nan_col = variant == 0 ? 3 : (variant == 1 ? 0 : (variant == 2 ? 16 : 5));
      const ActFill fill = [&](ActRun& run, std::mt19937&) {
        for (int64_t r = 0; r < 2; ++r) {
          for (int64_t j = 0; j < c.cols; ++j) {
            const double g = gates[static_cast<size_t>(j)];  // finite in the dtype
            run.in.set(r, j, std::copysign(std::min(std::fabs(g), largest), g));
            run.up.set(r, j, up);
            if (run.grad_out.cols() > 0) run.grad_out.set(r, j, r == 0 ? dy : -0.25 * dy);
          }
        }
        run.in.set(1, nan_col, NAN);  // row 1 carries a NaN
      };
      const ActRun run = run_act_case(c, backend, fill);
      ASSERT_TRUE(check_act_run(c, run));
      // Row 0 has no NaN input: no NaN anywhere in its outputs.
      for (int64_t j = 0; j < c.cols; ++j) {
        ASSERT_FALSE(std::isnan(run.out.get(0, j))) << c.name() << " j=" << j;
        if (mode == ActMode::kBackward) ASSERT_FALSE(std::isnan(run.grad_up_value(0, j)));
      }
      // NaN in gives NaN out (the whole row for fp8, through its scale).
      ASSERT_TRUE(std::isnan(run.out.get(1, nan_col))) << c.name();
      if (mode == ActMode::kQuantFp8) ASSERT_TRUE(std::isnan(run.scale.get(0, 1))) << c.name();
      if (backend == Backend::kGPU && gpu_writes_cpu_bits(c)) {
        ASSERT_TRUE(same_act_outputs(c, run, run_act_case(c, Backend::kCPU, fill)));
      }
    }
  }
}

// Every finite bfloat16 value as the gate (float32 inputs, so each is exact), random up: the GPU
// writes the CPU's bits, forward, fp8 and backward. This walks the activations' every regime
// (the exp reduction's range, the sigmoid's two signs, erfc's two forms, the reciprocal of
// core/host_device.h over the divisors they reach) with far more values than the random cases.
TEST_P(ActValues, EveryBf16GateGivesTheCpuBits) {
  const auto [backend, act, mode] = GetParam();
  if (backend != Backend::kGPU) GTEST_SKIP() << "compares the GPU with the CPU";
  FUSEKIT_SKIP_UNLESS_AVAILABLE(backend);
  ActCase c;
  c.act = act;
  c.mode = mode;
  c.layout = ActLayout::kSplitSeparate;
  c.dtype = DType::kFloat32;
  c.rows = 256;  // 256 x 256 = every 16-bit pattern
  c.cols = 256;
  const ActFill fill = [&](ActRun& run, std::mt19937& rng) {
    std::uniform_real_distribution<double> u(0.5, 2.0);
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t j = 0; j < c.cols; ++j) {
        const uint32_t bits = static_cast<uint32_t>(r * c.cols + j) << 16;
        float g;
        std::memcpy(&g, &bits, sizeof(g));
        if (!std::isfinite(g)) g = 1.0f;  // inf and NaN have their own tests
        run.in.set(r, j, g);
        run.up.set(r, j, (j % 2 ? -1.0 : 1.0) * u(rng));
        if (run.grad_out.cols() > 0) run.grad_out.set(r, j, u(rng));
      }
    }
  };
  const ActRun gpu = run_act_case(c, Backend::kGPU, fill);
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.message();
  ASSERT_TRUE(same_act_outputs(c, gpu, run_act_case(c, Backend::kCPU, fill)));
}

// An all-zero row quantizes to zeros with the floor scale 1 / (fp8_max * 512).
TEST_P(ActValues, AllZeroRowGetsTheFloorScale) {
  const auto [backend, act, mode] = GetParam();
  if (mode != ActMode::kQuantFp8) GTEST_SKIP() << "quantized mode only";
  FUSEKIT_SKIP_UNLESS_AVAILABLE(backend);
  for (Fp8Format format : {Fp8Format::kE4M3FN, Fp8Format::kE4M3FNUZ}) {
    ActCase c;
    c.act = act;
    c.mode = mode;
    c.layout = ActLayout::kSplitSeparate;
    c.format = format;
    c.cols = 100;
    const ActRun run = run_act_case(c, backend, [&](ActRun& r, std::mt19937& rng) {
      r.in.fill_random(rng);
      r.up.fill_rows(std::vector<double>(100, 0.0));
    });
    ASSERT_TRUE(check_act_run(c, run));
    const float floor = 1.0f / (fp8_format_max(format) * 512.0f);
    for (int64_t row = 0; row < c.rows; ++row) {
      EXPECT_EQ(run.scale.get(0, row), floor);
      for (int64_t j = 0; j < c.cols; ++j) ASSERT_EQ(run.out.get(row, j), 0.0);
    }
  }
}

// 64-bit indexing and the row loop of the elementwise kernels: an input of more than 2^31
// elements, with more rows than one pass of threads takes (gpu/act/act_config.h), so the last
// rows are a second pass of the same threads. GPU only: 4 GiB of bf16 input.
TEST(ActHugeTensor, MoreThan2To31ElementsAndMoreRowsThanThreads) {
  FUSEKIT_SKIP_UNLESS_AVAILABLE(Backend::kGPU);
  const int64_t n = 8;  // one 16-byte group per row: one thread per row
  const int64_t m = gpu::kActMaxActiveThreads + 3;
  ASSERT_GT(m * 2 * n, int64_t{1} << 31);
  RowBuffer x(Backend::kGPU, DType::kBFloat16, m, 2 * n);
  RowBuffer out(Backend::kGPU, DType::kBFloat16, m, n);
  std::vector<double> pattern(2 * n);
  for (int64_t j = 0; j < 2 * n; ++j) pattern[j] = 0.25 * static_cast<double>(j % 5) - 0.5;
  x.fill_rows(pattern);
  const int64_t checked[] = {0, 1, m / 2, m - 4, m - 3, m - 2, m - 1};
  std::mt19937 rng(11);
  std::normal_distribution<double> d(0.0, 2.0);
  for (int64_t r : checked) {
    for (int64_t j = 0; j < 2 * n; ++j) x.set(r, j, d(rng));
  }
  x.upload();
  out.poison();
  out.upload();
  ASSERT_TRUE(silu_and_mul(out.view(), x.view()).ok());
  ASSERT_TRUE(gpu_synchronize(0).ok());
  out.download();
  const Tolerance tol = output_tolerance(DType::kBFloat16);
  for (int64_t r : checked) {
    for (int64_t j = 0; j < n; ++j) {
      const double ref = act_reference(Activation::kSilu, x.get(r, j)) * x.get(r, n + j);
      ASSERT_LE(std::fabs(out.get(r, j) - ref), tol.rel * std::fabs(ref) + tol.abs)
          << "row " << r << " col " << j;
    }
  }
}

// Every build of the quantizing kernel against the CPU backend's bits, whatever the heuristic
// picks on this GPU: one block per row (the compact build up to kActQuantCompactThreads threads,
// the wide one past it, two passes past 1024 threads, and two passes forced at shorter rows), the
// block looping over the rows, and a row split over a cluster at 1, 2 and 4 groups per thread
// (where the GPU has clusters and the split takes 2-8 blocks). Which rows take which build differs
// between GPUs (on an H100 rows past N = 14336 take the cluster, elsewhere the wide build), so
// each is run here by its configuration, and the test fails if one is no longer reached.
TEST(ActQuantLaunchShapes, EveryKernelBuildWritesTheCpuBits) {
  FUSEKIT_SKIP_UNLESS_AVAILABLE(Backend::kGPU);
  using gpu::ActQuantConfig;
  using gpu::ActShape;
  struct Variant {
    std::string name;
    std::function<bool(const ActShape&, ActQuantConfig*)> make;
  };
  std::vector<Variant> variants = {
      {"one block per row",
       [](const ActShape& s, ActQuantConfig* c) {
         *c = gpu::make_act_quant_block_config(s);
         return true;
       }},
      {"two blocks looping over the rows",
       [](const ActShape& s, ActQuantConfig* c) {
         *c = gpu::make_act_quant_block_config(s);
         c->grid = std::min<int64_t>(c->grid, 2);
         return true;
       }},
      // Later rows' inputs asked of L2 (ActQuantConfig::prefetch_rows): a hint, so the same bits;
      // here the next row of a block per row, and the next row each of two looping blocks takes,
      // misaligned rows' ranges narrowed to their 16-byte boundaries.
      {"one block per row, the next row fetched into L2",
       [](const ActShape& s, ActQuantConfig* c) {
         *c = gpu::make_act_quant_block_config(s);
         c->prefetch_rows = 1;
         return c->items > 0;
       }},
      {"two blocks looping over the rows, each one's next row fetched into L2",
       [](const ActShape& s, ActQuantConfig* c) {
         *c = gpu::make_act_quant_block_config(s);
         c->grid = std::min<int64_t>(c->grid, 2);
         c->prefetch_rows = c->grid;
         return c->items > 0;
       }},
      {"two passes",
       [](const ActShape& s, ActQuantConfig* c) {
         *c = ActQuantConfig{};
         c->items = 0;
         c->block_threads = gpu::kActMaxBlockThreads;
         c->grid = std::max<int64_t>(s.rows, 1);
         return true;
       }},
  };
  for (int items : {1, 2, gpu::kActQuantClusterMaxItems}) {
    variants.push_back({"cluster, " + std::to_string(items) + " groups a thread",
                        [items](const ActShape& s, ActQuantConfig* c) {
                          return gpu::make_act_quant_cluster_config(s, items, c);
                        }});
  }
  // Blocks of a given width rather than the fewest warps that cover the row: the widest, and
  // three warps.
  for (const auto [items, threads] : {std::pair{gpu::kActQuantClusterMaxItems,
                                                gpu::kActQuantClusterMaxThreads},
                                      std::pair{1, 96}}) {
    variants.push_back({"cluster, " + std::to_string(items) + " groups a thread, " +
                            std::to_string(threads) + "-thread blocks",
                        [items = items, threads = threads](const ActShape& s, ActQuantConfig* c) {
                          return gpu::make_act_quant_cluster_config(s, items, c, threads);
                        }});
  }
  struct RowKind {
    DType dtype;
    int64_t cols;
    ActLayout layout;
    bool misaligned;  // the input one element past a 16-byte boundary (odd rows always are)
  };
  // 20000 bf16 and 16000 float32: past the compact block; 40003: past 1024 threads x 32 elements.
  // The one-block kernel takes the row in warp tiles of 4 x 32 16-byte groups: 8192 bf16 and fp16
  // is whole tiles only, aligned and not; 5000 and 20000 end in a part of a tile; odd rows in a
  // partial group.
  const RowKind kinds[] = {
      {DType::kBFloat16, 769, ActLayout::kFused, true},
      {DType::kBFloat16, 5000, ActLayout::kFused, false},
      {DType::kFloat16, 8192, ActLayout::kSplitHalves, false},
      {DType::kBFloat16, 8192, ActLayout::kFused, true},
      {DType::kBFloat16, 20000, ActLayout::kFused, false},
      {DType::kFloat32, 5125, ActLayout::kSplitSeparate, true},
      {DType::kFloat32, 16000, ActLayout::kFused, false},
      {DType::kBFloat16, 40003, ActLayout::kSplitHalves, true},
  };
  const Activation acts[] = {Activation::kSilu, Activation::kGeluTanh, Activation::kGelu};
  int compact_runs = 0, wide_runs = 0, two_pass_runs = 0, cluster_runs = 0;
  bool clusters = false;
  uint32_t seed = 900;
  for (const RowKind& kind : kinds) {
    for (const Variant& v : variants) {
      ActCase c;
      c.act = acts[seed % 3];
      c.mode = ActMode::kQuantFp8;
      c.layout = kind.layout;
      c.dtype = kind.dtype;
      c.rows = 5;
      c.cols = kind.cols;
      c.format = seed % 2 == 0 ? Fp8Format::kE4M3FN : Fp8Format::kE4M3FNUZ;
      c.in_pad = kind.misaligned ? 3 : 0;
      c.in_offset = kind.misaligned ? 1 : 0;
      c.out_pad = 1;
      c.seed = seed++;
      SCOPED_TRACE(c.name() + ", " + v.name);
      ActQuantConfig used;
      bool made = false;
      const ActRun run = run_act_quant_case_with(c, [&](const ActShape& s, ActQuantConfig* out) {
        clusters = clusters || s.max_cluster_blocks > 1;
        made = v.make(s, out);
        used = *out;
        return made;
      });
      if (!made) continue;
      SCOPED_TRACE(used.to_string());
      ASSERT_TRUE(run.status.ok()) << run.status.to_string();
      if (used.cluster_blocks > 1) {
        ++cluster_runs;
      } else if (used.items == 0) {
        ++two_pass_runs;
      } else if (used.block_threads <= gpu::kActQuantCompactThreads) {
        ++compact_runs;
      } else {
        ++wide_runs;
      }
      ASSERT_TRUE(check_act_run(c, run));
      const ActRun cpu = run_act_case(c, Backend::kCPU);
      ASSERT_TRUE(same_act_outputs(c, run, cpu)) << "GPU and CPU differ";
    }
  }
  EXPECT_GT(compact_runs, 0);
  EXPECT_GT(wide_runs, 0);
  EXPECT_GT(two_pass_runs, 0);
  if (clusters) EXPECT_GT(cluster_runs, 0);
}

INSTANTIATE_TEST_SUITE_P(All, ActValues, every_act_param(), act_param_name);

}  // namespace
}  // namespace fusekit::testing
