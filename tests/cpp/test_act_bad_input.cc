// Bad calls to the gated-activation ops (forward, fp8-quantized, backward; fused [..., 2N] input
// and separate gate / up): each gets a Status naming the op as its caller knows it
// (silu_and_mul_quant_fp8, ...; act_and_mul when the activation itself is invalid) and the
// argument, with the expected and the actual value, and nothing is written (every buffer is
// compared byte for byte with its poisoned state after the call). The fp8 cases include the
// format mix-up that would silently halve or double every value: an e4m3fnuz tensor written as
// e4m3fn, and the reverse. Run on every backend present.
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

// Valid operands for every act call, plus a spare buffer for strided and aliasing cases.
struct Operands {
  explicit Operands(Backend b)
      : x(b, DType::kBFloat16, kM, 2 * kN),
        gate(b, DType::kBFloat16, kM, kN),
        up(b, DType::kBFloat16, kM, kN),
        out(b, DType::kBFloat16, kM, kN),
        out_fn(b, DType::kFloat8E4M3FN, kM, kN),
        out_fnuz(b, DType::kFloat8E4M3FNUZ, kM, kN),
        scale(b, DType::kFloat32, 1, kM),
        grad_out(b, DType::kBFloat16, kM, kN),
        grad_x(b, DType::kBFloat16, kM, 2 * kN),
        grad_gate(b, DType::kBFloat16, kM, kN),
        grad_up(b, DType::kBFloat16, kM, kN),
        spare(b, DType::kBFloat16, 2 * kM, 2 * kN) {
    std::mt19937 rng(7);
    for (RowBuffer* in : {&x, &gate, &up, &grad_out, &spare}) {
      in->fill_random(rng);
      in->upload();
    }
  }
  std::vector<RowBuffer*> all() {
    return {&x, &gate, &up, &out, &out_fn, &out_fnuz, &scale, &grad_out, &grad_x, &grad_gate,
            &grad_up, &spare};
  }
  TensorView scale_1d() const { return scale.view_1d(); }
  RowBuffer x, gate, up, out, out_fn, out_fnuz, scale, grad_out, grad_x, grad_gate, grad_up,
      spare;
};

using BadCase = testing::BadCase<Operands>;

const auto kInvalid = StatusCode::kInvalidArgument;
const auto kUnsupported = StatusCode::kUnsupported;
const auto kSilu = Activation::kSilu;
const auto kFN = Fp8Format::kE4M3FN;
const auto kFNUZ = Fp8Format::kE4M3FNUZ;

