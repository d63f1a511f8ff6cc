// Bad calls to the normalization backward passes: each gets a Status naming the argument with the
// expected and the actual value, and nothing is written (every buffer is compared byte for byte
// with its state before the call). Run on every backend present.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "bad_input.h"
#include "test_support.h"

namespace fusekit::testing {
namespace {

constexpr int64_t kM = 8;
constexpr int64_t kN = 64;
const float kNaN = std::nanf("");

// Valid operands for the backward calls, plus spares for wrong dtypes and aliasing.
struct Operands {
  explicit Operands(Backend b)
      : grad_out(b, DType::kBFloat16, kM, kN),
        x(b, DType::kBFloat16, kM, kN),
        grad_extra(b, DType::kBFloat16, kM, kN),
        grad_x(b, DType::kBFloat16, kM, kN),
        x_f32(b, DType::kFloat32, kM, kN),
        rstd(b, DType::kFloat32, 1, kM),
        mean(b, DType::kFloat32, 1, kM),
        weight(b, DType::kBFloat16, 1, kN),
        grad_weight(b, DType::kBFloat16, 1, kN),
        grad_bias(b, DType::kBFloat16, 1, kN),
        workspace(b, DType::kFloat32, 1, norm_backward_workspace_size(kM, kN, true, true)),
        spare(b, DType::kBFloat16, 2 * kM, kN) {
    std::mt19937 rng(5);
    for (RowBuffer* in : {&grad_out, &x, &grad_extra, &x_f32, &weight}) {
      in->fill_random(rng);
      in->upload();
    }
    rstd.fill_rows(std::vector<double>(kM, 1.0));
    rstd.upload();
    mean.fill_rows(std::vector<double>(kM, 0.0));
    mean.upload();
  }
  std::vector<RowBuffer*> all() {
    return {&grad_out, &x, &grad_extra, &grad_x, &x_f32, &rstd, &mean, &weight, &grad_weight,
            &grad_bias, &workspace, &spare};
  }
  TensorView ws() const { return workspace.view_1d(); }
  RowBuffer grad_out, x, grad_extra, grad_x, x_f32, rstd, mean, weight, grad_weight, grad_bias,
      workspace, spare;
};

using BadCase = testing::BadCase<Operands>;

TensorView none_view() { return TensorView(); }

const auto kInvalid = StatusCode::kInvalidArgument;
const auto kUnsupported = StatusCode::kUnsupported;

std::vector<BadCase> bad_cases(Backend backend) {
  using O = Operands;
  const Device other = other_device(backend);
  return {
      {"x shape", [](O& o) { return rms_norm_backward(o.grad_x.view(), none_view(), o.grad_out.view(), with_shape(o.x.view(), {kM, kN - 1}, {kN, 1}), o.rstd.view_1d(), o.weight.view_1d()); },
       kInvalid, {"rms_norm_backward: x:", "expected shape [8, 64] (grad_out's shape) but got [8, 63]"}},
      {"grad_x shape", [](O& o) { return rms_norm_backward(with_shape(o.grad_x.view(), {kM / 2, kN}, {kN, 1}), none_view(), o.grad_out.view(), o.x.view(), o.rstd.view_1d(), o.weight.view_1d()); },
       kInvalid, {"grad_x:", "got [4, 64]"}},
      {"grad_out int32", [](O& o) { return rms_norm_backward(o.grad_x.view(), none_view(), with_dtype(o.grad_out.view(), DType::kInt32), o.x.view(), o.rstd.view_1d(), o.weight.view_1d()); },
       kUnsupported, {"grad_out:", "expected dtype float32 or float16 or bfloat16 but got int32"}},
      {"x float16 with bfloat16 grad_out", [](O& o) { return rms_norm_backward(o.grad_x.view(), none_view(), o.grad_out.view(), with_dtype(o.x.view(), DType::kFloat16), o.rstd.view_1d(), o.weight.view_1d()); },
       kUnsupported, {"x:", "expected dtype bfloat16 or float32 but got float16"}},
      {"grad_x dtype differs from x", [](O& o) { return rms_norm_backward(o.grad_x.view(), none_view(), o.grad_out.view(), o.x_f32.view(), o.rstd.view_1d(), o.weight.view_1d()); },
       kUnsupported, {"grad_x:", "expected dtype float32 but got bfloat16"}},
      {"rstd length", [](O& o) { return rms_norm_backward(o.grad_x.view(), none_view(), o.grad_out.view(), o.x.view(), with_shape(o.rstd.view_1d(), {kM - 1}, {1}), o.weight.view_1d()); },
       kInvalid, {"rstd:", "expected shape [8] but got [7]"}},
      {"rstd dtype", [](O& o) { return rms_norm_backward(o.grad_x.view(), none_view(), o.grad_out.view(), o.x.view(), with_dtype(with_shape(o.spare.view(), {kM}, {1}), DType::kBFloat16), o.weight.view_1d()); },
       kUnsupported, {"rstd:", "expected dtype float32 but got bfloat16"}},
      {"rstd missing", [](O& o) { return rms_norm_backward(o.grad_x.view(), none_view(), o.grad_out.view(), o.x.view(), none_view(), o.weight.view_1d()); },
       kInvalid, {"rstd:", "expected a tensor but got none"}},
      {"mean missing", [](O& o) { return layer_norm_backward(o.grad_x.view(), none_view(), none_view(), o.grad_out.view(), o.x.view(), none_view(), o.rstd.view_1d(), o.weight.view_1d()); },
       kInvalid, {"layer_norm_backward: mean:", "expected a tensor but got none"}},
      {"rms weight missing", [](O& o) { return rms_norm_backward(o.grad_x.view(), none_view(), o.grad_out.view(), o.x.view(), o.rstd.view_1d(), none_view()); },
       kInvalid, {"weight:", "expected a tensor of shape [64] but got none"}},
      {"weight dtype", [](O& o) { return rms_norm_backward(o.grad_x.view(), none_view(), o.grad_out.view(), o.x.view(), o.rstd.view_1d(), with_dtype(o.weight.view_1d(), DType::kFloat16)); },
       kUnsupported, {"weight:", "expected dtype bfloat16 or float32 but got float16"}},
      {"weight length", [](O& o) { return rms_norm_backward(o.grad_x.view(), none_view(), o.grad_out.view(), o.x.view(), o.rstd.view_1d(), with_shape(o.weight.view_1d(), {kN - 2}, {1})); },
       kInvalid, {"weight:", "expected shape [64] but got [62]"}},
      {"weight_offset NaN", [](O& o) { return rms_norm_backward(o.grad_x.view(), none_view(), o.grad_out.view(), o.x.view(), o.rstd.view_1d(), o.weight.view_1d(), kNaN); },
       kInvalid, {"weight_offset:", "expected a finite value"}},
      {"grad_weight without weight", [](O& o) { return layer_norm_backward(o.grad_x.view(), o.grad_weight.view_1d(), none_view(), o.grad_out.view(), o.x.view(), o.mean.view_1d(), o.rstd.view_1d(), none_view(), o.ws()); },
       kInvalid, {"grad_weight:", "expected none (the call has no weight) but got a tensor"}},
      {"grad_weight dtype", [](O& o) { return rms_norm_backward(o.grad_x.view(), with_dtype(o.grad_weight.view_1d(), DType::kFloat16), o.grad_out.view(), o.x.view(), o.rstd.view_1d(), o.weight.view_1d(), 0.0f, o.ws()); },
       kUnsupported, {"grad_weight:", "expected dtype bfloat16 but got float16"}},
      {"grad_bias dtype without weight", [](O& o) { return layer_norm_backward(o.grad_x.view(), none_view(), with_dtype(o.grad_bias.view_1d(), DType::kFloat16), o.grad_out.view(), o.x.view(), o.mean.view_1d(), o.rstd.view_1d(), none_view(), o.ws()); },
       kUnsupported, {"grad_bias:", "expected dtype bfloat16 or float32 but got float16"}},
      {"grad_bias length", [](O& o) { return layer_norm_backward(o.grad_x.view(), o.grad_weight.view_1d(), with_shape(o.grad_bias.view_1d(), {kN + 1}, {1}), o.grad_out.view(), o.x.view(), o.mean.view_1d(), o.rstd.view_1d(), o.weight.view_1d(), o.ws()); },
       kInvalid, {"grad_bias:", "expected shape [64] but got [65]"}},
      {"workspace missing", [](O& o) { return rms_norm_backward(o.grad_x.view(), o.grad_weight.view_1d(), o.grad_out.view(), o.x.view(), o.rstd.view_1d(), o.weight.view_1d()); },
       kInvalid, {"workspace:", "expected a float32 tensor of at least 128 elements", "but got none"}},
      {"workspace too small", [](O& o) { return layer_norm_backward(o.grad_x.view(), o.grad_weight.view_1d(), o.grad_bias.view_1d(), o.grad_out.view(), o.x.view(), o.mean.view_1d(), o.rstd.view_1d(), o.weight.view_1d(), with_shape(o.ws(), {255}, {1})); },
       kInvalid, {"workspace:", "expected at least 256 elements but got 255"}},
      {"workspace dtype", [](O& o) { return rms_norm_backward(o.grad_x.view(), o.grad_weight.view_1d(), o.grad_out.view(), o.x.view(), o.rstd.view_1d(), o.weight.view_1d(), 0.0f, with_dtype(o.ws(), DType::kFloat64)); },
       kUnsupported, {"workspace:", "expected dtype float32 but got float64"}},
      {"workspace 2-D", [](O& o) { return rms_norm_backward(o.grad_x.view(), o.grad_weight.view_1d(), o.grad_out.view(), o.x.view(), o.rstd.view_1d(), o.weight.view_1d(), 0.0f, with_shape(o.ws(), {2, 128}, {128, 1})); },
       kInvalid, {"workspace:", "expected a 1-D tensor but got shape [2, 128]"}},
      {"workspace strided", [](O& o) { return rms_norm_backward(o.grad_x.view(), o.grad_weight.view_1d(), o.grad_out.view(), o.x.view(), o.rstd.view_1d(), o.weight.view_1d(), 0.0f, with_shape(o.ws(), {128}, {2})); },
       kInvalid, {"workspace:", "expected a contiguous tensor (stride 1) but got stride 2"}},
      {"grad_x is grad_out", [](O& o) { return rms_norm_backward(o.grad_out.view(), none_view(), o.grad_out.view(), o.x.view(), o.rstd.view_1d(), o.weight.view_1d()); },
       kInvalid, {"grad_x:", "expected memory disjoint from grad_out but the two overlap"}},
      {"workspace overlaps grad_weight", [](O& o) { return rms_norm_backward(o.grad_x.view(), with_dtype(with_shape(o.ws(), {kN}, {1}), DType::kBFloat16), o.grad_out.view(), o.x.view(), o.rstd.view_1d(), with_dtype(o.weight.view_1d(), DType::kBFloat16), 0.0f, o.ws()); },
       kInvalid, {"workspace:", "disjoint from grad_weight"}},
      {"grad_h overlaps grad_residual_out", [](O& o) { return fused_add_rms_norm_backward(o.grad_extra.view(), none_view(), o.grad_out.view(), o.grad_extra.view(), o.x.view(), o.rstd.view_1d(), o.weight.view_1d()); },
       kInvalid, {"fused_add_rms_norm_backward: grad_h:", "disjoint from grad_residual_out"}},
      {"grad_residual_out shape", [](O& o) { return fused_add_rms_norm_backward(o.grad_x.view(), none_view(), o.grad_out.view(), with_shape(o.grad_extra.view(), {kM, kN, 1}, {kN, 1, 1}), o.x.view(), o.rstd.view_1d(), o.weight.view_1d()); },
       kInvalid, {"grad_residual_out:", "got [8, 64, 1]"}},
      {"grad_residual_out dtype", [](O& o) { return fused_add_layer_norm_backward(o.grad_x.view(), none_view(), none_view(), o.grad_out.view(), with_dtype(o.grad_extra.view(), DType::kFloat16), o.x.view(), o.mean.view_1d(), o.rstd.view_1d(), o.weight.view_1d()); },
       kUnsupported, {"grad_residual_out:", "expected dtype bfloat16 but got float16"}},
      {"residual_out on another device", [other](O& o) { return fused_add_rms_norm_backward(o.grad_x.view(), none_view(), o.grad_out.view(), o.grad_extra.view(), with_device(o.x.view(), other), o.rstd.view_1d(), o.weight.view_1d()); },
       kInvalid, {"residual_out:", "expected device " + device_of(backend).to_string() + " (grad_out's device) but got " + other.to_string()}},
      {"workspace on another device", [other](O& o) { return rms_norm_backward(o.grad_x.view(), o.grad_weight.view_1d(), o.grad_out.view(), o.x.view(), o.rstd.view_1d(), o.weight.view_1d(), 0.0f, with_device(o.ws(), other)); },
       kInvalid, {"workspace:", "expected device"}},
      {"grad_out last dim not contiguous", [](O& o) { return rms_norm_backward(o.grad_x.view(), none_view(), with_shape(o.spare.view(), {kM, kN}, {2 * kN, 2}), o.x.view(), o.rstd.view_1d(), o.weight.view_1d()); },
       kInvalid, {"grad_out:", "expected a contiguous last dimension (stride 1) but got stride 2"}},
  };
}

class NormBackwardBadInput : public BackendTest {};

TEST_P(NormBackwardBadInput, ClearErrorAndNothingWritten) {
  expect_all_refused(GetParam(), bad_cases(GetParam()));
}

TEST_P(NormBackwardBadInput, EmptyBatchGivesZeroParameterGradients) {
  Operands o(GetParam());
  const Device d = device_of(GetParam());
  const TensorView empty = TensorView::contiguous(nullptr, DType::kBFloat16, d, {0, kN});
  const TensorView no_rows = TensorView::contiguous(nullptr, DType::kFloat32, d, {0});
  // M == 0: the sums over no rows are 0, and no workspace is needed.
  ASSERT_TRUE(layer_norm_backward(empty, o.grad_weight.view_1d(), o.grad_bias.view_1d(), empty,
                                  empty, no_rows, no_rows, o.weight.view_1d())
                  .ok());
  if (GetParam() == Backend::kGPU) ASSERT_TRUE(gpu_synchronize(0).ok());
  o.grad_weight.download();
  o.grad_bias.download();
  for (int64_t j = 0; j < kN; ++j) {
    EXPECT_EQ(o.grad_weight.get(0, j), 0.0);
    EXPECT_EQ(o.grad_bias.get(0, j), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, NormBackwardBadInput,
                         ::testing::Values(Backend::kCPU, Backend::kGPU),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(backend_name(info.param));
                         });

TEST(NormBackwardWithoutGpuBackend, GpuTensorsAreRefused) {
  if (std::string(gpu_backend_name()) != "none") GTEST_SKIP() << "built with a GPU backend";
  std::vector<uint16_t> bits(kM * kN, 0x3f80), out(kM * kN), w(kN, 0x3f80);
  std::vector<float> rstd(kM, 1.0f);
  const Device gpu = Device::gpu(0);
  const auto view = [&](void* p) {
    return TensorView::contiguous(p, DType::kBFloat16, gpu, {kM, kN});
  };
  const Status s = rms_norm_backward(
      view(out.data()), TensorView(), view(bits.data()), view(bits.data()),
      TensorView::contiguous(rstd.data(), DType::kFloat32, gpu, {kM}),
      TensorView::contiguous(w.data(), DType::kBFloat16, gpu, {kN}));
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("built without a GPU backend"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace fusekit::testing
