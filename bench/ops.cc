// The op families the benchmark knows, and the norm family's ops.
//
// Every call goes through the public API (fusekit/norm.h) exactly as a user or vLLM would make
// it, passing the benchmark's stream. Bytes follow the project's rule: each input read once, each
// output written once, weights once. To add a family: describe its tensors and ops in a function
// like norm_family() (its own file when it grows) and add it to op_families().
#include "ops.h"

#include "fusekit/norm.h"
#include "norm_sweep.h"

namespace fusekit::bench {
namespace {

constexpr uint32_t bit(int slot) { return 1u << slot; }

// Norm bytes: kRowTensors tensors of [M, N] read or written, plus kParams vectors of [N].
template <int kRowTensors, int kParams>
int64_t norm_bytes(int64_t m, int64_t n, int64_t s) {
  return kRowTensors * m * n * s + kParams * n * s;
}

Status call_norm(const OpSpec& op, const OpArgs& a, Stream stream) {
  const TensorView& x = a.t[kNormX];
  const TensorView& res = a.t[kNormResidual];
  const TensorView& w = a.t[kNormWeight];
  const TensorView& b = a.t[kNormBias];
  const NormOptions none;
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
  }
  return Status::invalid_argument("fusekit_bench: unknown norm op");
}

FamilySpec norm_family() {
  FamilySpec f;
  f.section = "norm";
  // Order must match NormSlot.
  f.slots = {{"x", true, 1},           {"residual", true, 1}, {"out", true, 1},
             {"residual_out", true, 1}, {"weight", false, 1}, {"bias", false, 1}};
  const uint32_t x = bit(kNormX), r = bit(kNormResidual), o = bit(kNormOut);
  const uint32_t ro = bit(kNormResidualOut), w = bit(kNormWeight), b = bit(kNormBias);
  auto op = [&](const char* name, const char* shapes_name, uint32_t outs, uint32_t ins,
                NormOp which, int64_t (*bytes)(int64_t, int64_t, int64_t)) {
    f.ops.push_back(OpSpec{name, shapes_name, outs | ins, ins, static_cast<int>(which), bytes,
                           call_norm, norm_describe, norm_sweep});
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
  return f;
}

}  // namespace

const std::vector<FamilySpec>& op_families() {
  static const std::vector<FamilySpec> families = {
      norm_family(),
  };
  return families;
}

}  // namespace fusekit::bench