std::vector<BadCase> forward_cases(Backend backend) {
  using O = Operands;
  const Device other = other_device(backend);
  const std::string here = device_of(backend).to_string();
  return {
      {"unknown activation", [](O& o) { return act_and_mul(static_cast<Activation>(9), o.out.view(), o.x.view()); },
       kInvalid, {"act_and_mul: act:", "expected silu, gelu_tanh or gelu but got value 9"}},
      {"odd last dimension", [](O& o) { return silu_and_mul(o.out.view(), with_shape(o.x.view(), {kM, 2 * kN - 1}, {2 * kN, 1})); },
       kInvalid, {"silu_and_mul: x:", "expected an even last dimension (gate and up halves of 2N) but got 127"}},
      {"x int32", [](O& o) { return gelu_and_mul(o.out.view(), with_dtype(o.x.view(), DType::kInt32)); },
       kUnsupported, {"gelu_and_mul: x:", "expected dtype float32 or float16 or bfloat16 but got int32"}},
      {"x fp8", [](O& o) { return gelu_and_mul(o.out.view(), with_dtype(o.x.view(), DType::kFloat8E4M3FN)); },
       kUnsupported, {"x:", "got float8_e4m3fn"}},
      {"up shape differs from gate", [](O& o) { return silu_and_mul(o.out.view(), o.gate.view(), with_shape(o.up.view(), {kM, kN - 1}, {kN, 1})); },
       kInvalid, {"up:", "expected shape [4, 64] (gate's shape) but got [4, 63]"}},
      {"up rank differs from gate", [](O& o) { return silu_and_mul(o.out.view(), o.gate.view(), with_shape(o.up.view(), {1, kM, kN}, {kM * kN, kN, 1})); },
       kInvalid, {"up:", "(gate's shape) but got [1, 4, 64]"}},
      {"up dtype differs from gate", [](O& o) { return silu_and_mul(o.out.view(), o.gate.view(), with_dtype(o.up.view(), DType::kFloat16)); },
       kUnsupported, {"up:", "expected dtype bfloat16 (gate's dtype) but got float16"}},
      {"out shape", [](O& o) { return gelu_tanh_and_mul(with_shape(o.out.view(), {kM, kN / 2}, {kN, 1}), o.x.view()); },
       kInvalid, {"out:", "expected shape [4, 64] (x's shape with last dimension N) but got [4, 32]"}},
      {"out shape, split form", [](O& o) { return gelu_tanh_and_mul(with_shape(o.out.view(), {kM / 2, kN}, {kN, 1}), o.gate.view(), o.up.view()); },
       kInvalid, {"out:", "expected shape [4, 64] (gate's shape with last dimension N) but got [2, 64]"}},
      {"out dtype", [](O& o) { return silu_and_mul(with_dtype(o.out.view(), DType::kFloat16), o.x.view()); },
       kUnsupported, {"out:", "expected dtype bfloat16 (x's dtype) but got float16"}},
      {"x last dim not contiguous", [](O& o) { return silu_and_mul(o.out.view(), with_shape(o.spare.view(), {kM, 2 * kN}, {4 * kN, 2})); },
       kInvalid, {"x:", "expected a contiguous last dimension (stride 1) but got stride 2"}},
      {"up last dim not contiguous", [](O& o) { return silu_and_mul(o.out.view(), o.gate.view(), with_shape(o.spare.view(), {kM, kN}, {4 * kN, 2})); },
       kInvalid, {"up:", "expected a contiguous last dimension (stride 1) but got stride 2"}},
      {"out last dim not contiguous", [](O& o) { return silu_and_mul(with_shape(o.spare.view(), {kM, kN}, {4 * kN, 2}), o.x.view()); },
       kInvalid, {"out:", "expected a contiguous last dimension (stride 1) but got stride 2"}},
      {"null x", [](O& o) { return silu_and_mul(o.out.view(), with_data(o.x.view(), nullptr)); },
       kInvalid, {"x:", "expected a non-null data pointer for shape [4, 128] but got nullptr"}},
      {"null gate", [](O& o) { return silu_and_mul(o.out.view(), with_data(o.gate.view(), nullptr), o.up.view()); },
       kInvalid, {"gate:", "expected a non-null data pointer for shape [4, 64] but got nullptr"}},
      {"null out", [](O& o) { return silu_and_mul(with_data(o.out.view(), nullptr), o.x.view()); },
       kInvalid, {"out:", "non-null"}},
      {"out overlaps x", [](O& o) { return silu_and_mul(with_shape(o.x.view(), {kM, kN}, {2 * kN, 1}), o.x.view()); },
       kInvalid, {"out:", "expected memory disjoint from x but the two overlap"}},
      {"out is gate", [](O& o) { return silu_and_mul(o.gate.view(), o.gate.view(), o.up.view()); },
       kInvalid, {"out:", "expected memory disjoint from gate but the two overlap"}},
      {"out overlaps gate, one element apart", [](O& o) { return silu_and_mul(with_data(with_shape(o.spare.view(), {kM, kN}, {2 * kN, 1}), offset_bytes(o.spare.data(), 2)), with_shape(o.spare.view(), {kM, kN}, {2 * kN, 1}), o.up.view()); },
       kInvalid, {"out:", "expected memory disjoint from gate but the two overlap"}},
      {"up on another device", [other, here](O& o) { return silu_and_mul(o.out.view(), o.gate.view(), with_device(o.up.view(), other)); },
       kInvalid, {"up:", "expected device " + here + " (gate's device) but got " + other.to_string()}},
      {"out on another device", [other, here](O& o) { return silu_and_mul(with_device(o.out.view(), other), o.x.view()); },
       kInvalid, {"out:", "expected device " + here + " (x's device) but got " + other.to_string()}},
  };
}

