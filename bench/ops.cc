// The op families the benchmark knows: the norm family's ops and the gated activations.
//
// Every call goes through the public API (fusekit/norm.h) exactly as a user or vLLM would make
// it, passing the benchmark's stream. Bytes follow the project's rule: each input read once, each
// output written once, weights once. To add a family: describe its tensors and ops in a function
// like norm_family() (its own file when it grows) and add it to op_families().
#include "ops.h"

#include "fusekit/activation.h"
#include "fusekit/norm.h"
#include "act_sweep.h"
#include "norm_sweep.h"

namespace fusekit::bench {
namespace {

constexpr uint32_t bit(int slot) { return 1u << slot; }

// Norm bytes: kRowTensors tensors of [M, N] read or written, plus kParams vectors of [N].
template <int kRowTensors, int kParams>
int64_t norm_bytes(int64_t m, int64_t n, int64_t s) {
  return kRowTensors * m * n * s + kParams * n * s;
}

// The fp8 forms: bytes = x (plus the residual read and written back) + weight, the fp8 out (one
// byte per element), and the scales (M dynamic ones, or the one static scale read).
template <bool kAdd, bool kDynamic>
int64_t norm_fp8_bytes(int64_t m, int64_t n, int64_t s) {
  return (kAdd ? 3 : 1) * m * n * s + n * s + m * n + 4 * (kDynamic ? m : 1);
}

// The in-place fused add with a float32 residual: x (16-bit) and the residual read and written.
template <int kParams>
int64_t norm_f32_residual_bytes(int64_t m, int64_t n, int64_t s) {
  return 2 * m * n * s + 2 * m * n * 4 + kParams * n * s;
}

Status call_norm(const OpSpec& op, const OpArgs& a, Stream stream) {
  const TensorView& x = a.t[kNormX];
  const TensorView& res = a.t[kNormResidual];
  // The float32 residual's view of its slot's storage ([M, 2N] of x's dtype, at least 4N bytes a
  // row).
  const TensorView& rs = a.t[kNormResidualF32];
  const TensorView res_f32 =
      TensorView::contiguous(rs.data, DType::kFloat32, rs.device, {a.m, a.n});
  const TensorView& w = a.t[kNormWeight];
  const TensorView& b = a.t[kNormBias];
  const NormOptions none;
  // The fp8 forms write codes (a.fp8_format) into out's storage (an [M, N] fp8 view fits in the
  // [M, N] slot) and their float32 scales into the scale slot: M of them, or one static scale
  // read from it (random bits of the pool: finite, which is all a bandwidth measurement needs).
  const TensorView& o = a.t[kNormOut];
  const TensorView& sc = a.t[kNormScale];
  const Fp8Format format = a.fp8_format;
  const TensorView fp8 =
      TensorView::contiguous(o.data, fp8_format_dtype(format), o.device, {a.m, a.n});
  const TensorView rows = TensorView::contiguous(sc.data, DType::kFloat32, sc.device, {a.m});
  const TensorView one = TensorView::contiguous(sc.data, DType::kFloat32, sc.device, {1});
  switch (static_cast<NormOp>(op.variant)) {
    case NormOp::kRms:
      return rms_norm(a.t[kNormOut], x, w, kRmsEps, 0.0f, none, stream);
    case NormOp::kAddRms:
      return fused_add_rms_norm_inplace(x, res, w, kRmsEps, 0.0f, none, stream);
    case NormOp::kAddRmsOop:
      return fused_add_rms_norm(a.t[kNormOut], a.t[kNormResidualOut], x, res, w, kRmsEps, 0.0f,
                                none, stream);
    case NormOp::kLayer:
      return layer_norm(a.t[kNormOut], x, w, b, kLayerEps, none, stream);
    case NormOp::kAddLayer:
      return fused_add_layer_norm_inplace(x, res, w, b, kLayerEps, none, stream);
    case NormOp::kAddLayerOop:
      return fused_add_layer_norm(a.t[kNormOut], a.t[kNormResidualOut], x, res, w, b, kLayerEps,
                                  none, stream);
    case NormOp::kRmsFp8:
      return rms_norm_quant_fp8(fp8, rows, x, w, kRmsEps, format, 0.0f, 0.0f, stream);
    case NormOp::kRmsFp8Static:
      return rms_norm_quant_fp8_static(fp8, x, w, one, kRmsEps, format, 0.0f, stream);
    case NormOp::kAddRmsFp8:
      return fused_add_rms_norm_quant_fp8(fp8, rows, res, x, res, w, kRmsEps, format, 0.0f, 0.0f,
                                          stream);
    case NormOp::kAddRmsFp8Static:
      return fused_add_rms_norm_quant_fp8_static(fp8, res, x, res, w, one, kRmsEps, format, 0.0f,
                                                 stream);
    case NormOp::kAddRmsF32Residual:
      return fused_add_rms_norm_inplace(x, res_f32, w, kRmsEps, 0.0f, none, stream);
    case NormOp::kAddLayerF32Residual:
      return fused_add_layer_norm_inplace(x, res_f32, w, b, kLayerEps, none, stream);
  }
  return Status::invalid_argument("fusekit_bench: unknown norm op");
}

FamilySpec norm_family() {
  FamilySpec f;
  f.section = "norm";
  // Order must match NormSlot.
  f.slots = {{"x", true, 1},           {"residual", true, 1}, {"out", true, 1},
             {"residual_out", true, 1}, {"weight", false, 1}, {"bias", false, 1},
             {"scale_storage", true, 1, 4},  // M float32 scales, whatever N
             {"residual_f32", true, 2}};     // [M, N] float32 in 16-bit x's [M, 2N]
  const uint32_t x = bit(kNormX), r = bit(kNormResidual), o = bit(kNormOut);
  const uint32_t ro = bit(kNormResidualOut), w = bit(kNormWeight), b = bit(kNormBias);
  const uint32_t sc = bit(kNormScale), r32 = bit(kNormResidualF32);
  auto op = [&](const char* name, const char* shapes_name, uint32_t outs, uint32_t ins,
                NormOp which, int64_t (*bytes)(int64_t, int64_t, int64_t)) {
    const bool fp8_out = which == NormOp::kRmsFp8 || which == NormOp::kRmsFp8Static ||
                         which == NormOp::kAddRmsFp8 || which == NormOp::kAddRmsFp8Static;
    f.ops.push_back(OpSpec{name, shapes_name, outs | ins, ins, static_cast<int>(which), bytes,
                           call_norm, norm_describe, norm_sweep, fp8_out});
  };
  // name, shapes-file name, outputs only, inputs (in-place tensors count as inputs).
  op("rms_norm", "rms_norm", o, x | w, NormOp::kRms, norm_bytes<2, 1>);
  op("fused_add_rms_norm", "fused_add_rms_norm", 0, x | r | w, NormOp::kAddRms,
     norm_bytes<4, 1>);
  op("fused_add_rms_norm_oop", "fused_add_rms_norm", o | ro, x | r | w, NormOp::kAddRmsOop,
     norm_bytes<4, 1>);
  op("layer_norm", "layer_norm", o, x | w | b, NormOp::kLayer, norm_bytes<2, 2>);
  op("fused_add_layer_norm", "fused_add_layer_norm", 0, x | r | w | b, NormOp::kAddLayer,
     norm_bytes<4, 2>);
  op("fused_add_layer_norm_oop", "fused_add_layer_norm", o | ro, x | r | w | b,
     NormOp::kAddLayerOop, norm_bytes<4, 2>);
  // The fp8 forms, run on the same shapes as their plain op.
  op("rms_norm_quant_fp8", "rms_norm", o | sc, x | w, NormOp::kRmsFp8,
     norm_fp8_bytes<false, true>);
  op("rms_norm_quant_fp8_static", "rms_norm", o, x | w | sc, NormOp::kRmsFp8Static,
     norm_fp8_bytes<false, false>);
  op("fused_add_rms_norm_quant_fp8", "fused_add_rms_norm", o | sc, x | r | w,
     NormOp::kAddRmsFp8, norm_fp8_bytes<true, true>);
  op("fused_add_rms_norm_quant_fp8_static", "fused_add_rms_norm", o, x | r | w | sc,
     NormOp::kAddRmsFp8Static, norm_fp8_bytes<true, false>);
  // The in-place fused adds on a float32 residual stream, run only when --ops names them (or a
  // shapes file lists them by these names).
  op("fused_add_rms_norm_fp32_residual", "fused_add_rms_norm_fp32_residual", 0, x | r32 | w,
     NormOp::kAddRmsF32Residual, norm_f32_residual_bytes<1>);
  op("fused_add_layer_norm_fp32_residual", "fused_add_layer_norm_fp32_residual", 0,
     x | r32 | w | b, NormOp::kAddLayerF32Residual, norm_f32_residual_bytes<2>);
  return f;
}

// Gated activations. Slots (act_sweep.h's ActSlot): x [M, 2N], out [M, N], and spare [M, N]
// whose storage holds the fp8 forms' float32 scales. The fp8 forms write N bytes per row into
// out's storage (a [M, N] fp8 view with row stride N fits in the [M, N] 16-bit slot). Bytes: x
// read once, out written once, plus the M scales.
enum class ActBenchOp { kPlain, kQuantFp8 };

int64_t act_plain_bytes(int64_t m, int64_t n, int64_t s) { return 3 * m * n * s; }
int64_t act_fp8_bytes(int64_t m, int64_t n, int64_t s) { return 2 * m * n * s + m * n + 4 * m; }

Activation act_of(const OpSpec& op) {
  const std::string name = op.shapes_name;
  if (name == "gelu_tanh_and_mul") return Activation::kGeluTanh;
  if (name == "gelu_and_mul") return Activation::kGelu;
  return Activation::kSilu;
}

Status call_act(const OpSpec& op, const OpArgs& a, Stream stream) {
  const Activation act = act_of(op);
  if (static_cast<ActBenchOp>(op.variant) == ActBenchOp::kPlain) {
    return act_and_mul(act, a.t[kActOut], a.t[kActX], stream);
  }
  const TensorView& o = a.t[kActOut];
  const TensorView out =
      TensorView::contiguous(o.data, fp8_format_dtype(a.fp8_format), o.device, {a.m, a.n});
  const TensorView& sp = a.t[kActSpare];
  const TensorView scale = TensorView::contiguous(sp.data, DType::kFloat32, sp.device, {a.m});
  return act_and_mul_quant_fp8(act, out, scale, a.t[kActX], a.fp8_format, 0.0f, stream);
}

FamilySpec act_family() {
  FamilySpec f;
  f.section = "act_and_mul";
  // Order: ActSlot. The scale slot holds M float32 scales, whatever N.
  f.slots = {{"x", true, 2}, {"out", true, 1}, {"scale_storage", true, 1, 4}};
  const uint32_t x = bit(kActX), o = bit(kActOut), sp = bit(kActSpare);
  for (const char* name : {"silu_and_mul", "gelu_tanh_and_mul", "gelu_and_mul"}) {
    f.ops.push_back(OpSpec{name, name, x | o, x, static_cast<int>(ActBenchOp::kPlain),
                           act_plain_bytes, call_act, act_describe, act_sweep});
  }
  // The fp8 forms (OpArgs::fp8_format), run on the same shapes as their plain op.
  f.ops.push_back(OpSpec{"silu_and_mul_quant_fp8", "silu_and_mul", x | o | sp, x,
                         static_cast<int>(ActBenchOp::kQuantFp8), act_fp8_bytes, call_act,
                         act_quant_describe, act_quant_sweep, true});
  f.ops.push_back(OpSpec{"gelu_tanh_and_mul_quant_fp8", "gelu_tanh_and_mul", x | o | sp, x,
                         static_cast<int>(ActBenchOp::kQuantFp8), act_fp8_bytes, call_act,
                         act_quant_describe, act_quant_sweep, true});
  f.ops.push_back(OpSpec{"gelu_and_mul_quant_fp8", "gelu_and_mul", x | o | sp, x,
                         static_cast<int>(ActBenchOp::kQuantFp8), act_fp8_bytes, call_act,
                         act_quant_describe, act_quant_sweep, true});
  return f;
}

}  // namespace

const std::vector<FamilySpec>& op_families() {
  static const std::vector<FamilySpec> families = {
      norm_family(),
      act_family(),
  };
  return families;
}

}  // namespace fusekit::bench
