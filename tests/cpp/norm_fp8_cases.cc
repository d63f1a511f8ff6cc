// RMSNorm with an fp8 output: setup, run, float64 reference, and checks. See norm_fp8_cases.h.
#include "norm_fp8_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>


namespace fusekit::testing {

const char* norm_fp8_op_name(NormFp8Op op, Fp8Scale scale) {
  const bool dynamic = scale == Fp8Scale::kDynamic;
  if (op == NormFp8Op::kRms) return dynamic ? "rms_norm_quant_fp8" : "rms_norm_quant_fp8_static";
  return dynamic ? "fused_add_rms_norm_quant_fp8" : "fused_add_rms_norm_quant_fp8_static";
}

std::string NormFp8Case::name() const {
  const bool add = op == NormFp8Op::kAddRms;
  std::ostringstream s;
  s << norm_fp8_op_name(op, scale) << " " << fp8_format_name(format)
    << " x=" << dtype_name(x_dtype) << " w=" << dtype_name(weight_dtype);
  if (add) s << " r=" << dtype_name(residual_dtype) << (residual_in_place ? " (in place)" : "");
  s << " M=" << rows << " N=" << cols;
  if (x_pad || out_pad || residual_pad || residual_out_pad) {
    s << " pads=" << x_pad << "/" << out_pad << "/" << residual_pad << "/" << residual_out_pad;
  }
  if (x_offset || out_offset || residual_offset) {
    s << " offsets=" << x_offset << "/" << out_offset << "/" << residual_offset;
  }
  if (rank3_d0) s << " rank3(d0=" << rank3_d0 << ")";
  if (rank1) s << " rank1";
  if (x_run_gap) s << " run-gap=" << x_run_gap;
  if (weight_offset != 0.0f) s << " offset=" << weight_offset;
  if (scale == Fp8Scale::kDynamic) {
    if (scale_upper_bound > 0.0f) s << " ub=" << scale_upper_bound;
    if (scale_keepdim) s << " scale[...,1]";
  } else {
    s << " scale=" << static_scale << (scalar_scale ? " []" : " [1]");
  }
  return s.str();
}

namespace {

constexpr DType kF32 = DType::kFloat32;

// The float32 error of y (and so of a dynamic scale) relative to the float64 value: the row sum
// of squares over up to ~16K elements and the reciprocal square root, as output_tolerance allows
// for float32 outputs.
constexpr double kYRel = 1e-4;

bool is_add(const NormFp8Case& c) { return c.op == NormFp8Op::kAddRms; }
bool is_dynamic(const NormFp8Case& c) { return c.scale == Fp8Scale::kDynamic; }

TensorView view_of(const NormFp8Case& c, const RowBuffer& b) {
  if (c.rank1) return b.view_1d();
  return c.rank3_d0 > 0 ? b.view_3d(c.rank3_d0) : b.view();
}

TensorView scale_view(const NormFp8Case& c, const RowBuffer& s) {
  const Device d = device_of(s.backend());
  if (!is_dynamic(c)) {
    return c.scalar_scale ? TensorView::contiguous(s.data(), kF32, d, {})
                          : TensorView::contiguous(s.data(), kF32, d, {1});
  }
  const int64_t m = c.rows;
  // [M]; with a 1-D x that is also out's shape with last dimension 1.
  if (!c.scale_keepdim || c.rank1) return TensorView::contiguous(s.data(), kF32, d, {m});
  if (c.rank3_d0 > 0) {
    return TensorView::strided(s.data(), kF32, d, {c.rank3_d0, m / c.rank3_d0, 1},
                               {m / c.rank3_d0, 1, 1});
  }
  return TensorView::strided(s.data(), kF32, d, {m, 1}, {1, 1});
}

// A host copy of `from` with the same layout.
void copy_to_host(const RowBuffer& from, RowBuffer& to) {
  if (from.rows() == 0 && from.cols() == 0) return;
  to = RowBuffer(Backend::kCPU, from.dtype(), from.rows(), from.cols(), from.row_stride());
  for (int64_t r = 0; r < from.rows(); ++r) {
    for (int64_t j = 0; j < from.cols(); ++j) to.set(r, j, from.get(r, j));
  }
}

bool present(const RowBuffer& b) { return b.rows() > 0 || b.cols() > 0; }

// The buffer holding residual_out's values (residual itself when updated in place).
const RowBuffer& residual_out_of(const NormFp8Case& c, const NormFp8Run& run) {
  return c.residual_in_place ? run.residual : run.residual_out;
}

// An fp8 code's position in value order (+0 and -0 alike), for "within one step" comparisons.
int code_ordinal(uint64_t code) {
  const int magnitude = static_cast<int>(code & 0x7F);
  return (code & 0x80) != 0 ? -magnitude : magnitude;
}

bool code_is_nan(uint64_t code, Fp8Format format) {
  return format == Fp8Format::kE4M3FN ? (code & 0x7F) == 0x7F : code == 0x80;
}

bool same_value_or_both_nan(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

// float32 -> fp8 by the formats' definition, written without core/fp8.h: the nearest value
// (decoded from the bit layout with std::ldexp), ties to the even code, saturating at +-max,
// NaN to the format's NaN, and no -0 in e4m3fnuz (0x80 is its NaN).
uint8_t reference_fp8(float f, Fp8Format format) {
  const bool fn = format == Fp8Format::kE4M3FN;
  if (std::isnan(f)) return fn ? 0x7F : 0x80;
  // The values of codes 0, 1, ..., largest, which increase with the code.
  static const auto values_of = [](int bias, int largest) {
    std::vector<double> v;
    for (int code = 0; code <= largest; ++code) {
      const int e = code >> 3, m = code & 7;
      v.push_back(e == 0 ? std::ldexp(m / 8.0, 1 - bias) : std::ldexp(1.0 + m / 8.0, e - bias));
    }
    return v;
  };
  static const std::vector<double> fn_values = values_of(7, 0x7E);
  static const std::vector<double> fnuz_values = values_of(8, 0x7F);
  const std::vector<double>& values = fn ? fn_values : fnuz_values;
  const double a = std::fabs(static_cast<double>(f));
  int best = static_cast<int>(values.size()) - 1;
  if (a < values.back()) {
    const int hi = static_cast<int>(std::lower_bound(values.begin(), values.end(), a) -
                                    values.begin());
    const int lo = hi > 0 ? hi - 1 : 0;
    const double du = values[hi] - a, dl = a - values[lo];
    best = dl < du ? lo : du < dl ? hi : (lo % 2 == 0 ? lo : hi);
  }
  if (best == 0 && !fn) return 0;
  return static_cast<uint8_t>(std::signbit(f) ? (best | 0x80) : best);
}

}  // namespace

NormFp8Run run_norm_fp8_case(const NormFp8Case& c, Backend backend, NormFp8Run* inputs_before,
                             const NormFp8Fill& fill) {
  const bool add = is_add(c);
  const int64_t m = c.rows, n = c.cols;
  NormFp8Run run;
  const int64_t run_rows = c.rank3_d0 > 0 ? m / c.rank3_d0 : 0;
  run.x = RowBuffer(backend, c.x_dtype, m, n, n + c.x_pad, c.x_offset, run_rows, c.x_run_gap);
  run.out = RowBuffer(backend, fp8_format_dtype(c.format), m, n, n + c.out_pad, c.out_offset);
  if (add) {
    run.residual =
        RowBuffer(backend, c.residual_dtype, m, n, n + c.residual_pad, c.residual_offset);
    if (!c.residual_in_place) {
      run.residual_out = RowBuffer(backend, c.residual_dtype, m, n, n + c.residual_out_pad);
    }
  }
  run.weight = RowBuffer(backend, c.weight_dtype, 1, n);
  if (is_dynamic(c)) {
    run.scale = RowBuffer(backend, kF32, 1, m);
  } else {
    run.scale = RowBuffer(backend, kF32, 1, 1);
    run.scale.set(0, 0, c.static_scale);
    run.scale.upload();
  }

  std::mt19937 rng(c.seed);
  auto fill_input = [&](const std::string& name, RowBuffer& b) {
    if (fill) {
      fill(name, b, rng);
    } else {
      b.fill_random(rng);
    }
    b.upload();
  };
  fill_input("x", run.x);
  if (add) fill_input("residual", run.residual);
  fill_input("weight", run.weight);
  if (inputs_before != nullptr) {
    copy_to_host(run.x, inputs_before->x);
    if (add) copy_to_host(run.residual, inputs_before->residual);
    copy_to_host(run.weight, inputs_before->weight);
    if (!is_dynamic(c)) copy_to_host(run.scale, inputs_before->scale);
  }

  const TensorView x = view_of(c, run.x);
  const TensorView out = view_of(c, run.out);
  const TensorView w = run.weight.view_1d();
  const TensorView s = scale_view(c, run.scale);
  const TensorView r = add ? view_of(c, run.residual) : TensorView();
  const TensorView r_out = add && !c.residual_in_place ? view_of(c, run.residual_out) : r;
  const Stream stream = nullptr;
  if (!add && is_dynamic(c)) {
    run.status = rms_norm_quant_fp8(out, s, x, w, c.eps, c.format, c.weight_offset,
                                    c.scale_upper_bound, stream);
  } else if (!add) {
    run.status = rms_norm_quant_fp8_static(out, x, w, s, c.eps, c.format, c.weight_offset, stream);
  } else if (is_dynamic(c)) {
    run.status = fused_add_rms_norm_quant_fp8(out, s, r_out, x, r, w, c.eps, c.format,
                                              c.weight_offset, c.scale_upper_bound, stream);
  } else {
    run.status = fused_add_rms_norm_quant_fp8_static(out, r_out, x, r, w, s, c.eps, c.format,
                                                     c.weight_offset, stream);
  }
  if (backend == Backend::kGPU) {
    const Status sync = gpu_synchronize(0);
    if (run.status.ok() && !sync.ok()) run.status = sync;
  }
  for (RowBuffer* b : {&run.x, &run.residual, &run.residual_out, &run.weight, &run.out,
                       &run.scale}) {
    if (present(*b)) b->download();
  }
  return run;
}

::testing::AssertionResult check_norm_fp8_run(const NormFp8Case& c, const NormFp8Run& in,
                                              const NormFp8Run& run) {
  if (!run.status.ok()) {
    return ::testing::AssertionFailure() << c.name() << ": " << run.status.to_string();
  }
  const bool add = is_add(c);
  const bool dynamic = is_dynamic(c);
  const int64_t n = c.cols;
  const double fp8_max = fp8_format_max(c.format);
  const double flt_max = std::numeric_limits<float>::max();
  // Half the smallest subnormal step: the resolution of codes near zero.
  const double half_smallest =
      std::ldexp(1.0, (c.format == Fp8Format::kE4M3FN ? -6 : -7) - 3) / 2;
  const RowBuffer& r_out = residual_out_of(c, run);

  std::ostringstream errors;
  int bad = 0;
  auto report = [&](const std::string& what, int64_t r, int64_t j, double got, double want) {
    if (bad++ < 5) {
      errors << "\n  " << what << "[" << r << ", " << j << "] = " << got << ", expected " << want;
    }
  };
  std::vector<double> h(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  for (int64_t row = 0; row < c.rows; ++row) {
    double ss = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      if (add) {
        const float sum =
            static_cast<float>(in.x.get(row, j)) + static_cast<float>(in.residual.get(row, j));
        h[j] = round_to_dtype(sum, c.residual_dtype);
        if (!same_value_or_both_nan(r_out.get(row, j), h[j])) {
          report("residual_out", row, j, r_out.get(row, j), h[j]);
        }
      } else {
        h[j] = in.x.get(row, j);
      }
      ss += h[j] * h[j];
    }
    const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(c.eps));
    bool row_nan = false;
    double max_abs = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      double v = h[j] * rstd * (in.weight.get(0, j) + static_cast<double>(c.weight_offset));
      if (!std::isnan(v)) v = std::max(-flt_max, std::min(flt_max, v));  // float32's range
      y[j] = v;
      row_nan = row_nan || std::isnan(v);
      max_abs = std::max(max_abs, std::fabs(v));
    }