std::vector<BadCase> quant_cases(Backend backend) {
  using O = Operands;
  const Device other = other_device(backend);
  return {
      {"e4m3fnuz tensor written as e4m3fn", [](O& o) { return silu_and_mul_quant_fp8(o.out_fnuz.view(), o.scale_1d(), o.x.view(), kFN); },
       kUnsupported, {"silu_and_mul_quant_fp8: out:", "expected dtype float8_e4m3fn (format e4m3fn) but got float8_e4m3fnuz"}},
      {"e4m3fn tensor written as e4m3fnuz", [](O& o) { return act_and_mul_quant_fp8(Activation::kGeluTanh, o.out_fn.view(), o.scale_1d(), o.gate.view(), o.up.view(), kFNUZ); },
       kUnsupported, {"gelu_tanh_and_mul_quant_fp8: out:", "expected dtype float8_e4m3fnuz (format e4m3fnuz) but got float8_e4m3fn"}},
      {"bfloat16 out for fp8", [](O& o) { return gelu_and_mul_quant_fp8(o.out.view(), o.scale_1d(), o.x.view(), kFN); },
       kUnsupported, {"out:", "expected dtype float8_e4m3fn (format e4m3fn) but got bfloat16"}},
      {"unknown format", [](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), o.scale_1d(), o.x.view(), static_cast<Fp8Format>(7)); },
       kUnsupported, {"format:", "expected e4m3fn or e4m3fnuz but got value 7"}},
      {"negative scale bound", [](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), o.scale_1d(), o.x.view(), kFN, -1.0f); },
       kInvalid, {"scale_upper_bound:", "expected 0 (no bound) or a value > 0 but got -1"}},
      {"NaN scale bound", [](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), o.scale_1d(), o.x.view(), kFN, std::nanf("")); },
       kInvalid, {"scale_upper_bound:", "got nan"}},
      {"tiny negative scale bound, printed as it is", [](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), o.scale_1d(), o.x.view(), kFN, -1e-10f); },
       kInvalid, {"scale_upper_bound:", "expected 0 (no bound) or a value > 0 but got -1e-10"}},
      {"odd last dimension", [](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), o.scale_1d(), with_shape(o.spare.view(), {kM, 2 * kN + 1}, {2 * kN + 2, 1}), kFN); },
       kInvalid, {"x:", "expected an even last dimension", "got 129"}},
      {"out shape", [](O& o) { return silu_and_mul_quant_fp8(with_shape(o.out_fn.view(), {kM, kN - 8}, {kN, 1}), o.scale_1d(), o.x.view(), kFN); },
       kInvalid, {"out:", "expected shape [4, 64] (x's shape with last dimension N) but got [4, 56]"}},
      {"scale missing", [](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), TensorView(), o.x.view(), kFN); },
       kInvalid, {"scale:", "expected a float32 tensor of 4 elements but got none"}},
      {"scale too short", [](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), with_shape(o.scale_1d(), {kM - 1}, {1}), o.x.view(), kFN); },
       kInvalid, {"scale:", "expected shape [4, 1] (one per row: [4] or out's shape with last dimension 1) but got [3]"}},
      {"scale [M, 2]", [](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), with_shape(o.scale_1d(), {kM / 2, 2}, {2, 1}), o.x.view(), kFN); },
       kInvalid, {"scale:", "but got [2, 2]"}},
      {"scale bfloat16", [](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), with_dtype(o.scale_1d(), DType::kBFloat16), o.x.view(), kFN); },
       kUnsupported, {"scale:", "expected dtype float32 but got bfloat16"}},
      {"scale [M, 1] strided", [](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), with_dtype(with_shape(o.spare.view(), {kM, 1}, {2, 1}), DType::kFloat32), o.x.view(), kFN); },
       kInvalid, {"scale:", "expected contiguous elements (row stride 1) but got row stride 2"}},
      {"null scale", [](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), with_data(o.scale_1d(), nullptr), o.x.view(), kFN); },
       kInvalid, {"scale:", "expected a non-null data pointer for shape [4] but got nullptr"}},
      {"scale overlaps out", [](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), with_dtype(with_data(o.scale_1d(), o.out_fn.data()), DType::kFloat32), o.x.view(), kFN); },
       kInvalid, {"scale:", "expected memory disjoint from out but the two overlap"}},
      {"scale overlaps x", [](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), with_data(o.scale_1d(), o.x.data()), o.x.view(), kFN); },
       kInvalid, {"scale:", "expected memory disjoint from x but the two overlap"}},
      {"out overlaps up", [](O& o) { return act_and_mul_quant_fp8(kSilu, with_dtype(o.up.view(), DType::kFloat8E4M3FN), o.scale_1d(), o.gate.view(), o.up.view(), kFN); },
       kInvalid, {"out:", "expected memory disjoint from up but the two overlap"}},
      {"gate last dim not contiguous", [](O& o) { return act_and_mul_quant_fp8(kSilu, o.out_fn.view(), o.scale_1d(), with_shape(o.spare.view(), {kM, kN}, {4 * kN, 2}), o.up.view(), kFN); },
       kInvalid, {"gate:", "expected a contiguous last dimension (stride 1) but got stride 2"}},
      {"scale on another device", [other](O& o) { return silu_and_mul_quant_fp8(o.out_fn.view(), with_device(o.scale_1d(), other), o.x.view(), kFN); },
       kInvalid, {"scale:", "(x's device) but got " + other.to_string()}},
      {"out on another device", [other](O& o) { return silu_and_mul_quant_fp8(with_device(o.out_fn.view(), other), o.scale_1d(), o.x.view(), kFN); },
       kInvalid, {"out:", "(x's device) but got " + other.to_string()}},
  };
}

