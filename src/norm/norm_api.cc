// The public normalization entry points: validate every argument, describe the call as one
// NormProblem, and hand it to the backend of the tensors' device. Nothing is written unless every
// check has passed.
#include <cmath>
#include <cstring>

#include "core/validate.h"
#include "fusekit/norm.h"
#include "norm/norm_problem.h"

namespace fusekit {
namespace {

using detail::NormKind;
using detail::NormProblem;
using detail::Rows;

constexpr auto kF32 = DType::kFloat32;

struct NormCall {
  const char* op;
  NormKind kind;
  bool add;
  const TensorView* out;
  const TensorView* residual_out;  // add only
  const TensorView* x;
  const TensorView* residual;  // add only
  const TensorView* weight;    // required for RMS, optional for LayerNorm
  const TensorView* bias;      // LayerNorm only, optional
  float eps;
  float weight_offset;
  const NormOptions* options;
  // fp8 output (RMSNorm only): out holds codes of `format`; `scale` is the per-row output when
  // `dynamic`, else the one-element input.
  bool fp8 = false;
  bool dynamic = false;
  const TensorView* scale = nullptr;
  Fp8Format format = Fp8Format::kE4M3FN;
  float scale_upper_bound = 0.0f;
};

Status build_problem(const NormCall& c, NormProblem* p) {
  const char* op = c.op;
  FUSEKIT_RETURN_IF_ERROR(detail::expect_positive_eps(op, c.eps));
  if (!std::isfinite(c.weight_offset)) {
    return detail::invalid(op, "weight_offset", "expected a finite value but got " +
                                                    detail::float_string(c.weight_offset));
  }

  if (c.fp8) {
    FUSEKIT_RETURN_IF_ERROR(detail::expect_fp8_format(op, c.format));
    if (c.dynamic) {
      FUSEKIT_RETURN_IF_ERROR(detail::expect_scale_upper_bound(op, c.scale_upper_bound));
    }
  }

  // Rows in runs for rms_norm and layer_norm, the per-head norms (q / k norms) on views of a fused
  // projection's output; the fused add's residual stream and the fp8 forms' outputs (which feed
  // GEMMs) are rows of one stride. The GPU builds kernels of their own for runs
  // (gpu/norm/norm_runs.cu).
  const auto flatten = c.fp8 || c.add ? detail::as_rows : detail::as_row_runs;
  Rows x, out, residual, residual_out;
  FUSEKIT_RETURN_IF_ERROR(flatten(op, "x", *c.x, &x));
  const DType xt = c.x->dtype;
  FUSEKIT_RETURN_IF_ERROR(
      detail::expect_dtype_in(op, "x", xt, {kF32, DType::kFloat16, DType::kBFloat16}));
  const Device device = c.x->device;

  FUSEKIT_RETURN_IF_ERROR(flatten(op, "out", *c.out, &out));
  FUSEKIT_RETURN_IF_ERROR(detail::expect_same_shape(op, "out", *c.out, "x", *c.x));
  if (c.fp8) {
    FUSEKIT_RETURN_IF_ERROR(detail::expect_fp8_dtype(op, "out", c.out->dtype, c.format));
  } else {
    FUSEKIT_RETURN_IF_ERROR(detail::expect_dtype_in(op, "out", c.out->dtype, {xt}));
  }
  FUSEKIT_RETURN_IF_ERROR(detail::expect_device(op, "out", *c.out, device, "x"));

  if (c.add) {
    FUSEKIT_RETURN_IF_ERROR(detail::as_rows(op, "residual", *c.residual, &residual));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_same_shape(op, "residual", *c.residual, "x", *c.x));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_dtype_in(op, "residual", c.residual->dtype, {xt, kF32}));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_device(op, "residual", *c.residual, device, "x"));
    FUSEKIT_RETURN_IF_ERROR(detail::as_rows(op, "residual_out", *c.residual_out, &residual_out));
    FUSEKIT_RETURN_IF_ERROR(
        detail::expect_same_shape(op, "residual_out", *c.residual_out, "x", *c.x));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_dtype_in(op, "residual_out", c.residual_out->dtype,
                                                    {c.residual->dtype}));
    FUSEKIT_RETURN_IF_ERROR(
        detail::expect_device(op, "residual_out", *c.residual_out, device, "x"));
  }

  const int64_t n = x.cols;
  const TensorView* params[2] = {c.weight, c.bias};
  const char* param_names[2] = {"weight", "bias"};
  DType param_dtype = xt;
  bool have_param_dtype = false;
  for (int i = 0; i < 2; ++i) {
    const TensorView* t = params[i];
    if (t == nullptr || !t->defined()) continue;
    FUSEKIT_RETURN_IF_ERROR(detail::as_vector(op, param_names[i], *t, n));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_dtype_in(op, param_names[i], t->dtype, {xt, kF32}));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_device(op, param_names[i], *t, device, "x"));
    if (have_param_dtype && t->dtype != param_dtype) {
      return detail::unsupported(op, "bias",
                                 std::string("expected weight's dtype ") +
                                     dtype_name(param_dtype) + " but got " + dtype_name(t->dtype));
    }
    param_dtype = t->dtype;
    have_param_dtype = true;
  }
  if (c.kind == NormKind::kRms && !c.weight->defined()) {
    return detail::invalid(op, "weight", "expected a tensor of shape [" + std::to_string(n) +
                                             "] but got none");
  }

  // Optional per-row statistics.
  const NormOptions& o = *c.options;
  const TensorView* stats[2] = {&o.rstd, &o.mean};
  const char* stat_names[2] = {"rstd", "mean"};
  Rows stat_rows[2];
  for (int i = 0; i < 2; ++i) {
    const TensorView& t = *stats[i];
    if (!t.defined()) continue;
    if (i == 1 && c.kind == NormKind::kRms) {
      return detail::invalid(op, "mean", "expected none (RMSNorm has no mean) but got a tensor");
    }
    FUSEKIT_RETURN_IF_ERROR(detail::as_vector(op, stat_names[i], t, x.rows));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_dtype_in(op, stat_names[i], t.dtype, {kF32}));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_device(op, stat_names[i], t, device, "x"));
    stat_rows[i] = Rows{t.data, kF32, 1, x.rows, x.rows};
  }

  // fp8 scale: the per-row output, or the one-element input.
  Rows scale;
  if (c.fp8) {
    if (c.dynamic) {
      FUSEKIT_RETURN_IF_ERROR(
          detail::as_row_scales(op, "scale", *c.scale, x.rows, *c.out, device, "x", &scale));
    } else {
      FUSEKIT_RETURN_IF_ERROR(detail::as_scalar_scale(op, "scale", *c.scale, device, "x", &scale));
    }
  }

  // Aliasing: each output is disjoint from every other operand, except the in-place pairs
  // out == x (not for an fp8 out) and residual_out == residual.
  struct Operand {
    const char* name;
    Rows rows;
  };
  Operand operands[10];
  int count = 0;
  operands[count++] = {"x", x};
  if (c.add) operands[count++] = {"residual", residual};
  for (int i = 0; i < 2; ++i) {
    if (params[i] != nullptr && params[i]->defined()) {
      operands[count++] = {param_names[i], Rows{params[i]->data, params[i]->dtype, 1, n, n}};
    }
  }
  if (c.fp8 && !c.dynamic) operands[count++] = {"scale", scale};
  const int inputs = count;
  operands[count++] = {"out", out};
  if (c.add) operands[count++] = {"residual_out", residual_out};
  for (int i = 0; i < 2; ++i) {
    if (stats[i]->defined()) operands[count++] = {stat_names[i], stat_rows[i]};
  }
  if (c.fp8 && c.dynamic) operands[count++] = {"scale", scale};
  for (int a = inputs; a < count; ++a) {
    for (int b = 0; b < count; ++b) {
      if (a == b || (b >= inputs && b > a)) continue;  // each output pair once
      const bool in_place = (!c.fp8 && std::strcmp(operands[a].name, "out") == 0 &&
                             std::strcmp(operands[b].name, "x") == 0) ||
                            (std::strcmp(operands[a].name, "residual_out") == 0 &&
                             std::strcmp(operands[b].name, "residual") == 0);
      FUSEKIT_RETURN_IF_ERROR(detail::expect_no_overlap(op, operands[a].name, operands[a].rows,
                                                        operands[b].name, operands[b].rows,
                                                        in_place));
    }
  }

  int64_t run_rows = 0;
  FUSEKIT_RETURN_IF_ERROR(detail::common_run_rows(op, {{"x", &x}, {"out", &out}}, &run_rows));

  p->kind = c.kind;
  p->add_residual = c.add;
  p->run_rows = run_rows;
  p->rows = x.rows;
  p->cols = n;
  p->x_dtype = xt;
  p->weight_dtype = param_dtype;
  p->x = x.data;
  p->x_stride = x.row_stride;
  p->x_run_skip = x.run_skip;
  p->out = out.data;
  p->out_stride = out.row_stride;
  p->out_run_skip = out.run_skip;
  if (c.add) {
    p->residual_dtype = c.residual->dtype;
    p->residual = residual.data;
    p->residual_stride = residual.row_stride;
    p->residual_out = residual_out.data;
    p->residual_out_stride = residual_out.row_stride;
  }
  p->weight = c.weight != nullptr && c.weight->defined() ? c.weight->data : nullptr;
  p->bias = c.bias != nullptr && c.bias->defined() ? c.bias->data : nullptr;
  p->rstd = static_cast<float*>(o.rstd.defined() ? o.rstd.data : nullptr);
  p->mean = static_cast<float*>(o.mean.defined() ? o.mean.data : nullptr);
  p->eps = c.eps;
  // A zero offset is passed as -0, which leaves every weight as it is (+0 would turn a -0 weight
  // into +0), so that kernels which skip the add for it (the plain GPU form) give the same bits.
  p->weight_offset = c.weight_offset == 0.0f ? -0.0f : c.weight_offset;
  p->weight_after_cast = o.weight_after_cast;
  if (c.fp8) {
    p->out_fp8 = true;
    p->out_fp8_format = c.format;
    p->static_scale = c.dynamic ? nullptr : static_cast<const float*>(scale.data);
    p->dynamic_scale = c.dynamic ? static_cast<float*>(scale.data) : nullptr;
    p->scale_upper_bound = c.dynamic ? c.scale_upper_bound : 0.0f;
  }
  p->device = device;
  return Status();
}

