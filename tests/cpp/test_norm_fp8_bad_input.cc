// Bad calls to RMSNorm with an fp8 output (rms_norm_quant_fp8[_static],
// fused_add_rms_norm_quant_fp8[_static]): each gets a Status naming the argument with the expected
// and the actual value, and nothing is written (every buffer is compared byte for byte with its
// state before the call). Besides what the plain norms check: the format mix-up that would
// silently halve or double every value (an e4m3fnuz tensor written as e4m3fn and the reverse), an
// unknown format, the scale upper bound, the dynamic scale's shape, dtype, layout and device, the
// static scale's (one element), and overlaps: out with any input or the static scale, the dynamic
// scale with anything. Run on every backend present.
#include <cmath>
#include <string>
#include <vector>

#include "bad_input.h"
#include "gtest/gtest.h"
#include "test_support.h"

namespace fusekit::testing {
namespace {

constexpr int64_t kM = 4;
constexpr int64_t kN = 64;

// Valid operands for every call, plus a spare buffer for strided and aliasing cases.
struct Operands {
  explicit Operands(Backend b)
      : x(b, DType::kBFloat16, kM, kN),
        residual(b, DType::kBFloat16, kM, kN),
        residual_out(b, DType::kBFloat16, kM, kN),
        residual_f32(b, DType::kFloat32, kM, kN),
        weight(b, DType::kBFloat16, 1, kN),
        out(b, DType::kBFloat16, kM, kN),
        out_fn(b, DType::kFloat8E4M3FN, kM, kN),
        out_fnuz(b, DType::kFloat8E4M3FNUZ, kM, kN),
        scale(b, DType::kFloat32, 1, kM),
        static_scale(b, DType::kFloat32, 1, 1),
        spare(b, DType::kBFloat16, 2 * kM, kN) {
    std::mt19937 rng(5);
    for (RowBuffer* in : {&x, &residual, &residual_f32, &weight, &spare}) {
      in->fill_random(rng);
      in->upload();
    }
    static_scale.set(0, 0, 0.5);
    static_scale.upload();
  }
  std::vector<RowBuffer*> all() {
    return {&x,  &residual, &residual_out, &residual_f32, &weight,       &out,
            &out_fn, &out_fnuz, &scale,    &static_scale, &spare};
  }
  TensorView w() const { return weight.view_1d(); }
  TensorView s() const { return scale.view_1d(); }
  TensorView s1() const { return static_scale.view_1d(); }
  RowBuffer x, residual, residual_out, residual_f32, weight, out, out_fn, out_fnuz, scale,
      static_scale, spare;
};

using BadCase = testing::BadCase<Operands>;

const auto kInvalid = StatusCode::kInvalidArgument;
const auto kUnsupported = StatusCode::kUnsupported;
const auto kFN = Fp8Format::kE4M3FN;
const auto kFNUZ = Fp8Format::kE4M3FNUZ;
const float kEps = 1e-6f;

// A float32 view of `shape` at `data` (for scales placed over other buffers).
TensorView f32_at(const TensorView& like, void* data, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(data, DType::kFloat32, like.device, shape);
}

std::vector<BadCase> bad_cases(Backend backend) {
  using O = Operands;
  const Device other = other_device(backend);
  const std::string here = device_of(backend).to_string();
  return {
      // The format and the out dtype.
      {"e4m3fnuz tensor written as e4m3fn", [](O& o) { return rms_norm_quant_fp8(o.out_fnuz.view(), o.s(), o.x.view(), o.w(), kEps, kFN); },
       kUnsupported, {"rms_norm_quant_fp8: out:", "expected dtype float8_e4m3fn (format e4m3fn) but got float8_e4m3fnuz"}},
      {"e4m3fn tensor written as e4m3fnuz", [](O& o) { return fused_add_rms_norm_quant_fp8_static(o.out_fn.view(), o.residual_out.view(), o.x.view(), o.residual.view(), o.w(), o.s1(), kEps, kFNUZ); },
       kUnsupported, {"fused_add_rms_norm_quant_fp8_static: out:", "expected dtype float8_e4m3fnuz (format e4m3fnuz) but got float8_e4m3fn"}},
      {"bfloat16 out", [](O& o) { return rms_norm_quant_fp8_static(o.out.view(), o.x.view(), o.w(), o.s1(), kEps, kFN); },
       kUnsupported, {"out:", "expected dtype float8_e4m3fn (format e4m3fn) but got bfloat16"}},
      {"unknown format", [](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), o.s(), o.x.view(), o.w(), kEps, static_cast<Fp8Format>(7)); },
       kUnsupported, {"rms_norm_quant_fp8: format:", "expected e4m3fn or e4m3fnuz but got value 7"}},
      {"unknown format, static", [](O& o) { return rms_norm_quant_fp8_static(o.out_fn.view(), o.x.view(), o.w(), o.s1(), kEps, static_cast<Fp8Format>(-1)); },
       kUnsupported, {"format:", "got value -1"}},
      // The scale upper bound.
      {"negative scale bound", [](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), o.s(), o.x.view(), o.w(), kEps, kFN, 0.0f, -1.0f); },
       kInvalid, {"scale_upper_bound:", "expected 0 (no bound) or a value > 0 but got -1"}},
      {"NaN scale bound", [](O& o) { return fused_add_rms_norm_quant_fp8(o.out_fn.view(), o.s(), o.residual_out.view(), o.x.view(), o.residual.view(), o.w(), kEps, kFN, 0.0f, std::nanf("")); },
       kInvalid, {"fused_add_rms_norm_quant_fp8: scale_upper_bound:", "got nan"}},
      // The dynamic scale.
      {"dynamic scale missing", [](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), TensorView(), o.x.view(), o.w(), kEps, kFN); },
       kInvalid, {"scale:", "expected a float32 tensor of 4 elements but got none"}},
      {"dynamic scale too short", [](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), with_shape(o.s(), {kM - 1}, {1}), o.x.view(), o.w(), kEps, kFN); },
       kInvalid, {"scale:", "expected shape [4, 1] (one per row: [4] or out's shape with last dimension 1) but got [3]"}},
      {"dynamic scale [M, 2]", [](O& o) { return fused_add_rms_norm_quant_fp8(o.out_fn.view(), with_shape(o.s(), {kM / 2, 2}, {2, 1}), o.residual_out.view(), o.x.view(), o.residual.view(), o.w(), kEps, kFN); },
       kInvalid, {"scale:", "but got [2, 2]"}},
      {"dynamic scale bfloat16", [](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), with_dtype(o.s(), DType::kBFloat16), o.x.view(), o.w(), kEps, kFN); },
       kUnsupported, {"scale:", "expected dtype float32 but got bfloat16"}},
      {"dynamic scale [M, 1] strided", [](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), with_dtype(with_shape(o.spare.view(), {kM, 1}, {2, 1}), DType::kFloat32), o.x.view(), o.w(), kEps, kFN); },
       kInvalid, {"scale:", "expected contiguous elements (row stride 1) but got row stride 2"}},
      {"null dynamic scale", [](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), with_data(o.s(), nullptr), o.x.view(), o.w(), kEps, kFN); },
       kInvalid, {"scale:", "expected a non-null data pointer for shape [4] but got nullptr"}},
      {"dynamic scale on another device", [other](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), with_device(o.s(), other), o.x.view(), o.w(), kEps, kFN); },
       kInvalid, {"scale:", "(x's device) but got " + other.to_string()}},
      // The static scale.
      {"static scale missing", [](O& o) { return rms_norm_quant_fp8_static(o.out_fn.view(), o.x.view(), o.w(), TensorView(), kEps, kFN); },
       kInvalid, {"rms_norm_quant_fp8_static: scale:", "expected a float32 tensor of one element (shape [] or [1]) but got none"}},
      {"static scale [2]", [](O& o) { return rms_norm_quant_fp8_static(o.out_fn.view(), o.x.view(), o.w(), with_shape(o.s(), {2}, {1}), kEps, kFN); },
       kInvalid, {"scale:", "expected shape [] or [1] (one element) but got [2]"}},
      {"static scale [1, 1]", [](O& o) { return fused_add_rms_norm_quant_fp8_static(o.out_fn.view(), o.residual_out.view(), o.x.view(), o.residual.view(), o.w(), with_shape(o.s1(), {1, 1}, {1, 1}), kEps, kFN); },
       kInvalid, {"scale:", "but got [1, 1]"}},
      {"static scale float16", [](O& o) { return rms_norm_quant_fp8_static(o.out_fn.view(), o.x.view(), o.w(), with_dtype(o.s1(), DType::kFloat16), kEps, kFN); },
       kUnsupported, {"scale:", "expected dtype float32 but got float16"}},
      {"null static scale", [](O& o) { return rms_norm_quant_fp8_static(o.out_fn.view(), o.x.view(), o.w(), with_data(o.s1(), nullptr), kEps, kFN); },
       kInvalid, {"scale:", "expected a non-null data pointer for shape [1] but got nullptr"}},
      {"static scale on another device", [other, here](O& o) { return rms_norm_quant_fp8_static(o.out_fn.view(), o.x.view(), o.w(), with_device(o.s1(), other), kEps, kFN); },
       kInvalid, {"scale:", "expected device " + here + " (x's device) but got " + other.to_string()}},
      // Overlaps.
      {"out over x", [](O& o) { return rms_norm_quant_fp8(with_dtype(o.x.view(), DType::kFloat8E4M3FN), o.s(), o.x.view(), o.w(), kEps, kFN); },
       kInvalid, {"out:", "expected memory disjoint from x but the two overlap"}},
      {"out over residual", [](O& o) { return fused_add_rms_norm_quant_fp8_static(with_dtype(o.residual.view(), DType::kFloat8E4M3FN), o.residual_out.view(), o.x.view(), o.residual.view(), o.w(), o.s1(), kEps, kFN); },
       kInvalid, {"out:", "expected memory disjoint from residual but the two overlap"}},
      {"out over weight", [](O& o) { return rms_norm_quant_fp8(with_dtype(with_shape(o.weight.view(), {1, kN}, {kN, 1}), DType::kFloat8E4M3FN), with_shape(o.s(), {1}, {1}), with_shape(o.x.view(), {1, kN}, {kN, 1}), o.w(), kEps, kFN); },
       kInvalid, {"out:", "expected memory disjoint from weight but the two overlap"}},
      {"out over the static scale", [](O& o) { return rms_norm_quant_fp8_static(o.out_fn.view(), o.x.view(), o.w(), f32_at(o.s1(), offset_bytes(o.out_fn.data(), 8), {1}), kEps, kFN); },
       kInvalid, {"out:", "expected memory disjoint from scale but the two overlap"}},
      {"residual_out over the static scale", [](O& o) { return fused_add_rms_norm_quant_fp8_static(o.out_fn.view(), o.residual_out.view(), o.x.view(), o.residual.view(), o.w(), f32_at(o.s1(), o.residual_out.data(), {}), kEps, kFN); },
       kInvalid, {"residual_out:", "expected memory disjoint from scale but the two overlap"}},
      {"dynamic scale over out", [](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), f32_at(o.s(), o.out_fn.data(), {kM}), o.x.view(), o.w(), kEps, kFN); },
       kInvalid, {"scale:", "expected memory disjoint from out but the two overlap"}},
      {"dynamic scale over x", [](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), f32_at(o.s(), o.x.data(), {kM}), o.x.view(), o.w(), kEps, kFN); },
       kInvalid, {"scale:", "expected memory disjoint from x but the two overlap"}},
      {"dynamic scale over weight", [](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), f32_at(o.s(), o.weight.data(), {kM}), o.x.view(), o.w(), kEps, kFN); },
       kInvalid, {"scale:", "expected memory disjoint from weight but the two overlap"}},
      {"dynamic scale over residual", [](O& o) { return fused_add_rms_norm_quant_fp8(o.out_fn.view(), f32_at(o.s(), o.residual.data(), {kM}), o.residual_out.view(), o.x.view(), o.residual.view(), o.w(), kEps, kFN); },
       kInvalid, {"scale:", "expected memory disjoint from residual but the two overlap"}},
      {"dynamic scale over residual_out", [](O& o) { return fused_add_rms_norm_quant_fp8(o.out_fn.view(), f32_at(o.s(), o.residual_out.data(), {kM, 1}), o.residual_out.view(), o.x.view(), o.residual.view(), o.w(), kEps, kFN); },
       kInvalid, {"scale:", "expected memory disjoint from residual_out but the two overlap"}},
      {"residual_out is x", [](O& o) { return fused_add_rms_norm_quant_fp8(o.out_fn.view(), o.s(), o.x.view(), o.x.view(), o.residual.view(), o.w(), kEps, kFN); },
       kInvalid, {"residual_out:", "expected memory disjoint from x but the two overlap"}},
      {"residual_out one element past residual", [](O& o) { return fused_add_rms_norm_quant_fp8_static(o.out_fn.view(), with_data(with_shape(o.spare.view(), {kM, kN}, {kN, 1}), offset_bytes(o.spare.data(), 2)), o.x.view(), with_shape(o.spare.view(), {kM, kN}, {kN, 1}), o.w(), o.s1(), kEps, kFN); },
       kInvalid, {"residual_out:", "expected memory disjoint from residual or identical to it (in place) but the two overlap"}},
      // What the plain norms check, through the fp8 entry points.
      {"out shape", [](O& o) { return rms_norm_quant_fp8(with_shape(o.out_fn.view(), {kM, kN - 8}, {kN, 1}), o.s(), o.x.view(), o.w(), kEps, kFN); },
       kInvalid, {"out:", "expected shape [4, 64] (x's shape) but got [4, 56]"}},
      {"out on another device", [other](O& o) { return rms_norm_quant_fp8_static(with_device(o.out_fn.view(), other), o.x.view(), o.w(), o.s1(), kEps, kFN); },
       kInvalid, {"out:", "(x's device) but got " + other.to_string()}},
      {"x int32", [](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), o.s(), with_dtype(o.x.view(), DType::kInt32), o.w(), kEps, kFN); },
       kUnsupported, {"x:", "expected dtype float32 or float16 or bfloat16 but got int32"}},
      {"weight float16", [](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), o.s(), o.x.view(), with_dtype(o.w(), DType::kFloat16), kEps, kFN); },
       kUnsupported, {"weight:", "expected dtype bfloat16 or float32 but got float16"}},
      {"weight missing", [](O& o) { return rms_norm_quant_fp8_static(o.out_fn.view(), o.x.view(), TensorView(), o.s1(), kEps, kFN); },
       kInvalid, {"weight:", "expected a tensor of shape [64] but got none"}},
      {"residual shape", [](O& o) { return fused_add_rms_norm_quant_fp8(o.out_fn.view(), o.s(), o.residual_out.view(), o.x.view(), with_shape(o.residual.view(), {kM - 1, kN}, {kN, 1}), o.w(), kEps, kFN); },
       kInvalid, {"residual:", "expected shape [4, 64]", "got [3, 64]"}},
      {"residual_out dtype", [](O& o) { return fused_add_rms_norm_quant_fp8(o.out_fn.view(), o.s(), o.residual_out.view(), o.x.view(), o.residual_f32.view(), o.w(), kEps, kFN); },
       kUnsupported, {"residual_out:", "expected dtype float32 but got bfloat16"}},
      {"x last dim not contiguous", [](O& o) { return rms_norm_quant_fp8(o.out_fn.view(), o.s(), with_shape(o.spare.view(), {kM, kN / 2}, {2 * kN, 2}), with_shape(o.w(), {kN / 2}, {1}), kEps, kFN); },
       kInvalid, {"x:", "expected a contiguous last dimension (stride 1) but got stride 2"}},
      {"eps zero", [](O& o) { return rms_norm_quant_fp8_static(o.out_fn.view(), o.x.view(), o.w(), o.s1(), 0.0f, kFN); },
       kInvalid, {"eps:", "expected a finite value > 0 but got 0"}},
      {"eps negative", [](O& o) {
         return rms_norm_quant_fp8(o.out_fn.view(), o.s(), o.x.view(), o.w(), -1e-5f, kFN); },
       kInvalid, {"rms_norm_quant_fp8: eps:", "got -1e-05"}},
      {"eps NaN", [](O& o) {
         return fused_add_rms_norm_quant_fp8_static(o.out_fn.view(), o.residual_out.view(),
                                                    o.x.view(), o.residual.view(), o.w(), o.s1(),
                                                    std::nanf(""), kFN); },
       kInvalid, {"fused_add_rms_norm_quant_fp8_static: eps:", "got nan"}},
      {"weight length", [](O& o) {
         return rms_norm_quant_fp8(o.out_fn.view(), o.s(), o.x.view(),
                                   with_shape(o.w(), {kN - 1}, {1}), kEps, kFN); },
       kInvalid, {"rms_norm_quant_fp8: weight:", "expected shape [64] but got [63]"}},
      {"weight length, fused add static", [](O& o) {
         return fused_add_rms_norm_quant_fp8_static(o.out_fn.view(), o.residual_out.view(),
                                                    o.x.view(), o.residual.view(),
                                                    with_shape(o.w(), {kN / 2}, {1}), o.s1(),
                                                    kEps, kFN); },
       kInvalid, {"weight:", "expected shape [64] but got [32]"}},
      {"weight on another device", [other](O& o) {
         return fused_add_rms_norm_quant_fp8(o.out_fn.view(), o.s(), o.residual_out.view(),
                                             o.x.view(), o.residual.view(),
                                             with_device(o.w(), other), kEps, kFN); },
       kInvalid, {"weight:", "expected device " + here + " (x's device) but got " +
                                 other.to_string()}},
      {"null x", [](O& o) {
         return rms_norm_quant_fp8_static(o.out_fn.view(), with_data(o.x.view(), nullptr), o.w(),
                                          o.s1(), kEps, kFN); },
       kInvalid, {"x:", "expected a non-null data pointer for shape [4, 64] but got nullptr"}},
      {"null out", [](O& o) {
         return rms_norm_quant_fp8(with_data(o.out_fn.view(), nullptr), o.s(), o.x.view(), o.w(),
                                   kEps, kFN); },
       kInvalid, {"out:", "non-null"}},
      {"null residual_out", [](O& o) {
         return fused_add_rms_norm_quant_fp8(o.out_fn.view(), o.s(),
                                             with_data(o.residual_out.view(), nullptr),
                                             o.x.view(), o.residual.view(), o.w(), kEps, kFN); },
       kInvalid, {"residual_out:", "non-null"}},
      {"weight_offset NaN", [](O& o) { return fused_add_rms_norm_quant_fp8(o.out_fn.view(), o.s(), o.residual_out.view(), o.x.view(), o.residual.view(), o.w(), kEps, kFN, std::nanf("")); },
       kInvalid, {"weight_offset:", "expected a finite value"}},
  };
}