std::vector<BadCase> backward_cases(Backend backend) {
  using O = Operands;
  const Device other = other_device(backend);
  return {
      {"odd last dimension", [](O& o) { return act_and_mul_backward(kSilu, with_shape(o.grad_x.view(), {kM, 2 * kN - 1}, {2 * kN, 1}), o.grad_out.view(), with_shape(o.x.view(), {kM, 2 * kN - 1}, {2 * kN, 1})); },
       kInvalid, {"silu_and_mul_backward: x:", "expected an even last dimension", "got 127"}},
      {"grad_x shape", [](O& o) { return act_and_mul_backward(Activation::kGelu, with_shape(o.grad_x.view(), {kM, kN}, {2 * kN, 1}), o.grad_out.view(), o.x.view()); },
       kInvalid, {"gelu_and_mul_backward: grad_x:", "expected shape [4, 128] (x's shape) but got [4, 64]"}},
      {"grad_x dtype", [](O& o) { return act_and_mul_backward(kSilu, with_dtype(o.grad_x.view(), DType::kFloat16), o.grad_out.view(), o.x.view()); },
       kUnsupported, {"grad_x:", "expected dtype bfloat16 (x's dtype) but got float16"}},
      {"grad_out shape", [](O& o) { return act_and_mul_backward(kSilu, o.grad_x.view(), with_shape(o.grad_x.view(), {kM, 2 * kN}, {2 * kN, 1}), o.x.view()); },
       kInvalid, {"grad_out:", "expected shape [4, 64] (x's shape with last dimension N) but got [4, 128]"}},
      {"grad_out dtype", [](O& o) { return act_and_mul_backward(kSilu, o.grad_x.view(), with_dtype(o.grad_out.view(), DType::kFloat32), o.x.view()); },
       kUnsupported, {"grad_out:", "expected dtype bfloat16 (x's dtype) but got float32"}},
      {"grad_x is x", [](O& o) { return act_and_mul_backward(kSilu, o.x.view(), o.grad_out.view(), o.x.view()); },
       kInvalid, {"grad_x:", "expected memory disjoint from x but the two overlap"}},
      {"grad_x overlaps grad_out", [](O& o) { return act_and_mul_backward(kSilu, o.grad_x.view(), with_shape(o.grad_x.view(), {kM, kN}, {2 * kN, 1}), o.x.view()); },
       kInvalid, {"grad_x:", "expected memory disjoint from grad_out but the two overlap"}},
      {"null grad_out", [](O& o) { return act_and_mul_backward(kSilu, o.grad_x.view(), with_data(o.grad_out.view(), nullptr), o.x.view()); },
       kInvalid, {"grad_out:", "non-null"}},
      {"x last dim not contiguous", [](O& o) { return act_and_mul_backward(kSilu, o.grad_x.view(), o.grad_out.view(), with_shape(o.spare.view(), {kM, 2 * kN}, {4 * kN, 2})); },
       kInvalid, {"x:", "contiguous last dimension"}},
      {"grad_gate shape", [](O& o) { return act_and_mul_backward(kSilu, with_shape(o.grad_gate.view(), {kM, kN - 1}, {kN, 1}), o.grad_up.view(), o.grad_out.view(), o.gate.view(), o.up.view()); },
       kInvalid, {"grad_gate:", "expected shape [4, 64] (gate's shape) but got [4, 63]"}},
      {"grad_up dtype", [](O& o) { return act_and_mul_backward(kSilu, o.grad_gate.view(), with_dtype(o.grad_up.view(), DType::kFloat32), o.grad_out.view(), o.gate.view(), o.up.view()); },
       kUnsupported, {"grad_up:", "expected dtype bfloat16 (gate's dtype) but got float32"}},
      {"up shape", [](O& o) { return act_and_mul_backward(kSilu, o.grad_gate.view(), o.grad_up.view(), o.grad_out.view(), o.gate.view(), with_shape(o.up.view(), {kM, kN / 2}, {kN, 1})); },
       kInvalid, {"up:", "(gate's shape) but got [4, 32]"}},
      {"grad_up is grad_gate", [](O& o) { return act_and_mul_backward(kSilu, o.grad_gate.view(), o.grad_gate.view(), o.grad_out.view(), o.gate.view(), o.up.view()); },
       kInvalid, {"grad_up:", "expected memory disjoint from grad_gate but the two overlap"}},
      {"grad_gate is up", [](O& o) { return act_and_mul_backward(kSilu, o.up.view(), o.grad_up.view(), o.grad_out.view(), o.gate.view(), o.up.view()); },
       kInvalid, {"grad_gate:", "expected memory disjoint from up but the two overlap"}},
      {"null grad_up", [](O& o) { return act_and_mul_backward(kSilu, o.grad_gate.view(), with_data(o.grad_up.view(), nullptr), o.grad_out.view(), o.gate.view(), o.up.view()); },
       kInvalid, {"grad_up:", "non-null"}},
      {"grad_up on another device", [other](O& o) { return act_and_mul_backward(kSilu, o.grad_gate.view(), with_device(o.grad_up.view(), other), o.grad_out.view(), o.gate.view(), o.up.view()); },
       kInvalid, {"grad_up:", "(gate's device) but got " + other.to_string()}},
      {"grad_out on another device", [other](O& o) { return act_and_mul_backward(kSilu, o.grad_x.view(), with_device(o.grad_out.view(), other), o.x.view()); },
       kInvalid, {"grad_out:", "(x's device) but got " + other.to_string()}},
      {"unknown activation", [](O& o) { return act_and_mul_backward(static_cast<Activation>(-1), o.grad_x.view(), o.grad_out.view(), o.x.view()); },
       kInvalid, {"act:", "got value -1"}},
  };
}

