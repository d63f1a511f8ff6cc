// The public backward entry points of the normalization family: validate every argument, describe
// the call as one NormBackwardProblem, and hand it to the backend of the tensors' device. As for
// the forward ops, nothing is written unless every check has passed.
#include <cmath>
#include <string>

#include "core/validate.h"
#include "fusekit/norm_backward.h"
#include "norm/norm_backward_problem.h"

namespace fusekit {
namespace {

using detail::NormBackwardProblem;
using detail::NormKind;
using detail::Rows;

constexpr auto kF32 = DType::kFloat32;
// Partial sums: at least kMinRowsPerPartial rows each (so small batches do not pay for a partial
// row per input row), at most kMaxPartials of them (enough blocks to fill the largest GPUs, and a
// workspace of a few MB).
constexpr int64_t kMinRowsPerPartial = 4;
constexpr int64_t kMaxPartials = 512;

struct BackwardCall {
  const char* op;
  NormKind kind;
  const TensorView* grad_x;
  const TensorView* grad_weight;
  const TensorView* grad_bias;  // LayerNorm only
  const TensorView* grad_out;
  const TensorView* grad_extra;  // fused add only
  const TensorView* x;
  const TensorView* mean;  // LayerNorm only
  const TensorView* rstd;
  const TensorView* weight;
  float weight_offset;
  const TensorView* workspace;
};

bool given(const TensorView* t) { return t != nullptr && t->defined(); }

// The input and output rows of a call: grad_out, x, grad_x and (fused add) grad_extra.
Status check_rows(const BackwardCall& c, Rows* grad_out, Rows* x, Rows* grad_x, Rows* extra) {
  const char* op = c.op;
  FUSEKIT_RETURN_IF_ERROR(detail::as_rows(op, "grad_out", *c.grad_out, grad_out));
  const DType gt = c.grad_out->dtype;
  FUSEKIT_RETURN_IF_ERROR(
      detail::expect_dtype_in(op, "grad_out", gt, {kF32, DType::kFloat16, DType::kBFloat16}));
  const Device device = c.grad_out->device;
  const char* x_name = c.grad_extra != nullptr ? "residual_out" : "x";
  const char* grad_x_name = c.grad_extra != nullptr ? "grad_h" : "grad_x";
  FUSEKIT_RETURN_IF_ERROR(detail::as_rows(op, x_name, *c.x, x));
  FUSEKIT_RETURN_IF_ERROR(detail::expect_same_shape(op, x_name, *c.x, "grad_out", *c.grad_out));
  FUSEKIT_RETURN_IF_ERROR(detail::expect_dtype_in(op, x_name, c.x->dtype, {gt, kF32}));
  FUSEKIT_RETURN_IF_ERROR(detail::expect_device(op, x_name, *c.x, device, "grad_out"));
  FUSEKIT_RETURN_IF_ERROR(detail::as_rows(op, grad_x_name, *c.grad_x, grad_x));
  FUSEKIT_RETURN_IF_ERROR(
      detail::expect_same_shape(op, grad_x_name, *c.grad_x, "grad_out", *c.grad_out));
  FUSEKIT_RETURN_IF_ERROR(detail::expect_dtype_in(op, grad_x_name, c.grad_x->dtype, {c.x->dtype}));
  FUSEKIT_RETURN_IF_ERROR(detail::expect_device(op, grad_x_name, *c.grad_x, device, "grad_out"));
  if (c.grad_extra != nullptr) {
    const char* name = "grad_residual_out";
    FUSEKIT_RETURN_IF_ERROR(detail::as_rows(op, name, *c.grad_extra, extra));
    FUSEKIT_RETURN_IF_ERROR(
        detail::expect_same_shape(op, name, *c.grad_extra, "grad_out", *c.grad_out));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_dtype_in(op, name, c.grad_extra->dtype, {c.x->dtype}));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_device(op, name, *c.grad_extra, device, "grad_out"));
  }
  return Status();
}

// A contiguous float32 vector of at least `needed` elements.
Status check_workspace(const char* op, const TensorView& t, int64_t needed, const Device& device) {
  if (!t.defined()) {
    return detail::invalid(op, "workspace", "expected a float32 tensor of at least " +
                                                std::to_string(needed) +
                                                " elements (norm_backward_workspace_size) but "
                                                "got none");
  }
  FUSEKIT_RETURN_IF_ERROR(detail::expect_dtype_in(op, "workspace", t.dtype, {kF32}));
  FUSEKIT_RETURN_IF_ERROR(detail::expect_device(op, "workspace", t, device, "grad_out"));
  if (t.ndim != 1) {
    return detail::invalid(op, "workspace", "expected a 1-D tensor but got shape " +
                                                t.shape_string());
  }
  if (t.shape[0] < needed) {
    return detail::invalid(op, "workspace", "expected at least " + std::to_string(needed) +
                                                " elements but got " +
                                                std::to_string(t.shape[0]));
  }
  if (t.shape[0] > 1 && t.strides[0] != 1) {
    return detail::invalid(op, "workspace", "expected a contiguous tensor (stride 1) but got "
                                            "stride " + std::to_string(t.strides[0]));
  }
  if (needed > 0 && t.data == nullptr) {
    return detail::invalid(op, "workspace", "expected a non-null data pointer but got nullptr");
  }
  return Status();
}