class NormFp8BadInput : public BackendTest {};

TEST_P(NormFp8BadInput, ClearErrorAndNothingWritten) {
  expect_all_refused(GetParam(), bad_cases(GetParam()));
}

// residual_out may be residual itself (the vLLM in-place update), with either scale.
TEST_P(NormFp8BadInput, ResidualUpdatedInPlaceIsAccepted) {
  Operands o(GetParam());
  EXPECT_TRUE(fused_add_rms_norm_quant_fp8(o.out_fn.view(), o.s(), o.residual.view(), o.x.view(),
                                           o.residual.view(), o.w(), kEps, kFN)
                  .ok());
  EXPECT_TRUE(fused_add_rms_norm_quant_fp8_static(o.out_fnuz.view(), o.residual.view(),
                                                  o.x.view(), o.residual.view(), o.w(), o.s1(),
                                                  kEps, kFNUZ)
                  .ok());
  if (GetParam() == Backend::kGPU) ASSERT_TRUE(gpu_synchronize(0).ok());
}

TEST_P(NormFp8BadInput, EmptyBatchIsANoOp) {
  Operands o(GetParam());
  const Device d = device_of(GetParam());
  // M == 0 with null pointers is valid and writes nothing (the static scale is still one
  // element, and must be given).
  const TensorView empty = TensorView::contiguous(nullptr, DType::kBFloat16, d, {0, kN});
  const TensorView fp8 = TensorView::contiguous(nullptr, DType::kFloat8E4M3FN, d, {0, kN});
  const TensorView scale = TensorView::contiguous(nullptr, DType::kFloat32, d, {0});
  std::vector<std::vector<uint8_t>> before;
  for (RowBuffer* b : o.all()) before.push_back(b->snapshot());
  EXPECT_TRUE(rms_norm_quant_fp8(fp8, scale, empty, o.w(), kEps, kFN).ok());
  EXPECT_TRUE(rms_norm_quant_fp8_static(fp8, empty, o.w(), o.s1(), kEps, kFN).ok());
  EXPECT_TRUE(fused_add_rms_norm_quant_fp8(fp8, scale, empty, empty, empty, o.w(), kEps, kFN).ok());
  EXPECT_TRUE(
      fused_add_rms_norm_quant_fp8_static(fp8, empty, empty, empty, o.w(), o.s1(), kEps, kFN)
          .ok());
  if (GetParam() == Backend::kGPU) ASSERT_TRUE(gpu_synchronize(0).ok());
  const std::vector<RowBuffer*> all = o.all();
  for (size_t i = 0; i < all.size(); ++i) {
    all[i]->download();
    EXPECT_TRUE(all[i]->equals_snapshot(before[i])) << "buffer " << i << " was written";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, NormFp8BadInput,
                         ::testing::Values(Backend::kCPU, Backend::kGPU),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(backend_name(info.param));
                         });

