// Bad calls to the normalization ops: each gets a Status naming the argument with the expected and
// the actual value, and nothing is written (every output buffer is compared byte for byte with
// its poisoned state after the call). Run on every backend present.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "bad_input.h"
#include "test_support.h"

namespace fusekit::testing {
namespace {

constexpr int64_t kM = 4;
constexpr int64_t kN = 64;

// Valid operands for a call, plus a spare buffer for aliasing cases.
struct Operands {
  explicit Operands(Backend b)
      : x(b, DType::kBFloat16, kM, kN),
        residual(b, DType::kBFloat16, kM, kN),
        out(b, DType::kBFloat16, kM, kN),
        residual_out(b, DType::kBFloat16, kM, kN),
        weight(b, DType::kBFloat16, 1, kN),
        bias(b, DType::kBFloat16, 1, kN),
        weight_f32(b, DType::kFloat32, 1, kN),
        residual_f32(b, DType::kFloat32, kM, kN),
        rstd(b, DType::kFloat32, 1, kM),
        mean(b, DType::kFloat32, 1, kM),
        spare(b, DType::kBFloat16, 2 * kM, kN) {
    std::mt19937 rng(3);
    for (RowBuffer* in : {&x, &residual, &weight, &bias, &weight_f32, &residual_f32}) {
      in->fill_random(rng);
      in->upload();
    }
  }
  std::vector<RowBuffer*> all() {
    return {&x, &residual, &out, &residual_out, &weight, &bias, &weight_f32, &residual_f32,
            &rstd, &mean, &spare};
  }
  RowBuffer x, residual, out, residual_out, weight, bias, weight_f32, residual_f32, rstd, mean,
      spare;
};

using BadCase = testing::BadCase<Operands>;

const auto kInvalid = StatusCode::kInvalidArgument;
const auto kUnsupported = StatusCode::kUnsupported;
const float kEps = 1e-6f;

std::vector<BadCase> bad_cases(Backend backend) {
  using O = Operands;
  const TensorView none;
  const Device other = other_device(backend);
  std::vector<BadCase> cases = {
      {"out shape", [](O& o) { return rms_norm(with_shape(o.out.view(), {kM, kN - 1}, {kN, 1}), o.x.view(), o.weight.view_1d(), kEps); },
       kInvalid, {"rms_norm: out:", "expected shape [4, 64] (x's shape) but got [4, 63]"}},
      {"residual shape", [](O& o) { return fused_add_rms_norm_inplace(o.x.view(), with_shape(o.residual.view(), {kM - 1, kN}, {kN, 1}), o.weight.view_1d(), kEps); },
       kInvalid, {"residual:", "expected shape [4, 64]", "got [3, 64]"}},
      {"residual_out shape", [](O& o) { return fused_add_rms_norm(o.out.view(), with_shape(o.residual_out.view(), {kM, kN, 1}, {kN, 1, 1}), o.x.view(), o.residual.view(), o.weight.view_1d(), kEps); },
       kInvalid, {"residual_out:", "expected shape [4, 64]", "got [4, 64, 1]"}},
      {"x int32", [](O& o) { return rms_norm(o.out.view(), with_dtype(o.x.view(), DType::kInt32), o.weight.view_1d(), kEps); },
       kUnsupported, {"x:", "expected dtype float32 or float16 or bfloat16 but got int32"}},
      {"x float64", [](O& o) { return layer_norm(o.out.view(), with_dtype(o.x.view(), DType::kFloat64), o.weight.view_1d(), o.bias.view_1d(), kEps); },
       kUnsupported, {"layer_norm: x:", "got float64"}},
      {"out dtype", [](O& o) { return rms_norm(with_dtype(o.out.view(), DType::kFloat16), o.x.view(), o.weight.view_1d(), kEps); },
       kUnsupported, {"out:", "expected dtype bfloat16 but got float16"}},
      {"weight dtype", [](O& o) { return rms_norm(o.out.view(), o.x.view(), with_dtype(o.weight.view_1d(), DType::kFloat16), kEps); },
       kUnsupported, {"weight:", "expected dtype bfloat16 or float32 but got float16"}},
      {"residual dtype", [](O& o) { return fused_add_rms_norm_inplace(o.x.view(), with_dtype(o.residual.view(), DType::kFloat16), o.weight.view_1d(), kEps); },
       kUnsupported, {"residual:", "got float16"}},
      {"residual_out dtype", [](O& o) { return fused_add_rms_norm(o.out.view(), o.residual_out.view(), o.x.view(), o.residual_f32.view(), o.weight.view_1d(), kEps); },
       kUnsupported, {"residual_out:", "expected dtype float32 but got bfloat16"}},
      {"bias dtype differs from weight", [](O& o) { return layer_norm(o.out.view(), o.x.view(), o.weight_f32.view_1d(), o.bias.view_1d(), kEps); },
       kUnsupported, {"bias:", "expected weight's dtype float32 but got bfloat16"}},
      {"weight length", [](O& o) { return rms_norm(o.out.view(), o.x.view(), with_shape(o.weight.view_1d(), {kN - 1}, {1}), kEps); },
       kInvalid, {"weight:", "expected shape [64] but got [63]"}},
      {"weight 2-D", [](O& o) { return rms_norm(o.out.view(), o.x.view(), with_shape(o.weight.view_1d(), {2, kN / 2}, {kN / 2, 1}), kEps); },
       kInvalid, {"weight:", "expected shape [64] but got [2, 32]"}},
      {"weight strided", [](O& o) { return rms_norm(o.out.view(), o.x.view(), with_shape(o.spare.view(), {kN}, {2}), kEps); },
       kInvalid, {"weight:", "expected a contiguous tensor (stride 1) but got stride 2"}},
      {"bias length", [](O& o) { return layer_norm(o.out.view(), o.x.view(), o.weight.view_1d(), with_shape(o.bias.view_1d(), {kN + 1}, {1}), kEps); },
       kInvalid, {"bias:", "expected shape [64] but got [65]"}},
      {"x last dim not contiguous", [](O& o) { return rms_norm(o.out.view(), with_shape(o.spare.view(), {kM, kN}, {2 * kN, 2}), o.weight.view_1d(), kEps); },
       kInvalid, {"x:", "expected a contiguous last dimension (stride 1) but got stride 2"}},
      {"out last dim not contiguous", [](O& o) { return rms_norm(with_shape(o.spare.view(), {kM, kN}, {2 * kN, 2}), o.x.view(), o.weight.view_1d(), kEps); },
       kInvalid, {"out:", "contiguous last dimension"}},
      {"x overlapping rows", [](O& o) { return rms_norm(o.out.view(), with_shape(o.x.view(), {kM, kN}, {kN / 2, 1}), o.weight.view_1d(), kEps); },
       kInvalid, {"x:", "expected a row stride >= N = 64", "got 32"}},
      {"x leading dims in three strides", [](O& o) { return rms_norm(with_shape(o.spare.view(), {2, 2, 2, kN}, {4 * kN, 2 * kN, kN, 1}), with_shape(o.spare.view(), {2, 2, 2, kN}, {7 * kN, 3 * kN, kN, 1}), o.weight.view_1d(), kEps); },
       kInvalid, {"x:", "flatten into at most two strides (runs of rows)", "dim 0 has stride 448 where 384 was needed"}},
      {"x in overlapping runs", [](O& o) { return rms_norm(with_shape(o.spare.view(), {2, 2, kN}, {2 * kN, kN, 1}), with_shape(o.x.view(), {2, 2, kN}, {kN + 1, kN, 1}), o.weight.view_1d(), kEps); },
       kInvalid, {"x:", "expected runs of 2 rows of stride 64 at least 128 elements apart", "got 65"}},
      {"x rank 0", [](O& o) { return rms_norm(o.out.view(), with_shape(o.x.view(), {}, {}), o.weight.view_1d(), kEps); },
       kInvalid, {"x:", "expected rank 1 to 8 but got rank 0"}},
      {"x rank 9", [](O& o) { return rms_norm(o.out.view(), with_shape(o.x.view(), {1, 1, 1, 1, 1, 1, 1, kM, kN}, {0, 0, 0, 0, 0, 0, 0, kN, 1}), o.weight.view_1d(), kEps); },
       kInvalid, {"x:", "got rank 9"}},
      {"negative size", [](O& o) { return rms_norm(o.out.view(), with_shape(o.x.view(), {-1, kN}, {kN, 1}), o.weight.view_1d(), kEps); },
       kInvalid, {"x:", "non-negative sizes", "[-1, 64]"}},
      {"null x", [](O& o) { return rms_norm(o.out.view(), with_data(o.x.view(), nullptr), o.weight.view_1d(), kEps); },
       kInvalid, {"x:", "expected a non-null data pointer for shape [4, 64] but got nullptr"}},
      {"null out", [](O& o) { return rms_norm(with_data(o.out.view(), nullptr), o.x.view(), o.weight.view_1d(), kEps); },
       kInvalid, {"out:", "non-null"}},
      {"null weight", [](O& o) { return rms_norm(o.out.view(), o.x.view(), with_data(o.weight.view_1d(), nullptr), kEps); },
       kInvalid, {"weight:", "non-null"}},
      {"null residual", [](O& o) { return fused_add_rms_norm_inplace(o.x.view(), with_data(o.residual.view(), nullptr), o.weight.view_1d(), kEps); },
       kInvalid, {"residual:", "non-null"}},
      {"rms weight missing", [none](O& o) { return rms_norm(o.out.view(), o.x.view(), none, kEps); },
       kInvalid, {"weight:", "expected a tensor of shape [64] but got none"}},
      {"x missing", [none](O& o) { return rms_norm(o.out.view(), none, o.weight.view_1d(), kEps); },
       kInvalid, {"x:", "expected a tensor but got none"}},
      {"out overlaps x", [](O& o) { return rms_norm(with_shape(with_data(o.spare.view(), offset_bytes(o.spare.data(), 2)), {kM, kN}, {kN, 1}), with_shape(o.spare.view(), {kM, kN}, {kN, 1}), o.weight.view_1d(), kEps); },
       kInvalid, {"out:", "expected memory disjoint from x or identical to it (in place) but the two overlap"}},
      {"out is residual", [](O& o) { return fused_add_rms_norm(o.residual.view(), o.residual_out.view(), o.x.view(), o.residual.view(), o.weight.view_1d(), kEps); },
       kInvalid, {"out:", "disjoint from residual"}},
      {"residual_out is x", [](O& o) { return fused_add_rms_norm(o.out.view(), o.x.view(), o.x.view(), o.residual.view(), o.weight.view_1d(), kEps); },
       kInvalid, {"residual_out:", "disjoint from x"}},
      {"out is residual_out", [](O& o) { return fused_add_rms_norm(o.out.view(), o.out.view(), o.x.view(), o.residual.view(), o.weight.view_1d(), kEps); },
       kInvalid, {"overlap"}},
      {"out overlaps weight", [](O& o) { return rms_norm(o.out.view(), o.x.view(), with_shape(o.out.view(), {kN}, {1}), kEps); },
       kInvalid, {"out:", "disjoint from weight"}},
      {"rstd overlaps out", [](O& o) {
         NormOptions opt;
         opt.rstd = TensorView::contiguous(o.out.data(), DType::kFloat32, o.out.view().device, {kM});
         return rms_norm(o.out.view(), o.x.view(), o.weight.view_1d(), kEps, 0.0f, opt); },
       kInvalid, {"rstd:", "disjoint from out"}},
      {"eps zero", [](O& o) { return rms_norm(o.out.view(), o.x.view(), o.weight.view_1d(), 0.0f); },
       kInvalid, {"eps:", "expected a finite value > 0 but got 0"}},
      {"eps negative", [](O& o) { return layer_norm(o.out.view(), o.x.view(), o.weight.view_1d(), o.bias.view_1d(), -1e-5f); },
       kInvalid, {"eps:", "got -1e-05"}},
      {"eps NaN", [](O& o) { return rms_norm(o.out.view(), o.x.view(), o.weight.view_1d(), std::nanf("")); },
       kInvalid, {"eps:", "got nan"}},
      {"eps infinite", [](O& o) { return rms_norm(o.out.view(), o.x.view(), o.weight.view_1d(), std::numeric_limits<float>::infinity()); },
       kInvalid, {"eps:", "got inf"}},
      {"weight_offset NaN", [](O& o) { return rms_norm(o.out.view(), o.x.view(), o.weight.view_1d(), kEps, std::nanf("")); },
       kInvalid, {"weight_offset:", "expected a finite value"}},
      {"weight on another device", [other](O& o) { return rms_norm(o.out.view(), o.x.view(), with_device(o.weight.view_1d(), other), kEps); },
       kInvalid, {"weight:", "expected device " + device_of(backend).to_string() + " (x's device) but got " + other.to_string()}},
      {"residual on another device", [other](O& o) { return fused_add_rms_norm_inplace(o.x.view(), with_device(o.residual.view(), other), o.weight.view_1d(), kEps); },
       kInvalid, {"residual:", "expected device"}},
      {"out on another device", [other](O& o) { return layer_norm(with_device(o.out.view(), other), o.x.view(), o.weight.view_1d(), o.bias.view_1d(), kEps); },
       kInvalid, {"out:", "expected device"}},
      {"mean for rms_norm", [](O& o) {
         NormOptions opt;
         opt.mean = o.mean.view_1d();
         return rms_norm(o.out.view(), o.x.view(), o.weight.view_1d(), kEps, 0.0f, opt); },
       kInvalid, {"mean:", "RMSNorm has no mean"}},
      {"rstd wrong length", [](O& o) {
         NormOptions opt;
         opt.rstd = with_shape(o.rstd.view_1d(), {kM - 1}, {1});
         return rms_norm(o.out.view(), o.x.view(), o.weight.view_1d(), kEps, 0.0f, opt); },
       kInvalid, {"rstd:", "expected shape [4] but got [3]"}},
      {"rstd dtype", [](O& o) {
         NormOptions opt;
         opt.rstd = with_dtype(with_shape(o.spare.view(), {kM}, {1}), DType::kBFloat16);
         return rms_norm(o.out.view(), o.x.view(), o.weight.view_1d(), kEps, 0.0f, opt); },
       kUnsupported, {"rstd:", "expected dtype float32 but got bfloat16"}},
      {"mean dtype", [](O& o) {
         NormOptions opt;
         opt.mean = with_dtype(o.mean.view_1d(), DType::kFloat16);
         return layer_norm(o.out.view(), o.x.view(), o.weight.view_1d(), o.bias.view_1d(), kEps, opt); },
       kUnsupported, {"mean:", "got float16"}},
      {"in-place layer norm residual shape", [](O& o) { return fused_add_layer_norm_inplace(o.x.view(), with_shape(o.residual.view(), {kM, kN / 2}, {kN, 1}), o.weight.view_1d(), o.bias.view_1d(), kEps); },
       kInvalid, {"fused_add_layer_norm_inplace: residual:", "got [4, 32]"}},
  };
  return cases;
}

class NormBadInput : public BackendTest {};

TEST_P(NormBadInput, ClearErrorAndNothingWritten) {
  expect_all_refused(GetParam(), bad_cases(GetParam()));
}

TEST_P(NormBadInput, CheckThrowsTheMessage) {
  Operands o(GetParam());
  try {
    check(rms_norm(o.out.view(), o.x.view(), o.weight.view_1d(), -1.0f));
    FAIL() << "expected fusekit::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("invalid argument: rms_norm: eps:"), std::string::npos)
        << e.what();
  }
}

TEST_P(NormBadInput, EmptyBatchIsANoOp) {
  Operands o(GetParam());
  const auto before = o.out.snapshot();
  // M = 0 with null pointers is valid and writes nothing.
  const Device d = device_of(GetParam());
  const TensorView empty = TensorView::contiguous(nullptr, DType::kBFloat16, d, {0, kN});
  EXPECT_TRUE(rms_norm(empty, empty, o.weight.view_1d(), kEps).ok());
  EXPECT_TRUE(fused_add_layer_norm_inplace(empty, empty, o.weight.view_1d(), o.bias.view_1d(),
                                           kEps)
                  .ok());
  // An empty slice whose last dimension is strided (x[:0, ::2]) has no elements to be laid out.
  const TensorView every_other =
      TensorView::strided(o.x.data(), DType::kBFloat16, d, {0, kN / 2}, {kN, 2});
  const TensorView half_weight =
      TensorView::contiguous(o.weight.data(), DType::kBFloat16, d, {kN / 2});
  EXPECT_TRUE(rms_norm(every_other, every_other, half_weight, kEps).ok());
  if (GetParam() == Backend::kGPU) ASSERT_TRUE(gpu_synchronize(0).ok());
  o.out.download();
  EXPECT_TRUE(o.out.equals_snapshot(before));
}

INSTANTIATE_TEST_SUITE_P(Backends, NormBadInput,
                         ::testing::Values(Backend::kCPU, Backend::kGPU),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(backend_name(info.param));
                         });

TEST(NormWithoutGpuBackend, GpuTensorsAreRefused) {
  if (std::string(gpu_backend_name()) != "none") GTEST_SKIP() << "built with a GPU backend";
  std::vector<uint16_t> x_host(kM * kN, 0x3f80), out_host(kM * kN), w_host(kN, 0x3f80);
  const Device gpu = Device::gpu(0);
  const TensorView x = TensorView::contiguous(x_host.data(), DType::kBFloat16, gpu, {kM, kN});
  const TensorView out = TensorView::contiguous(out_host.data(), DType::kBFloat16, gpu, {kM, kN});
  const TensorView w = TensorView::contiguous(w_host.data(), DType::kBFloat16, gpu, {kN});
  const Status s = rms_norm(out, x, w, kEps);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("built without a GPU backend"), std::string::npos) << s.message();
}