Status build_problem(const BackwardCall& c, NormBackwardProblem* p) {
  const char* op = c.op;
  if (!std::isfinite(c.weight_offset)) {
    return detail::invalid(op, "weight_offset", "expected a finite value but got " +
                                                    detail::float_string(c.weight_offset));
  }
  Rows grad_out, x, grad_x, extra;
  FUSEKIT_RETURN_IF_ERROR(check_rows(c, &grad_out, &x, &grad_x, &extra));
  const DType gt = c.grad_out->dtype;
  const Device device = c.grad_out->device;
  const int64_t m = grad_out.rows;
  const int64_t n = grad_out.cols;

  // Statistics saved by the forward pass.
  Rows stat_rows[2];
  const TensorView* stats[2] = {c.rstd, c.mean};
  const char* stat_names[2] = {"rstd", "mean"};
  for (int i = 0; i < 2; ++i) {
    if (stats[i] == nullptr) continue;  // RMSNorm has no mean
    FUSEKIT_RETURN_IF_ERROR(detail::as_vector(op, stat_names[i], *stats[i], m));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_dtype_in(op, stat_names[i], stats[i]->dtype, {kF32}));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_device(op, stat_names[i], *stats[i], device,
                                                  "grad_out"));
    stat_rows[i] = Rows{stats[i]->data, kF32, 1, m, m};
  }

  // Weight and the parameter gradients.
  const bool has_weight = given(c.weight);
  if (c.kind == NormKind::kRms && !has_weight) {
    return detail::invalid(op, "weight", "expected a tensor of shape [" + std::to_string(n) +
                                             "] but got none");
  }
  if (has_weight) {
    FUSEKIT_RETURN_IF_ERROR(detail::as_vector(op, "weight", *c.weight, n));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_dtype_in(op, "weight", c.weight->dtype, {gt, kF32}));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_device(op, "weight", *c.weight, device, "grad_out"));
  }
  const bool want_w = given(c.grad_weight);
  const bool want_b = given(c.grad_bias);
  if (want_w && !has_weight) {
    return detail::invalid(op, "grad_weight",
                           "expected none (the call has no weight) but got a tensor");
  }
  DType param_dtype = has_weight ? c.weight->dtype : gt;
  const TensorView* param_grads[2] = {c.grad_weight, c.grad_bias};
  const char* param_names[2] = {"grad_weight", "grad_bias"};
  for (int i = 0; i < 2; ++i) {
    const TensorView* t = param_grads[i];
    if (!given(t)) continue;
    FUSEKIT_RETURN_IF_ERROR(detail::as_vector(op, param_names[i], *t, n));
    if (has_weight) {
      FUSEKIT_RETURN_IF_ERROR(
          detail::expect_dtype_in(op, param_names[i], t->dtype, {c.weight->dtype}));
    } else {
      FUSEKIT_RETURN_IF_ERROR(detail::expect_dtype_in(op, param_names[i], t->dtype, {gt, kF32}));
    }
    FUSEKIT_RETURN_IF_ERROR(detail::expect_device(op, param_names[i], *t, device, "grad_out"));
    param_dtype = t->dtype;
  }
  const int64_t needed = norm_backward_workspace_size(m, n, want_w, want_b);
  // With M == 0 or N == 0 nothing is summed through the workspace, which may then be absent.
  const bool use_workspace = needed > 0;
  if (use_workspace) {
    FUSEKIT_RETURN_IF_ERROR(check_workspace(op, *c.workspace, needed, device));
  }

  // Aliasing: every output is disjoint from every other operand.
  struct Operand {
    const char* name;
    Rows rows;
  };
  Operand operands[11];
  int count = 0;
  operands[count++] = {"grad_out", grad_out};
  operands[count++] = {c.grad_extra != nullptr ? "residual_out" : "x", x};
  if (c.grad_extra != nullptr) operands[count++] = {"grad_residual_out", extra};
  for (int i = 0; i < 2; ++i) {
    if (stats[i] != nullptr) operands[count++] = {stat_names[i], stat_rows[i]};
  }
  if (has_weight) {
    operands[count++] = {"weight", Rows{c.weight->data, c.weight->dtype, 1, n, n}};
  }
  const int inputs = count;
  operands[count++] = {c.grad_extra != nullptr ? "grad_h" : "grad_x", grad_x};
  for (int i = 0; i < 2; ++i) {
    if (given(param_grads[i])) {
      operands[count++] = {param_names[i], Rows{param_grads[i]->data, param_dtype, 1, n, n}};
    }
  }
  if (use_workspace) {
    operands[count++] = {"workspace", Rows{c.workspace->data, kF32, 1, needed, needed}};
  }
  for (int a = inputs; a < count; ++a) {
    for (int b = 0; b < a; ++b) {
      FUSEKIT_RETURN_IF_ERROR(detail::expect_no_overlap(op, operands[a].name, operands[a].rows,
                                                        operands[b].name, operands[b].rows));
    }
  }

  p->kind = c.kind;
  p->rows = m;
  p->cols = n;
  p->grad_out_dtype = gt;
  p->x_dtype = c.x->dtype;
  p->weight_dtype = has_weight ? c.weight->dtype : gt;
  p->param_grad_dtype = param_dtype;
  p->grad_out = grad_out.data;
  p->grad_out_stride = grad_out.row_stride;
  p->x = x.data;
  p->x_stride = x.row_stride;
  if (c.grad_extra != nullptr) {
    p->grad_extra = extra.data;
    p->grad_extra_stride = extra.row_stride;
  }
  p->grad_x = grad_x.data;
  p->grad_x_stride = grad_x.row_stride;
  p->rstd = static_cast<const float*>(c.rstd->data);
  p->mean = c.mean != nullptr ? static_cast<const float*>(c.mean->data) : nullptr;
  p->weight = has_weight ? c.weight->data : nullptr;
  p->weight_offset = c.weight_offset;
  p->grad_weight = want_w ? c.grad_weight->data : nullptr;
  p->grad_bias = want_b ? c.grad_bias->data : nullptr;
  p->workspace = use_workspace ? static_cast<float*>(c.workspace->data) : nullptr;
  p->partials = norm_backward_partials(m);
  p->device = device;
  return Status();
}

