// CPU backend for the normalization family: plain loops over rows with float32 accumulation.
//
// It follows the GPU kernels' definition step for step (h rounded to the residual dtype before it
// is normalized, the optional cast-before-weight rounding, a two-pass mean/variance for
// LayerNorm), so CPU and GPU results agree to rounding. Sums use eight interleaved float
// accumulators combined in a fixed order: vectorizable, and deterministic for a given N. Rows are
// independent, so they are split across OpenMP threads when OpenMP is available; each row runs
// compiled for AVX2 + FMA where the CPU has them (cpu/common/cpu_isa.h), with the same bits, in
// loops written to vectorize (no branch in a loop's body).
//
// fp8 output: y is formed by exactly the float32 operations that give the plain output (one
// function, y_of, serves both), then quantized with the helpers of core/fp8.h, so the codes and
// scales are those of quantizing the plain op's float32 values.
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/fp8.h"
#include "cpu/common/cpu_isa.h"
#include "cpu/common/fp8_rows.h"
#include "cpu/common/parallel.h"
#include "norm/norm_problem.h"

namespace fusekit::detail {
namespace {

constexpr int kLanes = 8;

inline float sum_fixed_order(const float* acc) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// acc[j % kLanes] = the sum of term(h[j]) over every j, in order from 0, written as whole blocks of
// kLanes (which vectorize: each lane's sum is one vector lane) and the tail: each lane adds the
// same terms in the same order as an element-by-element loop would. The sums run in a local
// array (acc might alias h as far as the compiler knows) and are copied out at the end.
template <typename Term>
void lane_sums(const float* h, int64_t n, float* acc, const Term& term) {
  float lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += term(h[j + l]);
  }
  for (; j < n; ++j) lanes[j % kLanes] += term(h[j]);
  for (int l = 0; l < kLanes; ++l) acc[l] = lanes[l];
}

// Calls f(std::bool_constant<a>{}, std::bool_constant<b>{}, std::bool_constant<c>{}): the output
// loops' per-call choices as compile-time constants, so that each loop body has no branch.
template <typename F>
void with_flags(bool a, bool b, bool c, const F& f) {
  auto third = [&](auto a_c, auto b_c) {
    if (c) {
      f(a_c, b_c, std::true_type{});
    } else {
      f(a_c, b_c, std::false_type{});
    }
  };
  auto second = [&](auto a_c) {
    if (b) {
      third(a_c, std::true_type{});
    } else {
      third(a_c, std::false_type{});
    }
  };
  if (a) {
    second(std::true_type{});
  } else {
    second(std::false_type{});
  }
}

// A row's work in four stages, each its own function so that each is compiled for only the types
// it depends on (a call's stages are picked once, below): h from x and the residual (x's and the
// residual's dtypes), the statistics (none), the outputs (x's and the weight's), and for fp8
// outputs the codes (the format). Each stage's loops run through for_this_cpu.

// h = x + residual rounded to the residual's dtype (written to residual_out too), or x.
template <typename TX, typename TR>
void load_row(const NormProblem& p, int64_t row, float* h) {
  const int64_t n = p.cols;
  const TX* x = static_cast<const TX*>(p.x) + row * p.x_stride;
  if (p.add_residual) {
    const TR* r = static_cast<const TR*>(p.residual) + row * p.residual_stride;
    TR* r_out = static_cast<TR*>(p.residual_out) + row * p.residual_out_stride;
    for_this_cpu([&] {
      for (int64_t j = 0; j < n; ++j) {
        // The sum rounded to the residual's dtype, as a float; converting it back is exact. (A
        // TR value kept across both stores stopped the loop from vectorizing.)
        const float sum = to_float(from_float<TR>(to_float(x[j]) + to_float(r[j])));
        h[j] = sum;
        r_out[j] = from_float<TR>(sum);
      }
    });
  } else {
    for_this_cpu([&] {
      for (int64_t j = 0; j < n; ++j) h[j] = to_float(x[j]);
    });
  }
}

struct RowStatistics {
  float mean = 0.0f;  // 0 for RMSNorm
  float rstd = 0.0f;
};

RowStatistics row_statistics(const NormProblem& p, const float* h) {
  const int64_t n = p.cols;
  RowStatistics s;
  float acc[kLanes];
  for_this_cpu([&] {
    if (p.kind == NormKind::kLayer) {
      lane_sums(h, n, acc, [](float v) { return v; });
      s.mean = sum_fixed_order(acc) / static_cast<float>(n);
      const float mean = s.mean;
      lane_sums(h, n, acc, [mean](float v) {
        const float d = v - mean;
        return d * d;
      });
    } else {
      lane_sums(h, n, acc, [](float v) { return v * v; });
    }
  });
  s.rstd = 1.0f / std::sqrt(sum_fixed_order(acc) / static_cast<float>(n) + p.eps);
  return s;
}

// The outputs of y, the float32 value of element j that the output is rounded (or quantized) from,
// in the GPU kernels' order (output_values, gpu/norm/norm_group_io.cuh): RMSNorm weighs h before
// it scales it, (h * w) * rstd, unless weight_after_cast; the weight without one is 1. For fp8
// outputs y goes back into h (y_of(j) reads h[j] alone) for quantize_row.
template <typename TX, typename TW>
void write_row(const NormProblem& p, int64_t row, float* h, RowStatistics s) {
  const int64_t n = p.cols;
  const bool layer = p.kind == NormKind::kLayer;
  const auto* weight = static_cast<const TW*>(p.weight);
  const auto* bias = static_cast<const TW*>(p.bias);
  const float offset = p.weight_offset;
  const float mean = s.mean;
  const float rstd = s.rstd;
  TX* out = p.out_fp8 ? nullptr : static_cast<TX*>(p.out) + row * p.out_stride;
  const auto write = [&](const auto& y_of) {
    for_this_cpu([&] {
      if (out == nullptr) {
        for (int64_t j = 0; j < n; ++j) h[j] = y_of(j);
      } else {
        for (int64_t j = 0; j < n; ++j) out[j] = from_float<TX>(y_of(j));
      }
    });
  };
  if (!layer && !p.weight_after_cast && weight != nullptr) {
    write([&](int64_t j) { return (h[j] * (to_float(weight[j]) + offset)) * rstd; });
  } else if (!layer && !p.weight_after_cast) {
    write([&](int64_t j) { return (h[j] * 1.0f) * rstd; });
  } else {
    with_flags(p.weight_after_cast, weight != nullptr, bias != nullptr,
               [&](auto after_cast, auto weighted, auto biased) {
                 write([&](int64_t j) {
                   float v = (h[j] - mean) * rstd;
                   if constexpr (after_cast) v = to_float(from_float<TX>(v));
                   if constexpr (weighted) v *= to_float(weight[j]) + offset;
                   if constexpr (biased) v += to_float(bias[j]);
                   return v;
                 });
               });
  }
}

// Row `row` of an fp8 out: codes of y (the row's float32 values, saturated to float32's range
// here in place), with the row's dynamic scale or the static scale's reciprocal.
template <class F>
void quantize_row(const NormProblem& p, int64_t row, float* y, float static_inverse) {
  const int64_t n = p.cols;
  uint8_t* out = static_cast<uint8_t*>(p.out) + row * p.out_stride;
  float max_abs = 0.0f;
  for_this_cpu([&] {
    for (int64_t j = 0; j < n; ++j) y[j] = saturate_to_float_range(y[j]);
    max_abs = row_max_abs(y, n);
  });
  float inverse = static_inverse;
  if (p.dynamic_scale != nullptr) {
    const float scale = fp8_row_scale<F>(max_abs, p.scale_upper_bound);
    p.dynamic_scale[row] = scale;
    inverse = fp8_inverse_row_scale(scale);
  }
  for_this_cpu([&] { quantize_row_codes<F>(y, n, inverse, out); });
}

using LoadRow = void (*)(const NormProblem&, int64_t, float*);
using WriteRow = void (*)(const NormProblem&, int64_t, float*, RowStatistics);
using QuantizeRow = void (*)(const NormProblem&, int64_t, float*, float);

void norm_rows(const NormProblem& p, LoadRow load, WriteRow write, QuantizeRow quantize) {
  const int64_t n = p.cols;
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
      load(p, row, h.data());
      const RowStatistics s = row_statistics(p, h.data());
      write(p, row, h.data(), s);
      if (quantize != nullptr) quantize(p, row, h.data(), static_inverse);
      if (p.rstd != nullptr) p.rstd[row] = s.rstd;
      if (p.mean != nullptr) p.mean[row] = s.mean;
    }
  }
}

}  // namespace

Status run_norm_cpu(const NormProblem& p) {
  LoadRow load = nullptr;
  WriteRow write = nullptr;
  QuantizeRow quantize = nullptr;
  dispatch_float_dtype(p.x_dtype, [&](auto x_tag) {
    using TX = typename decltype(x_tag)::type;
    dispatch_float_dtype(p.source_dtype(), [&](auto r_tag) {
      load = &load_row<TX, typename decltype(r_tag)::type>;
    });
    dispatch_float_dtype(p.weight_dtype, [&](auto w_tag) {
      write = &write_row<TX, typename decltype(w_tag)::type>;
    });
  });
  if (p.out_fp8) {
    dispatch_fp8_format(p.out_fp8_format, [&](auto format_tag) {
      quantize = &quantize_row<decltype(format_tag)>;
    });
  }
  norm_rows(p, load, write, quantize);
  return Status();
}

}  // namespace fusekit::detail
