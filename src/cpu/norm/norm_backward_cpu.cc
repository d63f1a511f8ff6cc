// CPU backend for the backward passes of the normalization family (fusekit/norm_backward.h): plain
// loops with float32 accumulation, following the GPU kernels' structure.
//
// Rows are split into partial ranges; each range (one OpenMP work item) computes its rows' input
// gradients and sums grad_out * xhat and grad_out into its own workspace row, in row order; a
// second pass adds the workspace rows in partial order. So the parameter gradients are the same
// whatever the thread count, with the GPU's two-pass structure. The ranges are longer than the
// GPU's (cpu_partials): a CPU has tens of threads, not thousands, and every workspace row is
// written and read back (and its pages first touched) once per call. Row sums use interleaved
// accumulators combined in a fixed order (cpu/common/lane_sum.h), as the forward CPU backend
// does. As there, each row's loops run compiled for AVX2 + FMA where the CPU has them
// (cpu/common/cpu_isa.h), with the same bits, written to vectorize; the weight is converted to
// float32 once per call, and rows from and to 16-bit dtypes a run at a time
// (cpu/common/row_convert.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype_dispatch.h"
#include "cpu/common/cpu_isa.h"
#include "cpu/common/lane_sum.h"
#include "cpu/common/row_convert.h"
#include "norm/norm_backward_problem.h"