Status run(const NormCall& call, Stream stream) {
  NormProblem p;
  FUSEKIT_RETURN_IF_ERROR(build_problem(call, &p));
  if (p.rows == 0) return Status();  // M == 0: nothing to do
  if (p.device.is_gpu()) return detail::run_norm_gpu(p, stream);
  return detail::run_norm_cpu(p);
}

// The fp8 forms: RMSNorm calls with an fp8 out and a dynamic (per-row output) or static scale.
NormCall quant_call(const char* op, bool add, const TensorView* out,
                    const TensorView* residual_out, const TensorView* x,
                    const TensorView* residual, const TensorView* weight, float eps,
                    float weight_offset, bool dynamic, const TensorView* scale, Fp8Format format,
                    float scale_upper_bound) {
  static const NormOptions kNoOptions;
  NormCall c{op, NormKind::kRms, add, out, residual_out, x, residual, weight, nullptr, eps,
             weight_offset, &kNoOptions};
  c.fp8 = true;
  c.dynamic = dynamic;
  c.scale = scale;
  c.format = format;
  c.scale_upper_bound = scale_upper_bound;
  return c;
}

}  // namespace

Status rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps,
                float weight_offset, const NormOptions& options, Stream stream) {
  return run({"rms_norm", NormKind::kRms, false, &out, nullptr, &x, nullptr, &weight, nullptr,
              eps, weight_offset, &options},
             stream);
}

