// CPU backend for the normalization family: plain loops over rows with float32 accumulation.
//
// It follows the GPU kernels' definition step for step (h rounded to the residual dtype before it
// is normalized, the optional cast-before-weight rounding, a two-pass mean/variance for
// LayerNorm), so CPU and GPU results agree to rounding. Sums use 32 interleaved float
// accumulators combined in a fixed order: vectorizable, and deterministic for a given N. Rows are
// independent, so they are split across OpenMP threads when OpenMP is available; each row runs
// compiled for AVX2 + FMA where the CPU has them (cpu/common/cpu_isa.h), with the same bits, in
// loops written to vectorize (no branch in a loop's body).
//
// fp8 output: y is formed by exactly the float32 operations that give the plain output (the same
// loops, write_row's, serve both), then quantized with the helpers of core/fp8.h, so the codes and
// scales are those of quantizing the plain op's float32 values.
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "core/dtype_dispatch.h"
#include "core/fp8.h"
#include "cpu/common/cpu_isa.h"
#include "cpu/common/fp8_rows.h"
#include "cpu/common/lane_sum.h"
#include "cpu/common/parallel.h"
#include "cpu/common/row_convert.h"
#include "norm/norm_problem.h"

namespace fusekit::detail {
namespace {

// Calls f(std::bool_constant<a>{}, std::bool_constant<b>{}): the output loops' per-call choices
// as compile-time constants, so that each loop body has no branch.
template <typename F>
void with_flags(bool a, bool b, const F& f) {
  const auto second = [&](auto a_c) {
    if (b) {
      f(a_c, std::true_type{});
    } else {
      f(a_c, std::false_type{});
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
// residual's dtypes), the statistics, the outputs (x's; the weight and bias are float32 by then,
// RowConstants), and for fp8 outputs the codes (the format). Each stage's loops run through
// for_this_cpu, and convert to and from 16-bit dtypes a run at a time (cpu/common/row_convert.h).
//
// Where h is x itself (no fused add) and x's dtype converts inline (bf16, float32), the
// statistics and the outputs read x where it lies (RowValues), with no copy of the row into a
// float32 buffer to write and read back: at [2048, 4096] the norms took 0.8-0.95x the time in
// bf16 and 0.68-0.82x in float32 (bench/NOTES.md, "The CPU backend: rows read where they lie").
// fp16 rows are widened once into the buffer (F16C, a run at a time), not in every pass.

// A row's values h as float32, read from `values`: the float32 buffer that load_row filled, or
// x's row where h is x and x's dtype converts inline (converted where each element is used).
template <typename T>
struct RowValues {
  const T* values;
  float operator()(int64_t j) const { return to_float(values[j]); }
};

template <typename TX, bool kDirect>
auto row_values(const NormProblem& p, int64_t row, const float* h) {
  if constexpr (kDirect) {
    return RowValues<TX>{static_cast<const TX*>(p.x) +
                         p.row_offset(row, p.x_stride, p.x_run_skip)};
  } else {
    return RowValues<float>{h};
  }
}

// h = x + residual rounded to the residual's dtype (written to residual_out too), or x.
template <typename TX, typename TR>
void load_row(const NormProblem& p, int64_t row, float* h) {
  const int64_t n = p.cols;
  const TX* x = static_cast<const TX*>(p.x) + p.row_offset(row, p.x_stride, p.x_run_skip);
  const TR* r = p.add_residual ? static_cast<const TR*>(p.residual) + row * p.residual_stride
                               : nullptr;
  TR* r_out = p.add_residual
                  ? static_cast<TR*>(p.residual_out) + row * p.residual_out_stride
                  : nullptr;
  for_this_cpu([&] {
    if (r == nullptr) return widen_row(x, h, n);
    for_each_run<TX, TR>(n, [&](int64_t j0, int64_t count) {
      const RunReader<TX> x_run(x + j0, count);
      const RunReader<TR> r_run(r + j0, count);
      RunWriter<TR> sum(r_out + j0, count);
      for (int64_t k = 0; k < count; ++k) {
        const float v = x_run[k] + r_run[k];
        h[j0 + k] = v;
        sum.set(k, v);
      }
      sum.finish();
      // h: the sum as stored, rounded to the residual's dtype.
      if constexpr (!std::is_same_v<TR, float>) widen_row(r_out + j0, h + j0, count);
    });
  });
}

struct RowStatistics {
  float mean = 0.0f;  // 0 for RMSNorm
  float rstd = 0.0f;
};

template <typename TX, bool kDirect>
RowStatistics row_statistics(const NormProblem& p, int64_t row, const float* h_buffer) {
  const int64_t n = p.cols;
  const auto h = row_values<TX, kDirect>(p, row, h_buffer);
  RowStatistics s;
  float sum = 0.0f;
  for_this_cpu([&] {
    if (p.kind == NormKind::kLayer) {
      s.mean = lane_sum(n, [&](int64_t j) { return h(j); }) / static_cast<float>(n);
      const float mean = s.mean;
      sum = lane_sum(n, [&](int64_t j) {
        const float d = h(j) - mean;
        return d * d;
      });
    } else {
      sum = lane_sum(n, [&](int64_t j) {
        const float v = h(j);
        return v * v;
      });
    }
  });
  s.rstd = 1.0f / std::sqrt(sum / static_cast<float>(n) + p.eps);
  return s;
}

// The outputs of y, the float32 value of element j that the output is rounded (or quantized) from,
// in the GPU kernels' order (output_values, gpu/norm/norm_group_io.cuh): RMSNorm weighs h before
// it scales it, (h * w) * rstd, unless weight_after_cast; the weight without one is 1. y goes to
// the output, or for fp8 outputs into the buffer (h_buffer), for quantize_row. `weight` is the
// call's weight plus its offset and `bias` its bias, as float32 (RowConstants); either may be
// absent.
template <typename TX, bool kDirect>
void write_row(const NormProblem& p, int64_t row, float* h_buffer, RowStatistics s,
               const float* weight, const float* bias) {
  const int64_t n = p.cols;
  const auto h = row_values<TX, kDirect>(p, row, h_buffer);
  const bool layer = p.kind == NormKind::kLayer;
  const float mean = s.mean;
  const float rstd = s.rstd;
  TX* out = p.out_fp8 ? nullptr : static_cast<TX*>(p.out) +
                                        p.row_offset(row, p.out_stride, p.out_run_skip);
  for_this_cpu([&] {
    // y[j] = y_of(j) to the output, or into the buffer (y_of(j) reads element j alone).
    const auto emit = [&](const auto& y_of) {
      if (out == nullptr) {
        for (int64_t j = 0; j < n; ++j) h_buffer[j] = y_of(j);
        return;
      }
      for_each_run<TX>(n, [&](int64_t j0, int64_t count) {
        RunWriter<TX> y(out + j0, count);
        for (int64_t k = 0; k < count; ++k) y.set(k, y_of(j0 + k));
        y.finish();
      });
    };
    if (!layer && !p.weight_after_cast && weight != nullptr) {
      emit([&](int64_t j) { return (h(j) * weight[j]) * rstd; });
    } else if (!layer && !p.weight_after_cast) {
      emit([&](int64_t j) { return (h(j) * 1.0f) * rstd; });
    } else {
      with_flags(weight != nullptr, bias != nullptr, [&](auto weighted, auto biased) {
        const auto affine = [&](float v, int64_t j) {
          if constexpr (weighted) v *= weight[j];
          if constexpr (biased) v += bias[j];
          return v;
        };
        if (p.weight_after_cast) {
          // The normalized value rounded to x's dtype before the weight and bias, in the buffer.
          for (int64_t j = 0; j < n; ++j) h_buffer[j] = (h(j) - mean) * rstd;
          round_row<TX>(h_buffer, n);
          emit([&](int64_t j) { return affine(h_buffer[j], j); });
        } else {
          emit([&](int64_t j) { return affine((h(j) - mean) * rstd, j); });
        }
      });
    }
  });
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

// The call's weight (plus its offset) and bias as float32, for every row: the caller's own arrays
// where they already are that (float32, and an offset of -0, which leaves every weight as it is),
// else converted once, in the build of the row loops (for_this_cpu) and into uninitialized
// storage. At M = 1 the conversion is as much work as the row: done element by element in the
// baseline build into zero-filled vectors, it made LayerNorm's bf16 decode step at N = 4096 take
// 9.9 us from Python with a weight and bias against 5.3 without (bench/NOTES.md, "The CPU
// backend: the weight and bias at small batches").
class RowConstants {
 public:
  explicit RowConstants(const NormProblem& p) {
    const int64_t n = p.cols;
    const bool float_params = p.weight_dtype == DType::kFloat32;
    const bool adds_offset = !(p.weight_offset == 0.0f && std::signbit(p.weight_offset));
    // Whether src (the weight where `offset`) needs a float32 copy.
    const auto copied = [&](const void* src, bool offset) {
      return src != nullptr && !(float_params && !offset);
    };
    const int64_t copies = copied(p.weight, adds_offset) + copied(p.bias, false);
    if (copies > 0) storage_.reset(new float[static_cast<size_t>(copies * n)]);
    float* next = storage_.get();
    dispatch_float_dtype(p.weight_dtype, [&](auto w_tag) {
      using TW = typename decltype(w_tag)::type;
      const auto as_float = [&](const void* src, bool offset) -> const float* {
        if (!copied(src, offset)) return static_cast<const float*>(src);  // float32, or null
        float* dst = next;
        next += n;
        const float add = p.weight_offset;
        for_this_cpu([&] {
          widen_row(static_cast<const TW*>(src), dst, n);
          if (offset) {
            for (int64_t j = 0; j < n; ++j) dst[j] += add;
          }
        });
        return dst;
      };
      weight_ = as_float(p.weight, adds_offset);
      bias_ = as_float(p.bias, false);
    });
  }
  const float* weight_or_null() const { return weight_; }
  const float* bias_or_null() const { return bias_; }

 private:
  std::unique_ptr<float[]> storage_;
  const float* weight_ = nullptr;
  const float* bias_ = nullptr;
};

using LoadRow = void (*)(const NormProblem&, int64_t, float*);
using RowStatisticsOf = RowStatistics (*)(const NormProblem&, int64_t, const float*);
using WriteRow = void (*)(const NormProblem&, int64_t, float*, RowStatistics, const float*,
                          const float*);
using QuantizeRow = void (*)(const NormProblem&, int64_t, float*, float);

// The stages of a call (load: null where the row is read where it lies).
struct RowStages {
  LoadRow load = nullptr;
  RowStatisticsOf statistics = nullptr;
  WriteRow write = nullptr;
  QuantizeRow quantize = nullptr;
};

void norm_rows(const NormProblem& p, const RowStages& stages) {
  const int64_t n = p.cols;
  // A static fp8 scale: one reciprocal per call (read here, on the host, for CPU tensors).
  const float static_inverse =
      p.out_fp8 && p.static_scale != nullptr ? fp8_inverse_scale(*p.static_scale) : 0.0f;
  const RowConstants constants(p);
  const float* weight = constants.weight_or_null();
  const float* bias = constants.bias_or_null();
  const bool uses_buffer =
      stages.load != nullptr || stages.quantize != nullptr || p.weight_after_cast;

#if defined(_OPENMP)
#pragma omp parallel if (cpu_parallel_worthwhile(p.rows, p.rows * n))
#endif
  {
    // The row's float32 buffer, where a stage uses one (each writes it before reading it).
    const std::unique_ptr<float[]> h(uses_buffer ? new float[static_cast<size_t>(n)] : nullptr);
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (int64_t row = 0; row < p.rows; ++row) {
      if (stages.load != nullptr) stages.load(p, row, h.get());
      const RowStatistics s = stages.statistics(p, row, h.get());
      stages.write(p, row, h.get(), s, weight, bias);
      if (stages.quantize != nullptr) stages.quantize(p, row, h.get(), static_inverse);
      if (p.rstd != nullptr) p.rstd[row] = s.rstd;
      if (p.mean != nullptr) p.mean[row] = s.mean;
    }
  }
}

}  // namespace

Status run_norm_cpu(const NormProblem& p) {
  RowStages stages;
  dispatch_float_dtype(p.x_dtype, [&](auto x_tag) {
    using TX = typename decltype(x_tag)::type;
    if (!p.add_residual && !kConvertsInRuns<TX>) {
      stages.statistics = &row_statistics<TX, true>;
      stages.write = &write_row<TX, true>;
      return;
    }
    dispatch_float_dtype(p.source_dtype(), [&](auto r_tag) {
      stages.load = &load_row<TX, typename decltype(r_tag)::type>;
    });
    stages.statistics = &row_statistics<TX, false>;
    stages.write = &write_row<TX, false>;
  });
  if (p.out_fp8) {
    dispatch_fp8_format(p.out_fp8_format, [&](auto format_tag) {
      stages.quantize = &quantize_row<decltype(format_tag)>;
    });
  }
  norm_rows(p, stages);
  return Status();
}

}  // namespace fusekit::detail
