// Backward test cases: setup, run, float64 reference, and checks. See norm_backward_cases.h.
#include "norm_backward_cases.h"

#include <cmath>
#include <sstream>
#include <vector>

namespace fusekit::testing {

const char* backward_op_name(BackwardOp op) {
  switch (op) {
    case BackwardOp::kRms: return "rms_norm_backward";
    case BackwardOp::kAddRms: return "fused_add_rms_norm_backward";
    case BackwardOp::kLayer: return "layer_norm_backward";
    case BackwardOp::kAddLayer: return "fused_add_layer_norm_backward";
  }
  return "?";
}
bool backward_is_layer(BackwardOp op) {
  return op == BackwardOp::kLayer || op == BackwardOp::kAddLayer;
}
bool backward_is_add(BackwardOp op) {
  return op == BackwardOp::kAddRms || op == BackwardOp::kAddLayer;
}

std::string BackwardCase::name() const {
  std::ostringstream s;
  s << backward_op_name(op) << " g=" << dtype_name(grad_dtype) << " x=" << dtype_name(x_dtype)
    << " w=" << dtype_name(weight_dtype) << " M=" << rows << " N=" << cols;
  if (pad) s << " pad=" << pad;
  if (offset) s << " offset=" << offset;
  if (!has_weight) s << " no-weight";
  s << " grads=" << (weight_grad ? "w" : "") << (bias_grad && backward_is_layer(op) ? "b" : "");
  if (weight_offset != 0.0f) s << " weight_offset=" << weight_offset;
  return s.str();
}

namespace {

constexpr double kEps = 1e-5;

// Mean (0 for RMSNorm) and rstd of row r of h, in float64.
void row_stats(const BackwardCase& c, const RowBuffer& x, int64_t r, double* mean, double* rstd) {
  const int64_t n = c.cols;
  double mu = 0.0;
  if (backward_is_layer(c.op)) {
    for (int64_t j = 0; j < n; ++j) mu += x.get(r, j);
    mu /= static_cast<double>(n);
  }
  double var = 0.0;
  for (int64_t j = 0; j < n; ++j) var += (x.get(r, j) - mu) * (x.get(r, j) - mu);
  *mean = mu;
  *rstd = 1.0 / std::sqrt(var / static_cast<double>(n) + kEps);
}

// Random values like RowBuffer::fill_random, but row r drawn from its own generator: a row's
// inputs are then the same whatever the number of rows (for batch-invariance checks).
void fill_by_row(RowBuffer& b, uint32_t seed, double scale, double mean) {
  for (int64_t r = 0; r < b.rows(); ++r) {
    std::mt19937 rng(seed + 7919u * static_cast<uint32_t>(r));
    for (int64_t j = 0; j < b.cols(); ++j) {
      const double u = static_cast<double>(rng()) * (1.0 / 4294967296.0);
      const double w = static_cast<double>(rng()) * (1.0 / 4294967296.0);
      double v = (u + w - 1.0) * 2.0;
      if (std::fabs(v) < 1e-3) v = v < 0 ? -1e-3 : 1e-3;
      b.set(r, j, mean + scale * v);
    }
  }
}

double weight_at(const BackwardCase& c, const BackwardRun& run, int64_t j) {
  return c.has_weight ? run.weight.get(0, j) + c.weight_offset : 1.0;
}

}  // namespace

BackwardRun run_backward_case(const BackwardCase& c, Backend backend) {
  const bool layer = backward_is_layer(c.op);
  const bool add = backward_is_add(c.op);
  const int64_t m = c.rows, n = c.cols;
  BackwardRun run;
  run.grad_out = RowBuffer(backend, c.grad_dtype, m, n, n + c.pad, c.offset);
  run.x = RowBuffer(backend, c.x_dtype, m, n, n + 2 * c.pad, c.offset);
  run.grad_x = RowBuffer(backend, c.x_dtype, m, n, n + 3 * c.pad, c.offset);
  if (add) run.grad_extra = RowBuffer(backend, c.x_dtype, m, n, n + c.pad);
  run.rstd = RowBuffer(backend, DType::kFloat32, 1, m);
  if (layer) run.mean = RowBuffer(backend, DType::kFloat32, 1, m);
  if (c.has_weight) run.weight = RowBuffer(backend, c.weight_dtype, 1, n);
  const DType param_dtype = c.has_weight ? c.weight_dtype : c.grad_dtype;
  const bool want_w = c.weight_grad && c.has_weight;
  const bool want_b = c.bias_grad && layer;
  if (want_w) run.grad_weight = RowBuffer(backend, param_dtype, 1, n);
  if (want_b) run.grad_bias = RowBuffer(backend, param_dtype, 1, n);
  const int64_t ws = norm_backward_workspace_size(m, n, want_w, want_b);
  if (ws > 0) run.workspace = RowBuffer(backend, DType::kFloat32, 1, ws);

  fill_by_row(run.grad_out, c.seed, 1.0, 0.0);
  fill_by_row(run.x, c.seed + 1, 1.5, layer ? 0.5 : 0.0);
  if (add) fill_by_row(run.grad_extra, c.seed + 2, 0.5, 0.0);
  if (c.has_weight) fill_by_row(run.weight, c.seed + 3, 0.5, c.weight_offset != 0.0f ? 0.0 : 1.0);
  for (int64_t r = 0; r < m; ++r) {
    double mean, rstd;
    row_stats(c, run.x, r, &mean, &rstd);
    run.rstd.set(0, r, rstd);
    if (layer) run.mean.set(0, r, mean);
  }
  for (RowBuffer* b : {&run.grad_out, &run.x, &run.grad_extra, &run.rstd, &run.mean, &run.weight}) {
    b->upload();
  }

  const TensorView none;
  auto opt = [&](const RowBuffer& b, bool on) { return on ? b.view_1d() : none; };
  const TensorView gw = opt(run.grad_weight, want_w);
  const TensorView gb = opt(run.grad_bias, want_b);
  const TensorView w = opt(run.weight, c.has_weight);
  const TensorView wsv = opt(run.workspace, ws > 0);
  switch (c.op) {
    case BackwardOp::kRms:
      run.status = rms_norm_backward(run.grad_x.view(), gw, run.grad_out.view(), run.x.view(),
                                     run.rstd.view_1d(), w, c.weight_offset, wsv);
      break;
    case BackwardOp::kAddRms:
      run.status = fused_add_rms_norm_backward(run.grad_x.view(), gw, run.grad_out.view(),
                                               run.grad_extra.view(), run.x.view(),
                                               run.rstd.view_1d(), w, c.weight_offset, wsv);
      break;
    case BackwardOp::kLayer:
      run.status = layer_norm_backward(run.grad_x.view(), gw, gb, run.grad_out.view(),
                                       run.x.view(), run.mean.view_1d(), run.rstd.view_1d(), w,
                                       wsv);
      break;
    case BackwardOp::kAddLayer:
      run.status = fused_add_layer_norm_backward(
          run.grad_x.view(), gw, gb, run.grad_out.view(), run.grad_extra.view(), run.x.view(),
          run.mean.view_1d(), run.rstd.view_1d(), w, wsv);
      break;
  }
  if (backend == Backend::kGPU) {
    const Status s = gpu_synchronize(0);
    if (run.status.ok() && !s.ok()) run.status = s;
  }
  for (RowBuffer* b : {&run.grad_x, &run.grad_weight, &run.grad_bias, &run.workspace}) {
    b->download();
  }
  return run;
}

::testing::AssertionResult check_backward_run(const BackwardCase& c, const BackwardRun& run) {
  if (!run.status.ok()) return ::testing::AssertionFailure() << run.status.to_string();
  const bool layer = backward_is_layer(c.op);
  const bool add = backward_is_add(c.op);
  const int64_t m = c.rows, n = c.cols;
  if (!run.grad_x.padding_untouched()) {
    return ::testing::AssertionFailure() << "grad_x: row padding was written";
  }

  // grad_x: rows one by one. The absolute term of the tolerance scales with the row's terms (the
  // result is a difference of terms of size rstd * |g|, and float32 sums carry their error).
  const Tolerance tol = output_tolerance(c.x_dtype);
  std::vector<double> xhat(static_cast<size_t>(n)), g(static_cast<size_t>(n));
  std::vector<double> sum_w(static_cast<size_t>(n), 0.0), abs_w(static_cast<size_t>(n), 0.0);
  std::vector<double> sum_b(static_cast<size_t>(n), 0.0), abs_b(static_cast<size_t>(n), 0.0);
  for (int64_t r = 0; r < m; ++r) {
    double mean, rstd;
    row_stats(c, run.x, r, &mean, &rstd);
    double mean_gx = 0.0, mean_g = 0.0, scale = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const double dy = run.grad_out.get(r, j);
      xhat[j] = (run.x.get(r, j) - mean) * rstd;
      g[j] = dy * weight_at(c, run, j);
      mean_gx += g[j] * xhat[j];
      mean_g += g[j];
      scale = std::max(scale, std::fabs(g[j]) * rstd);
      sum_w[j] += dy * xhat[j];
      abs_w[j] += std::fabs(dy * xhat[j]);
      sum_b[j] += dy;
      abs_b[j] += std::fabs(dy);
    }
    mean_gx /= static_cast<double>(n);
    mean_g = layer ? mean_g / static_cast<double>(n) : 0.0;
    for (int64_t j = 0; j < n; ++j) {
      double ref = rstd * (g[j] - mean_g - xhat[j] * mean_gx);
      double row_scale = scale;
      if (add) {
        ref += run.grad_extra.get(r, j);
        row_scale += std::fabs(run.grad_extra.get(r, j));
      }
      const double got = run.grad_x.get(r, j);
      const double limit = tol.rel * std::fabs(ref) + 1e-5 * row_scale + tol.abs;
      if (!(std::fabs(got - ref) <= limit)) {
        return ::testing::AssertionFailure()
               << "grad_x[" << r << ", " << j << "] = " << got << ", expected " << ref
               << " (limit " << limit << ")";
      }
    }
  }

  // Parameter gradients: float32 sums over M rows, rounded once to the parameter dtype.
  const RowBuffer* outs[2] = {&run.grad_weight, &run.grad_bias};
  const std::vector<double>* refs[2] = {&sum_w, &sum_b};
  const std::vector<double>* abss[2] = {&abs_w, &abs_b};
  const bool wanted[2] = {c.weight_grad && c.has_weight, c.bias_grad && layer};
  const char* names[2] = {"grad_weight", "grad_bias"};
  for (int i = 0; i < 2; ++i) {
    if (!wanted[i]) continue;
    const Tolerance ptol = output_tolerance(outs[i]->dtype());
    for (int64_t j = 0; j < n; ++j) {
      const double ref = (*refs[i])[j];
      const double got = outs[i]->get(0, j);
      const double limit = ptol.rel * std::fabs(ref) + 4e-5 * (*abss[i])[j] + 1e-6;
      if (!(std::fabs(got - ref) <= limit)) {
        return ::testing::AssertionFailure() << names[i] << "[" << j << "] = " << got
                                             << ", expected " << ref << " (limit " << limit
                                             << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace fusekit::testing