TEST(NormFp8WithoutGpuBackend, GpuTensorsAreRefused) {
  if (std::string(gpu_backend_name()) != "none") GTEST_SKIP() << "built with a GPU backend";
  std::vector<uint16_t> x_host(kM * kN, 0x3f80), w_host(kN, 0x3f80);
  std::vector<uint8_t> out_host(kM * kN);
  std::vector<float> scale_host(kM);
  const Device gpu = Device::gpu(0);
  const TensorView x = TensorView::contiguous(x_host.data(), DType::kBFloat16, gpu, {kM, kN});
  const TensorView w = TensorView::contiguous(w_host.data(), DType::kBFloat16, gpu, {kN});
  const TensorView out =
      TensorView::contiguous(out_host.data(), DType::kFloat8E4M3FN, gpu, {kM, kN});
  const TensorView scale = TensorView::contiguous(scale_host.data(), DType::kFloat32, gpu, {kM});
  const Status s = rms_norm_quant_fp8(out, scale, x, w, kEps, kFN);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("built without a GPU backend"), std::string::npos) << s.message();
  EXPECT_EQ(out_host, std::vector<uint8_t>(kM * kN));
  EXPECT_EQ(scale_host, std::vector<float>(kM));
}

}  // namespace
}  // namespace fusekit::testing