    double scale_ref = c.static_scale;
    if (dynamic) {
      scale_ref = max_abs / fp8_max;
      if (c.scale_upper_bound > 0) scale_ref = std::min(scale_ref, double{c.scale_upper_bound});
      scale_ref = std::max(scale_ref, 1.0 / (fp8_max * 512.0));
      if (row_nan) scale_ref = NAN;
      const double got = run.scale.get(0, row);
      const bool ok = row_nan ? std::isnan(got) : std::fabs(got - scale_ref) <= kYRel * scale_ref;
      if (!ok) report("scale", row, 0, got, scale_ref);
    }
    // Codes: y / scale rounded to fp8 (half a step: 2^-4 relative, 3 mantissa bits), with y and
    // the dynamic scale carrying float32's error, saturating at +-fp8_max.
    // A NaN y makes its code NaN, and with a dynamic scale every code of its row (the scale's).
    double decoded_max = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const double q = run.out.get(row, j);
      if ((dynamic && row_nan) || std::isnan(y[j])) {
        if (!std::isnan(q)) report("out (in units of scale)", row, j, q, NAN);
        continue;
      }
      const double want = std::max(-fp8_max, std::min(fp8_max, y[j] / scale_ref));
      const double allowed =
          std::fabs(want) * (1.0 / 16 + 3 * kYRel) + half_smallest * (1 + 1e-4);
      if (!(std::fabs(q - want) <= allowed)) report("out (in units of scale)", row, j, q, want);
      decoded_max = std::max(decoded_max, std::fabs(q));
    }
    // The row's largest |y| lands on +-fp8_max unless the bound or the floor raised the scale.
    if (dynamic && !row_nan && n > 0 && scale_ref == max_abs / fp8_max &&
        decoded_max != fp8_max) {
      report("max |out|", row, 0, decoded_max, fp8_max);
    }
  }

  // Padding (poisoned) untouched everywhere; the read-only inputs unchanged.
  const std::pair<const char*, const RowBuffer*> all[] = {
      {"x", &run.x},           {"residual", &run.residual}, {"residual_out", &run.residual_out},
      {"weight", &run.weight}, {"out", &run.out},           {"scale", &run.scale}};
  for (const auto& [name, buf] : all) {
    if (present(*buf) && !buf->padding_untouched() && bad++ < 5) {
      errors << "\n  " << name << ": memory outside the rows was written";
    }
  }
  auto unchanged = [&](const char* name, const RowBuffer& before, const RowBuffer& after) {
    for (int64_t r = 0; r < after.rows(); ++r) {
      for (int64_t j = 0; j < after.cols(); ++j) {
        if (same_value_or_both_nan(after.get(r, j), before.get(r, j))) continue;
        if (bad++ < 5) {
          errors << "\n  input " << name << " was modified at [" << r << ", " << j << "]";
        }
        return;
      }
    }
  };
  unchanged("x", in.x, run.x);
  unchanged("weight", in.weight, run.weight);
  if (add && !c.residual_in_place) unchanged("residual", in.residual, run.residual);
  if (!dynamic) unchanged("scale", in.scale, run.scale);
  if (bad > 0) {
    return ::testing::AssertionFailure() << c.name() << ": " << bad << " mismatches"
                                         << errors.str();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult matches_quantized_plain_op(const NormFp8Case& c, Backend backend,
                                                      const NormFp8Run& in,
                                                      const NormFp8Run& run) {
  if (c.x_dtype != kF32 || c.weight_dtype != kF32 || (is_add(c) && c.residual_dtype != kF32)) {
    return ::testing::AssertionFailure()
           << c.name() << ": the plain op's output is y itself only for float32 tensors";
  }
  if (!run.status.ok()) {
    return ::testing::AssertionFailure() << c.name() << ": " << run.status.to_string();
  }
  const int64_t m = c.rows, n = c.cols;
  // The plain op on contiguous copies of the inputs: its float32 out is y, bit for bit.
  RowBuffer x(backend, kF32, m, n), w(backend, kF32, 1, n), y(backend, kF32, m, n);
  RowBuffer r, r_out;
  for (int64_t row = 0; row < m; ++row) {
    for (int64_t j = 0; j < n; ++j) x.set(row, j, in.x.get(row, j));
  }
  for (int64_t j = 0; j < n; ++j) w.set(0, j, in.weight.get(0, j));
  x.upload();
  w.upload();
  Status s;
  if (is_add(c)) {
    r = RowBuffer(backend, kF32, m, n);
    r_out = RowBuffer(backend, kF32, m, n);
    for (int64_t row = 0; row < m; ++row) {
      for (int64_t j = 0; j < n; ++j) r.set(row, j, in.residual.get(row, j));
    }
    r.upload();
    s = fused_add_rms_norm(y.view(), r_out.view(), x.view(), r.view(), w.view_1d(), c.eps,
                           c.weight_offset);
  } else {
    s = rms_norm(y.view(), x.view(), w.view_1d(), c.eps, c.weight_offset);
  }
  if (backend == Backend::kGPU && s.ok()) s = gpu_synchronize(0);
  if (!s.ok()) return ::testing::AssertionFailure() << c.name() << ": plain op: " << s.to_string();
  y.download();

  // The quantization as include/fusekit/norm.h defines it, in plain float32 IEEE operations
  // (none of core/fp8.h's, so that a fault shared by the kernels and those helpers shows):
  // y clamped to float32's range, scale = max|y| / fp8_max capped by the bound and floored at
  // 1 / (fp8_max * 512) (or the static scale), codes fp8(y * (1 / scale)).
  const float fp8_max = static_cast<float>(fp8_format_max(c.format));
  const float flt_max = std::numeric_limits<float>::max();
  std::vector<float> v(static_cast<size_t>(n));
  std::vector<uint8_t> codes(static_cast<size_t>(n));
  for (int64_t row = 0; row < m; ++row) {
    float max_abs = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      const float f = static_cast<float>(y.get(row, j));
      v[j] = std::isnan(f) ? f : std::max(-flt_max, std::min(flt_max, f));
      max_abs = std::isnan(max_abs) || std::isnan(v[j]) ? NAN : std::max(max_abs, std::fabs(v[j]));
    }
    float scale = 0.0f;
    if (!is_dynamic(c)) {
      scale = static_cast<float>(in.scale.get(0, 0));
    } else {
      scale = max_abs / fp8_max;
      if (c.scale_upper_bound > 0.0f && scale > c.scale_upper_bound) scale = c.scale_upper_bound;
      const float floor = 1.0f / (fp8_max * 512.0f);
      if (scale < floor) scale = floor;
    }
    const float inverse = 1.0f / scale;
    for (int64_t j = 0; j < n; ++j) codes[j] = reference_fp8(v[j] * inverse, c.format);
    for (int64_t j = 0; j < n; ++j) {
      if (run.out.raw(row, j) != codes[j]) {
        return ::testing::AssertionFailure()
               << c.name() << ": out[" << row << ", " << j << "] is code " << run.out.raw(row, j)
               << " but quantizing the plain op's y = " << y.get(row, j) << " gives "
               << static_cast<int>(codes[j]);
      }
    }
    if (is_dynamic(c)) {
      uint32_t want_bits;
      std::memcpy(&want_bits, &scale, sizeof(want_bits));
      if (std::isnan(scale)) want_bits = 0x7FC00000u;  // the one NaN a scale is written as
      if (run.scale.raw(0, row) != want_bits) {
        return ::testing::AssertionFailure()
               << c.name() << ": scale[" << row << "] = " << run.scale.get(0, row)
               << " but the plain op's row gives " << scale;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult agree_across_backends(const NormFp8Case& c, const NormFp8Run& gpu,
                                                 const NormFp8Run& cpu) {
  for (const NormFp8Run* run : {&gpu, &cpu}) {
    if (!run->status.ok()) {
      return ::testing::AssertionFailure() << c.name() << ": " << run->status.to_string();
    }
  }
  if (is_add(c)) {
    // The sum is one float32 addition and one rounding: the same bits (NaNs of either payload).
    const RowBuffer& a = residual_out_of(c, gpu);
    const RowBuffer& b = residual_out_of(c, cpu);
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t j = 0; j < c.cols; ++j) {
        if (a.raw(r, j) == b.raw(r, j) || (std::isnan(a.get(r, j)) && std::isnan(b.get(r, j)))) {
          continue;
        }
        return ::testing::AssertionFailure() << c.name() << ": residual_out[" << r << ", " << j
                                             << "] bits " << a.raw(r, j) << " vs " << b.raw(r, j);
      }
    }
  }
  for (int64_t r = 0; r < c.rows; ++r) {
    if (is_dynamic(c)) {
      const double a = gpu.scale.get(0, r), b = cpu.scale.get(0, r);
      const bool ok = std::isnan(a) ? std::isnan(b) : std::fabs(a - b) <= 2 * kYRel * std::fabs(b);
      if (!ok) {
        return ::testing::AssertionFailure() << c.name() << ": scale[" << r << "] = " << a
                                             << " on the GPU, " << b << " on the CPU";
      }
    }
    for (int64_t j = 0; j < c.cols; ++j) {
      const uint64_t a = gpu.out.raw(r, j), b = cpu.out.raw(r, j);
      const bool a_nan = code_is_nan(a, c.format), b_nan = code_is_nan(b, c.format);
      const bool ok = a_nan || b_nan ? a_nan == b_nan
                                     : std::abs(code_ordinal(a) - code_ordinal(b)) <= 1;
      if (!ok) {
        return ::testing::AssertionFailure() << c.name() << ": out[" << r << ", " << j
                                             << "] is code " << a << " on the GPU, " << b
                                             << " on the CPU";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<uint64_t> norm_fp8_row_bits(const NormFp8Case& c, const NormFp8Run& run, int64_t r) {
  std::vector<uint64_t> bits;
  for (int64_t j = 0; j < c.cols; ++j) bits.push_back(run.out.raw(r, j));
  if (is_add(c)) {
    const RowBuffer& r_out = residual_out_of(c, run);
    for (int64_t j = 0; j < c.cols; ++j) bits.push_back(r_out.raw(r, j));
  }
  if (is_dynamic(c)) bits.push_back(run.scale.raw(0, r));
  return bits;
}

}  // namespace fusekit::testing