Status fused_add_rms_norm(const TensorView& out, const TensorView& residual_out,
                          const TensorView& x, const TensorView& residual,
                          const TensorView& weight, float eps, float weight_offset,
                          const NormOptions& options, Stream stream) {
  return run({"fused_add_rms_norm", NormKind::kRms, true, &out, &residual_out, &x, &residual,
              &weight, nullptr, eps, weight_offset, &options},
             stream);
}

Status fused_add_rms_norm_inplace(const TensorView& x, const TensorView& residual,
                                  const TensorView& weight, float eps, float weight_offset,
                                  const NormOptions& options, Stream stream) {
  return run({"fused_add_rms_norm_inplace", NormKind::kRms, true, &x, &residual, &x, &residual,
              &weight, nullptr, eps, weight_offset, &options},
             stream);
}

Status rms_norm_quant_fp8(const TensorView& out, const TensorView& scale, const TensorView& x,
                          const TensorView& weight, float eps, Fp8Format format,
                          float weight_offset, float scale_upper_bound, Stream stream) {
  return run(quant_call("rms_norm_quant_fp8", false, &out, nullptr, &x, nullptr, &weight, eps,
                        weight_offset, true, &scale, format, scale_upper_bound),
             stream);
}

Status rms_norm_quant_fp8_static(const TensorView& out, const TensorView& x,
                                 const TensorView& weight, const TensorView& scale, float eps,
                                 Fp8Format format, float weight_offset, Stream stream) {
  return run(quant_call("rms_norm_quant_fp8_static", false, &out, nullptr, &x, nullptr, &weight,
                        eps, weight_offset, false, &scale, format, 0.0f),
             stream);
}