Status run(const BackwardCall& call, Stream stream) {
  NormBackwardProblem p;
  FUSEKIT_RETURN_IF_ERROR(build_problem(call, &p));
  // M == 0 still has work when parameter gradients are requested: they are sums over no rows, 0.
  if (p.rows == 0 && !p.param_grads()) return Status();
  if (p.cols == 0) return Status();
  if (p.device.is_gpu()) return detail::run_norm_backward_gpu(p, stream);
  return detail::run_norm_backward_cpu(p);
}

}  // namespace

int64_t norm_backward_partials(int64_t rows) {
  if (rows <= 0) return 0;
  const int64_t by_rows = (rows + kMinRowsPerPartial - 1) / kMinRowsPerPartial;
  return by_rows < kMaxPartials ? by_rows : kMaxPartials;
}

int64_t norm_backward_workspace_size(int64_t rows, int64_t cols, bool weight_grad,
                                     bool bias_grad) {
  const int64_t sums = (weight_grad ? 1 : 0) + (bias_grad ? 1 : 0);
  if (sums == 0 || cols <= 0) return 0;
  return norm_backward_partials(rows) * cols * sums;
}

Status rms_norm_backward(const TensorView& grad_x, const TensorView& grad_weight,
                         const TensorView& grad_out, const TensorView& x, const TensorView& rstd,
                         const TensorView& weight, float weight_offset,
                         const TensorView& workspace, Stream stream) {
  return run({"rms_norm_backward", NormKind::kRms, &grad_x, &grad_weight, nullptr, &grad_out,
              nullptr, &x, nullptr, &rstd, &weight, weight_offset, &workspace},
             stream);
}

Status fused_add_rms_norm_backward(const TensorView& grad_h, const TensorView& grad_weight,
                                   const TensorView& grad_out,
                                   const TensorView& grad_residual_out,
                                   const TensorView& residual_out, const TensorView& rstd,
                                   const TensorView& weight, float weight_offset,
                                   const TensorView& workspace, Stream stream) {
  return run({"fused_add_rms_norm_backward", NormKind::kRms, &grad_h, &grad_weight, nullptr,
              &grad_out, &grad_residual_out, &residual_out, nullptr, &rstd, &weight,
              weight_offset, &workspace},
             stream);
}

Status layer_norm_backward(const TensorView& grad_x, const TensorView& grad_weight,
                           const TensorView& grad_bias, const TensorView& grad_out,
                           const TensorView& x, const TensorView& mean, const TensorView& rstd,
                           const TensorView& weight, const TensorView& workspace, Stream stream) {
  return run({"layer_norm_backward", NormKind::kLayer, &grad_x, &grad_weight, &grad_bias,
              &grad_out, nullptr, &x, &mean, &rstd, &weight, 0.0f, &workspace},
             stream);
}

Status fused_add_layer_norm_backward(const TensorView& grad_h, const TensorView& grad_weight,
                                     const TensorView& grad_bias, const TensorView& grad_out,
                                     const TensorView& grad_residual_out,
                                     const TensorView& residual_out, const TensorView& mean,
                                     const TensorView& rstd, const TensorView& weight,
                                     const TensorView& workspace, Stream stream) {
  return run({"fused_add_layer_norm_backward", NormKind::kLayer, &grad_h, &grad_weight,
              &grad_bias, &grad_out, &grad_residual_out, &residual_out, &mean, &rstd, &weight,
              0.0f, &workspace},
             stream);
}

}  // namespace fusekit
