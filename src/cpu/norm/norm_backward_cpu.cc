// CPU backend for the backward passes of the normalization family (fusekit/norm_backward.h): plain
// loops with float32 accumulation, following the GPU kernels' structure.
//
// Rows are split into the problem's partial ranges; each range (one OpenMP work item) computes
// its rows' input gradients and sums grad_out * xhat and grad_out into its own workspace row, in
// row order; a second pass adds the workspace rows in partial order. So the parameter gradients
// are the same whatever the thread count, and match the GPU's two-pass structure. Row sums use
// eight interleaved accumulators combined in a fixed order, as the forward CPU backend does.
#include <cmath>
#include <vector>

#include "core/dtype_dispatch.h"
#include "norm/norm_backward_problem.h"

namespace fusekit::detail {
namespace {

constexpr int kLanes = 8;

inline float sum_fixed_order(const float* acc) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// TG: grad_out; TH: x, grad_x and grad_extra; TW: weight.
template <typename TG, typename TH, typename TW>
void backward_rows(const NormBackwardProblem& p) {
  const int64_t n = p.cols;
  const bool layer = p.kind == NormKind::kLayer;
  const auto* weight = static_cast<const TW*>(p.weight);
  const int64_t ws_row = p.workspace_row();
  const float inv_n = 1.0f / static_cast<float>(n);

#if defined(_OPENMP)
#pragma omp parallel
#endif
  {
    std::vector<float> xhat(static_cast<size_t>(n)), g(static_cast<size_t>(n));
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (int64_t part = 0; part < p.partials; ++part) {
      float* acc_w = nullptr;
      float* acc_b = nullptr;
      if (p.grad_weight != nullptr) acc_w = p.workspace + part * ws_row + p.weight_offset_in_row();
      if (p.grad_bias != nullptr) acc_b = p.workspace + part * ws_row + p.bias_offset_in_row();
      for (int64_t j = 0; j < n; ++j) {
        if (acc_w != nullptr) acc_w[j] = 0.0f;
        if (acc_b != nullptr) acc_b[j] = 0.0f;
      }
      for (int64_t row = p.first_row(part); row < p.first_row(part + 1); ++row) {
        const TG* dy = static_cast<const TG*>(p.grad_out) + row * p.grad_out_stride;
        const TH* h = static_cast<const TH*>(p.x) + row * p.x_stride;
        TH* dx = static_cast<TH*>(p.grad_x) + row * p.grad_x_stride;
        const float rstd = p.rstd[row];
        const float mean = layer ? p.mean[row] : 0.0f;
        float sum_gx[kLanes] = {};
        float sum_g[kLanes] = {};
        for (int64_t j = 0; j < n; ++j) {
          const float w = weight != nullptr ? to_float(weight[j]) + p.weight_offset : 1.0f;
          xhat[j] = (to_float(h[j]) - mean) * rstd;
          g[j] = to_float(dy[j]) * w;
          sum_gx[j % kLanes] += g[j] * xhat[j];
          sum_g[j % kLanes] += g[j];
        }
        const float mean_gx = sum_fixed_order(sum_gx) * inv_n;
        const float mean_g = layer ? sum_fixed_order(sum_g) * inv_n : 0.0f;
        const TH* extra = p.grad_extra != nullptr
                              ? static_cast<const TH*>(p.grad_extra) + row * p.grad_extra_stride
                              : nullptr;
        for (int64_t j = 0; j < n; ++j) {
          float d = rstd * (g[j] - mean_g - xhat[j] * mean_gx);
          if (extra != nullptr) d += to_float(extra[j]);
          dx[j] = from_float<TH>(d);
          if (acc_w != nullptr) acc_w[j] += to_float(dy[j]) * xhat[j];
          if (acc_b != nullptr) acc_b[j] += to_float(dy[j]);
        }
      }
    }
  }
}

// grad_weight / grad_bias = the workspace rows added in partial order.
template <typename TP>
void reduce_partials(const NormBackwardProblem& p) {
  const int64_t n = p.cols;
  const int64_t ws_row = p.workspace_row();
  void* outs[2] = {p.grad_weight, p.grad_bias};
  const int64_t offsets[2] = {p.weight_offset_in_row(), p.bias_offset_in_row()};
  for (int i = 0; i < 2; ++i) {
    if (outs[i] == nullptr) continue;
    TP* out = static_cast<TP*>(outs[i]);
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int64_t part = 0; part < p.partials; ++part) {
        sum += p.workspace[part * ws_row + offsets[i] + j];
      }
      out[j] = from_float<TP>(sum);
    }
  }
}

}  // namespace

Status run_norm_backward_cpu(const NormBackwardProblem& p) {
  dispatch_float_dtype(p.grad_out_dtype, [&](auto g_tag) {
    using TG = typename decltype(g_tag)::type;
    dispatch_float_dtype(p.x_dtype, [&](auto h_tag) {
      using TH = typename decltype(h_tag)::type;
      dispatch_float_dtype(p.weight_dtype, [&](auto w_tag) {
        using TW = typename decltype(w_tag)::type;
        backward_rows<TG, TH, TW>(p);
      });
    });
  });
  if (p.param_grads()) {
    dispatch_float_dtype(p.param_grad_dtype, [&](auto p_tag) {
      reduce_partials<typename decltype(p_tag)::type>(p);
    });
  }
  return Status();
}

}  // namespace fusekit::detail