Status fused_add_rms_norm_quant_fp8(const TensorView& out, const TensorView& scale,
                                    const TensorView& residual_out, const TensorView& x,
                                    const TensorView& residual, const TensorView& weight,
                                    float eps, Fp8Format format, float weight_offset,
                                    float scale_upper_bound, Stream stream) {
  return run(quant_call("fused_add_rms_norm_quant_fp8", true, &out, &residual_out, &x, &residual,
                        &weight, eps, weight_offset, true, &scale, format, scale_upper_bound),
             stream);
}

Status fused_add_rms_norm_quant_fp8_static(const TensorView& out, const TensorView& residual_out,
                                           const TensorView& x, const TensorView& residual,
                                           const TensorView& weight, const TensorView& scale,
                                           float eps, Fp8Format format, float weight_offset,
                                           Stream stream) {
  return run(quant_call("fused_add_rms_norm_quant_fp8_static", true, &out, &residual_out, &x,
                        &residual, &weight, eps, weight_offset, false, &scale, format, 0.0f),
             stream);
}

Status layer_norm(const TensorView& out, const TensorView& x, const TensorView& weight,
                  const TensorView& bias, float eps, const NormOptions& options, Stream stream) {
  return run({"layer_norm", NormKind::kLayer, false, &out, nullptr, &x, nullptr, &weight, &bias,
              eps, 0.0f, &options},
             stream);
}

Status fused_add_layer_norm(const TensorView& out, const TensorView& residual_out,
                            const TensorView& x, const TensorView& residual,
                            const TensorView& weight, const TensorView& bias, float eps,
                            const NormOptions& options, Stream stream) {
  return run({"fused_add_layer_norm", NormKind::kLayer, true, &out, &residual_out, &x, &residual,
              &weight, &bias, eps, 0.0f, &options},
             stream);
}

Status fused_add_layer_norm_inplace(const TensorView& x, const TensorView& residual,
                                    const TensorView& weight, const TensorView& bias, float eps,
                                    const NormOptions& options, Stream stream) {
  return run({"fused_add_layer_norm_inplace", NormKind::kLayer, true, &x, &residual, &x,
              &residual, &weight, &bias, eps, 0.0f, &options},
             stream);
}

}  // namespace fusekit
