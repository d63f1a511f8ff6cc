// CPU backend for the normalization family: plain loops over rows with float32 accumulation.
//
// It follows the GPU kernels' definition step for step (h rounded to the residual dtype before it
// is normalized, the optional cast-before-weight rounding, a two-pass mean/variance for
// LayerNorm), so CPU and GPU results agree to rounding. Sums use eight interleaved float
// accumulators combined in a fixed order: vectorizable, and deterministic for a given N. Rows are
// independent, so they are split across OpenMP threads when OpenMP is available.
//
// fp8 output: y is formed by exactly the float32 operations that give the plain output (one
// function, y_of, serves both), then quantized with the helpers of core/fp8.h, so the codes and
// scales are those of quantizing the plain op's float32 values.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/fp8.h"
#include "cpu/common/parallel.h"
#include "norm/norm_problem.h"

namespace fusekit::detail {
namespace {

constexpr int kLanes = 8;

inline float sum_fixed_order(const float* acc) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Row `row` of an fp8 out: codes of y (the row's float32 values, saturated to float32's range
// here in place), with the row's dynamic scale or the static scale's reciprocal.
template <class F>
void quantize_row(const NormProblem& p, int64_t row, float* y, float static_inverse) {
  const int64_t n = p.cols;
  float max_abs = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    y[j] = saturate_to_float_range(y[j]);
    max_abs = max_abs_accumulate(max_abs, y[j]);
  }
  float inverse = static_inverse;
  if (p.dynamic_scale != nullptr) {
    const float scale = fp8_row_scale<F>(max_abs, p.scale_upper_bound);
    p.dynamic_scale[row] = scale;
    inverse = fp8_inverse_row_scale(scale);
  }
  uint8_t* out = static_cast<uint8_t*>(p.out) + row * p.out_stride;
  for (int64_t j = 0; j < n; ++j) out[j] = fp8_quantize<F>(y[j], inverse);
}

template <typename TX, typename TW, typename TR>
void norm_rows(const NormProblem& p) {
  const int64_t n = p.cols;
  const bool layer = p.kind == NormKind::kLayer;
  const auto* weight = static_cast<const TW*>(p.weight);
  const auto* bias = static_cast<const TW*>(p.bias);
  // A static fp8 scale: one reciprocal per call (read here, on the host, for CPU tensors).
  const float static_inverse =
      p.out_fp8 && p.static_scale != nullptr ? fp8_inverse_scale(*p.static_scale) : 0.0f;

#if defined(_OPENMP)
#pragma omp parallel if (cpu_parallel_worthwhile(p.rows, p.rows * n))
#endif
  {
    std::vector<float> h(static_cast<size_t>(n));
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (int64_t row = 0; row < p.rows; ++row) {
      const TX* x = static_cast<const TX*>(p.x) + row * p.x_stride;
      if (p.add_residual) {
        const TR* r = static_cast<const TR*>(p.residual) + row * p.residual_stride;
        TR* r_out = static_cast<TR*>(p.residual_out) + row * p.residual_out_stride;
        for (int64_t j = 0; j < n; ++j) {
          const TR sum = from_float<TR>(to_float(x[j]) + to_float(r[j]));
          r_out[j] = sum;
          h[j] = to_float(sum);
        }
      } else {
        for (int64_t j = 0; j < n; ++j) h[j] = to_float(x[j]);
      }

      float acc[kLanes] = {};
      float mean = 0.0f;
      if (layer) {
        for (int64_t j = 0; j < n; ++j) acc[j % kLanes] += h[j];
        mean = sum_fixed_order(acc) / static_cast<float>(n);
        for (float& a : acc) a = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
          const float d = h[j] - mean;
          acc[j % kLanes] += d * d;
        }
      } else {
        for (int64_t j = 0; j < n; ++j) acc[j % kLanes] += h[j] * h[j];
      }
      const float rstd = 1.0f / std::sqrt(sum_fixed_order(acc) / static_cast<float>(n) + p.eps);

      // y, the float32 value of element j that the output is rounded (or quantized) from, in the
      // GPU kernels' order (output_values, gpu/norm/norm_group_io.cuh): RMSNorm weighs h before
      // it scales it, (h * w) * rstd, unless weight_after_cast.
      const auto y_of = [&](int64_t j) {
        const float w = weight != nullptr ? to_float(weight[j]) + p.weight_offset : 1.0f;
        if (!layer && !p.weight_after_cast) return (h[j] * w) * rstd;
        float v = (h[j] - mean) * rstd;
        if (p.weight_after_cast) v = to_float(from_float<TX>(v));
        if (weight != nullptr) v *= w;
        if (bias != nullptr) v += to_float(bias[j]);
        return v;
      };
      if (p.out_fp8) {
        for (int64_t j = 0; j < n; ++j) h[j] = y_of(j);  // y_of(j) reads h[j] alone
        dispatch_fp8_format(p.out_fp8_format, [&](auto format_tag) {
          quantize_row<decltype(format_tag)>(p, row, h.data(), static_inverse);
        });
      } else {
        TX* out = static_cast<TX*>(p.out) + row * p.out_stride;
        for (int64_t j = 0; j < n; ++j) out[j] = from_float<TX>(y_of(j));
      }
      if (p.rstd != nullptr) p.rstd[row] = rstd;
      if (p.mean != nullptr) p.mean[row] = mean;
    }
  }
}

}  // namespace

Status run_norm_cpu(const NormProblem& p) {
  dispatch_float_dtype(p.x_dtype, [&](auto x_tag) {
    using TX = typename decltype(x_tag)::type;
    dispatch_float_dtype(p.weight_dtype, [&](auto w_tag) {
      using TW = typename decltype(w_tag)::type;
      dispatch_float_dtype(p.source_dtype(), [&](auto r_tag) {
        using TR = typename decltype(r_tag)::type;
        norm_rows<TX, TW, TR>(p);
      });
    });
  });
  return Status();
}

}  // namespace fusekit::detail