class ActBadInput : public BackendTest {};

TEST_P(ActBadInput, ForwardClearErrorAndNothingWritten) {
  expect_all_refused(GetParam(), forward_cases(GetParam()));
}

TEST_P(ActBadInput, QuantFp8ClearErrorAndNothingWritten) {
  expect_all_refused(GetParam(), quant_cases(GetParam()));
}

TEST_P(ActBadInput, BackwardClearErrorAndNothingWritten) {
  expect_all_refused(GetParam(), backward_cases(GetParam()));
}

// Inputs may overlap each other (gate and up the same tensor): not an error.
TEST_P(ActBadInput, OverlappingInputsAreAccepted) {
  Operands o(GetParam());
  EXPECT_TRUE(silu_and_mul(o.out.view(), o.gate.view(), o.gate.view()).ok());
  EXPECT_TRUE(act_and_mul_quant_fp8(kSilu, o.out_fn.view(), o.scale_1d(), o.gate.view(),
                                    o.gate.view(), kFN)
                  .ok());
  if (GetParam() == Backend::kGPU) ASSERT_TRUE(gpu_synchronize(0).ok());
}

TEST_P(ActBadInput, EmptyBatchIsANoOp) {
  Operands o(GetParam());
  const Device d = device_of(GetParam());
  // M == 0 with null pointers is valid and writes nothing.
  const TensorView x = TensorView::contiguous(nullptr, DType::kBFloat16, d, {0, 2 * kN});
  const TensorView half = TensorView::contiguous(nullptr, DType::kBFloat16, d, {0, kN});
  const TensorView fp8 = TensorView::contiguous(nullptr, DType::kFloat8E4M3FNUZ, d, {0, kN});
  const TensorView scale = TensorView::contiguous(nullptr, DType::kFloat32, d, {0});
  std::vector<std::vector<uint8_t>> before;
  for (RowBuffer* b : o.all()) before.push_back(b->snapshot());
  EXPECT_TRUE(silu_and_mul(half, x).ok());
  EXPECT_TRUE(gelu_and_mul(half, half, half).ok());
  EXPECT_TRUE(silu_and_mul_quant_fp8(fp8, scale, x, kFNUZ).ok());
  EXPECT_TRUE(act_and_mul_backward(kSilu, x, half, x).ok());
  // An empty slice of a larger tensor keeps its parent's strides, which need not flatten.
  const TensorView slice = TensorView::strided(o.x.data(), DType::kBFloat16, d, {2, 0, 2 * kN},
                                               {3 * 2 * kN, 2 * kN, 1});
  const TensorView out_slice = TensorView::strided(o.out.data(), DType::kBFloat16, d, {2, 0, kN},
                                                   {3 * kN, kN, 1});
  EXPECT_TRUE(silu_and_mul(out_slice, slice).ok());
  // And an empty slice whose last dimension is strided (x[:0, ::2]) has no elements to lay out.
  const TensorView every_other =
      TensorView::strided(o.x.data(), DType::kBFloat16, d, {0, 2 * kN}, {4 * kN, 2});
  const TensorView out_every_other =
      TensorView::strided(o.out.data(), DType::kBFloat16, d, {0, kN}, {2 * kN, 2});
  EXPECT_TRUE(silu_and_mul(out_every_other, every_other).ok());
  if (GetParam() == Backend::kGPU) ASSERT_TRUE(gpu_synchronize(0).ok());
  const std::vector<RowBuffer*> all = o.all();
  for (size_t i = 0; i < all.size(); ++i) {
    all[i]->download();
    EXPECT_TRUE(all[i]->equals_snapshot(before[i])) << "buffer " << i << " was written";
  }
}