namespace fusekit::detail {
namespace {

// TG: grad_out; TH: x, grad_x and grad_extra. `weight`: the call's weight plus its offset, as
// float32 (made once per call), or null for none.
template <typename TG, typename TH>
void backward_rows(const NormBackwardProblem& p, const float* weight) {
  const int64_t n = p.cols;
  const bool layer = p.kind == NormKind::kLayer;
  const int64_t ws_row = p.workspace_row();
  const float inv_n = 1.0f / static_cast<float>(n);

#if defined(_OPENMP)
#pragma omp parallel
#endif
  {
    // A row's xhat, grad_out and g = grad_out * weight as float32.
    std::vector<float> xhat(static_cast<size_t>(n)), dy(static_cast<size_t>(n)),
        g(static_cast<size_t>(n));
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (int64_t part = 0; part < p.partials; ++part) {
      float* acc_w = nullptr;
      float* acc_b = nullptr;
      if (p.grad_weight != nullptr) acc_w = p.workspace + part * ws_row + p.weight_offset_in_row();
      if (p.grad_bias != nullptr) acc_b = p.workspace + part * ws_row + p.bias_offset_in_row();
      for (float* acc : {acc_w, acc_b}) {
        if (acc != nullptr) std::fill(acc, acc + n, 0.0f);
      }
      for (int64_t row = p.first_row(part); row < p.first_row(part + 1); ++row) {
        const TG* dy_row = static_cast<const TG*>(p.grad_out) + row * p.grad_out_stride;
        const TH* h_row = static_cast<const TH*>(p.x) + row * p.x_stride;
        const TH* extra = p.grad_extra != nullptr
                              ? static_cast<const TH*>(p.grad_extra) + row * p.grad_extra_stride
                              : nullptr;
        TH* dx = static_cast<TH*>(p.grad_x) + row * p.grad_x_stride;
        const float rstd = p.rstd[row];
        const float mean = layer ? p.mean[row] : 0.0f;
        for_this_cpu([&] {
          float* xh = xhat.data();
          float* d = dy.data();
          float* gw = g.data();
          widen_row(h_row, xh, n);
          widen_row(dy_row, d, n);
          for (int64_t j = 0; j < n; ++j) xh[j] = (xh[j] - mean) * rstd;
          if (weight != nullptr) {
            for (int64_t j = 0; j < n; ++j) gw[j] = d[j] * weight[j];
          } else {
            for (int64_t j = 0; j < n; ++j) gw[j] = d[j] * 1.0f;
          }
          const float mean_gx = lane_sum(n, [&](int64_t j) { return gw[j] * xh[j]; }) * inv_n;
          const float mean_g = layer ? lane_sum(n, [&](int64_t j) { return gw[j]; }) * inv_n
                                     : 0.0f;
          for_each_run<TH>(n, [&](int64_t j0, int64_t count) {
            RunWriter<TH> dx_run(dx + j0, count);
            const auto dx_of = [&](int64_t j) { return rstd * (gw[j] - mean_g - xh[j] * mean_gx); };
            if (extra != nullptr) {
              const RunReader<TH> extra_run(extra + j0, count);
              for (int64_t k = 0; k < count; ++k) dx_run.set(k, dx_of(j0 + k) + extra_run[k]);
            } else {
              for (int64_t k = 0; k < count; ++k) dx_run.set(k, dx_of(j0 + k));
            }
            dx_run.finish();
          });
          if (acc_w != nullptr) {
            for (int64_t j = 0; j < n; ++j) acc_w[j] += d[j] * xh[j];
          }
          if (acc_b != nullptr) {
            for (int64_t j = 0; j < n; ++j) acc_b[j] += d[j];
          }
        });
      }
    }
  }
}

// grad_weight / grad_bias = the workspace rows added in partial order: each column's sum starts
// at 0 and adds partial 0, 1, ... in turn. The columns go a chunk at a time, each chunk's sums in
// a local array while the partials stream through it row by row (the workspace is partials x 2N
// floats, 16 MB at M = 2048, N = 4096: read down its columns, every element is a cache miss).
template <typename TP>
void reduce_partials(const NormBackwardProblem& p) {
  constexpr int64_t kColumns = 1024;  // a chunk's sums: 4 KB, in L1 with the rows' segments
  const int64_t n = p.cols;
  const int64_t ws_row = p.workspace_row();
  const int64_t chunks = (n + kColumns - 1) / kColumns;
  void* outs[2] = {p.grad_weight, p.grad_bias};
  const int64_t offsets[2] = {p.weight_offset_in_row(), p.bias_offset_in_row()};
  for (int i = 0; i < 2; ++i) {
    if (outs[i] == nullptr) continue;
    TP* out = static_cast<TP*>(outs[i]);
    const float* sums_of_partial_0 = p.workspace + offsets[i];
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const int64_t j0 = chunk * kColumns;
      const int64_t count = std::min(kColumns, n - j0);
      for_this_cpu([&] {
        float sum[kColumns] = {};
        for (int64_t part = 0; part < p.partials; ++part) {
          const float* partial = sums_of_partial_0 + part * ws_row + j0;
          for (int64_t k = 0; k < count; ++k) sum[k] += partial[k];
        }
        narrow_row(sum, out + j0, count);
      });
    }
  }
}

// ceil(M / kCpuRowsPerPartial) partial ranges, about 32 rows each (so a range's workspace row is
// about a 32nd of its rows' inputs), never more than the GPU's count, which sized the workspace.
// A function of M alone, as the results' determinism requires.
constexpr int64_t kCpuRowsPerPartial = 32;

int64_t cpu_partials(const NormBackwardProblem& p) {
  return std::min(p.partials, (p.rows + kCpuRowsPerPartial - 1) / kCpuRowsPerPartial);
}

}  // namespace

Status run_norm_backward_cpu(const NormBackwardProblem& problem) {
  NormBackwardProblem p = problem;
  p.partials = cpu_partials(problem);
  // The weight plus its offset, converted once for every row.
  std::vector<float> weight;
  if (p.weight != nullptr) {
    weight.resize(static_cast<size_t>(p.cols));
    dispatch_float_dtype(p.weight_dtype, [&](auto w_tag) {
      widen_row(static_cast<const typename decltype(w_tag)::type*>(p.weight), weight.data(),
                p.cols);
    });
    for (float& w : weight) w += p.weight_offset;
  }
  dispatch_float_dtype(p.grad_out_dtype, [&](auto g_tag) {
    using TG = typename decltype(g_tag)::type;
    dispatch_float_dtype(p.x_dtype, [&](auto h_tag) {
      backward_rows<TG, typename decltype(h_tag)::type>(p, weight.empty() ? nullptr
                                                                          : weight.data());
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