// A build whose CUDA code is unoptimized, only to check that it compiles (CMake's
// FUSEKIT_CUDA_COMPILE_CHECK, what ./run.sh builds without a GPU), reports no usable GPU and
// refuses GPU tensors before touching them, even where a GPU is present.
TEST(CudaCompileCheckBuild, ReportsNoGpuAndRefusesGpuTensors) {
#if !FUSEKIT_CUDA_COMPILE_CHECK
  GTEST_SKIP() << "not a compile-check build (FUSEKIT_CUDA_COMPILE_CHECK=OFF)";
#else
  std::string why;
  EXPECT_EQ(gpu_count(&why), 0);
  EXPECT_NE(why.find("FUSEKIT_CUDA_COMPILE_CHECK"), std::string::npos) << why;
  std::vector<uint16_t> x_host(kM * kN, 0x3f80), w_host(kN, 0x3f80);
  std::vector<uint16_t> out_host(kM * kN, 0x7fc1), before = out_host;
  const Device gpu = Device::gpu(0);
  const TensorView x = TensorView::contiguous(x_host.data(), DType::kBFloat16, gpu, {kM, kN});
  const TensorView out = TensorView::contiguous(out_host.data(), DType::kBFloat16, gpu, {kM, kN});
  const TensorView w = TensorView::contiguous(w_host.data(), DType::kBFloat16, gpu, {kN});
  const TensorView half_out =
      TensorView::contiguous(out_host.data(), DType::kBFloat16, gpu, {kM, kN / 2});
  for (const Status& s : {rms_norm(out, x, w, kEps), silu_and_mul(half_out, x)}) {
    EXPECT_EQ(s.code(), StatusCode::kRuntimeError);
    EXPECT_NE(s.message().find("no kernel image"), std::string::npos) << s.message();
  }
  EXPECT_EQ(out_host, before);
#endif
}

}  // namespace
}  // namespace fusekit::testing