// Views of one buffer that share no byte are not aliases: the output in the columns after the
// input's (buf[:, 2N:3N] beside x = buf[:, :2N]), and the output on the odd rows of a buffer
// whose even rows are the input. Each writes what a separate output gets, bit for bit, and
// leaves the input's bytes as they were.
TEST_P(ActBadInput, OutputBesideTheInputInOneBufferIsNotAnAlias) {
  const Backend backend = GetParam();
  const Device d = device_of(backend);
  std::mt19937 rng(5);
  struct Layout {
    const char* name;
    int64_t x_stride, out_offset, out_stride, buffer_rows, buffer_cols;
  };
  // Columns: rows of 3N, x in the first 2N. Rows: rows of 2N, x on even rows, out on odd ones.
  for (const Layout& l : {Layout{"columns", 3 * kN, 2 * kN, 3 * kN, kM, 3 * kN},
                          Layout{"rows", 4 * kN, 2 * kN, 4 * kN, 2 * kM, 2 * kN}}) {
    RowBuffer buffer(backend, DType::kBFloat16, l.buffer_rows, l.buffer_cols);
    buffer.fill_random(rng);
    buffer.upload();
    const TensorView x =
        TensorView::strided(buffer.data(), DType::kBFloat16, d, {kM, 2 * kN}, {l.x_stride, 1});
    const TensorView out = TensorView::strided(offset_bytes(buffer.data(), 2 * l.out_offset),
                                               DType::kBFloat16, d, {kM, kN}, {l.out_stride, 1});
    RowBuffer separate(backend, DType::kBFloat16, kM, kN);
    separate.poison();
    separate.upload();
    ASSERT_TRUE(silu_and_mul(separate.view(), x).ok()) << l.name;
    const int64_t row_elems = l.buffer_cols;
    auto x_bits = [&] {
      std::vector<uint64_t> bits;
      for (int64_t r = 0; r < kM; ++r) {
        for (int64_t c = 0; c < 2 * kN; ++c) {
          const int64_t at = r * l.x_stride + c;
          bits.push_back(buffer.raw(at / row_elems, at % row_elems));
        }
      }
      return bits;
    };
    const std::vector<uint64_t> x_before = x_bits();
    const Status s = silu_and_mul(out, x);
    ASSERT_TRUE(s.ok()) << l.name << ": " << s.to_string();
    if (backend == Backend::kGPU) ASSERT_TRUE(gpu_synchronize(0).ok());
    buffer.download();
    separate.download();
    EXPECT_EQ(x_bits(), x_before) << l.name << ": x was written";
    for (int64_t r = 0; r < kM; ++r) {
      for (int64_t c = 0; c < kN; ++c) {  // out, as the separate output
        const int64_t at = l.out_offset + r * l.out_stride + c;
        ASSERT_EQ(buffer.raw(at / row_elems, at % row_elems), separate.raw(r, c))
            << l.name << ": out[" << r << ", " << c << "]";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ActBadInput, ::testing::Values(Backend::kCPU, Backend::kGPU),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(backend_name(info.param));
                         });

TEST(ActWithoutGpuBackend, GpuTensorsAreRefused) {
  if (std::string(gpu_backend_name()) != "none") GTEST_SKIP() << "built with a GPU backend";
  std::vector<uint16_t> x_host(kM * 2 * kN, 0x3f80), out_host(kM * kN);
  const Device gpu = Device::gpu(0);
  const TensorView x = TensorView::contiguous(x_host.data(), DType::kBFloat16, gpu, {kM, 2 * kN});
  const TensorView out = TensorView::contiguous(out_host.data(), DType::kBFloat16, gpu, {kM, kN});
  const Status s = silu_and_mul(out, x);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("built without a GPU backend"), std::string::npos) << s.message();
  EXPECT_EQ(out_host, std::vector<uint16_t>(kM * kN));
}

}  // namespace
}  // namespace fusekit::testing
