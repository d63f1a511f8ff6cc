// Gated-activation test cases: setup, run, float64 reference, and checks. See act_cases.h.
#include "act_cases.h"

#include "act/act_problem.h"
#include "gpu/act/act_gpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>
#include <vector>

namespace fusekit::testing {

const char* act_mode_name(ActMode m) {
  switch (m) {
    case ActMode::kForward: return "forward";
    case ActMode::kQuantFp8: return "quant_fp8";
    case ActMode::kBackward: return "backward";
  }
  return "?";
}

const char* act_layout_name(ActLayout l) {
  switch (l) {
    case ActLayout::kFused: return "fused";
    case ActLayout::kSplitHalves: return "split-halves";
    case ActLayout::kSplitSeparate: return "split-separate";
  }
  return "?";
}

std::string act_param_name(const ::testing::TestParamInfo<ActParam>& info) {
  const auto [backend, act, mode] = info.param;
  return std::string(backend_name(backend)) + "_" + activation_name(act) + "_" +
         act_mode_name(mode);
}

std::string ActCase::name() const {
  std::ostringstream s;
  s << activation_name(act) << " " << act_mode_name(mode) << " " << act_layout_name(layout) << " "
    << dtype_name(dtype) << " M=" << rows << " N=" << cols;
  if (mode == ActMode::kQuantFp8) {
    s << " " << fp8_format_name(format);
    if (scale_upper_bound > 0) s << " ub=" << scale_upper_bound;
    if (scale_keepdim) s << " scale[...,1]";
  }
  if (in_pad || out_pad) s << " pads=" << in_pad << "/" << out_pad;
  if (in_offset || out_offset) s << " offsets=" << in_offset << "/" << out_offset;
  if (rank3_d0) s << " rank3(d0=" << rank3_d0 << ")";
  if (rank1) s << " rank1";
  return s.str();
}

// gelu_tanh through 0.5 * (1 + tanh(z)) = 1 / (1 + e^(-2z)): in double, 1 + tanh(z) itself
// loses all its digits for z < -18 (tanh rounds to -1 + a few ulp), the identity does not.
double sigmoid_reference(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double gelu_tanh_two_z(double g) { return 2.0 * std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g); }

double act_reference(Activation act, double g) {
  switch (act) {
    case Activation::kSilu: return g * sigmoid_reference(g);
    case Activation::kGeluTanh: return g * sigmoid_reference(gelu_tanh_two_z(g));
    case Activation::kGelu: return 0.5 * g * std::erfc(-g / std::sqrt(2.0));
  }
  return NAN;
}

double act_derivative_reference(Activation act, double g) {
  switch (act) {
    case Activation::kSilu: {
      const double s = sigmoid_reference(g);
      return s + g * s * sigmoid_reference(-g);
    }
    case Activation::kGeluTanh: {
      // d/dg [g sigmoid(t)] with t = 2z: sigmoid(t) + g t' sigmoid(t) sigmoid(-t).
      const double t = gelu_tanh_two_z(g);
      const double dt = 2.0 * std::sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * g * g);
      const double ss = sigmoid_reference(t) * sigmoid_reference(-t);
      return sigmoid_reference(t) + (ss == 0.0 ? 0.0 : g * dt * ss);
    }
    case Activation::kGelu:
      return 0.5 * std::erfc(-g / std::sqrt(2.0)) +
             g * std::exp(-0.5 * g * g) / std::sqrt(2.0 * M_PI);
  }
  return NAN;
}

namespace {

bool split(const ActCase& c) { return c.layout != ActLayout::kFused; }

TensorView make_view(void* data, DType dtype, Device device, int64_t rows, int64_t cols,
                     int64_t stride, int d0, bool rank1) {
  if (rank1) return TensorView::contiguous(data, dtype, device, {cols});
  if (d0 > 0) {
    return TensorView::strided(data, dtype, device, {d0, rows / d0, cols},
                               {rows / d0 * stride, stride, 1});
  }
  return TensorView::strided(data, dtype, device, {rows, cols}, {stride, 1});
}

TensorView whole(const ActCase& c, const RowBuffer& b) {
  return make_view(b.data(), b.dtype(), device_of(b.backend()), b.rows(), b.cols(),
                   b.row_stride(), c.rank3_d0, c.rank1);
}

// Columns [first, first + n) of every row of b.
TensorView columns(const ActCase& c, const RowBuffer& b, int64_t first, int64_t n) {
  void* p = static_cast<char*>(b.data()) + first * static_cast<int64_t>(dtype_size(b.dtype()));
  return make_view(p, b.dtype(), device_of(b.backend()), b.rows(), n, b.row_stride(),
                   c.rank3_d0, c.rank1);
}

TensorView scale_view(const ActCase& c, const RowBuffer& s) {
  const Device d = device_of(s.backend());
  const int64_t m = c.rows;
  // [M]; with 1-D inputs that is also out's shape with last dimension 1.
  if (!c.scale_keepdim || c.rank1) {
    return TensorView::contiguous(s.data(), DType::kFloat32, d, {m});
  }
  if (c.rank3_d0 > 0) {
    return TensorView::strided(s.data(), DType::kFloat32, d, {c.rank3_d0, m / c.rank3_d0, 1},
                               {m / c.rank3_d0, 1, 1});
  }
  return TensorView::strided(s.data(), DType::kFloat32, d, {m, 1}, {1, 1});
}

// Tolerances against the unrounded float64 reference, per output dtype. The kernels compute in
// float32 (activation within a few ulp, ~1e-6 relative at worst through erfc; the GPU's
// approximate math for 16-bit forward outputs within 1e-5) and round once, so a 16-bit output is
// within half an ulp of the float32 value: 2^-8 relative for bfloat16 (8 significant bits),
// 2^-11 for float16 (11 bits), plus 1e-5 for the float32 error; float32 outputs 1e-5. The
// absolute terms: half the smallest subnormal step for float16 (2^-25) and float32 (2^-150);
// for bfloat16 1e-38, about float32's smallest normal 2^-126, because the GPU's forward kernels
// with 16-bit outputs take exp and the reciprocal from ex2.approx.ftz / rcp.approx.ftz
// (gpu/platform.h), which flush results below 2^-126 to zero.
Tolerance act_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16: return {1.0 / 256 + 1e-5, 1e-38};
    case DType::kFloat16: return {1.0 / 2048 + 1e-5, 0x1p-25};
    default: return {1e-5, 0x1p-150};
  }
}

// The float32 act(g) = g * (a factor in [0, 1]) resolves that factor no finer than the subnormal
// step 2^-149 (a few steps of error in that range): where it underflows (silu or gelu of
// g < -103) the product with a huge up misses by at most a few 2^-149 * |g * up|, e.g.
// silu(-104) * 3.4e38 = -2.4e-5 comes out 0. That is the resolution of float32 math, not an
// overflow: allowed explicitly, as kIntermediateResolution * max(1, |g|) * |up|.
constexpr double kIntermediateResolution = 0x1p-147;

// |out - ref| <= allowed, where `rounded` is ref in the output dtype: an infinite one (the value
// overflows the dtype) must come out as that infinity, NaN as NaN.
bool within(double out, double ref, double rounded, double allowed) {
  if (std::isnan(ref)) return std::isnan(out);
  if (std::isinf(rounded)) return out == rounded;
  return std::fabs(out - ref) <= allowed;
}
bool within(double out, double ref, double allowed) { return within(out, ref, ref, allowed); }

}  // namespace

double ActRun::gate(int64_t r, int64_t j) const { return in.get(r, j); }
double ActRun::up_value(int64_t r, int64_t j) const {
  return up.rows() > 0 || up.cols() > 0 ? up.get(r, j) : in.get(r, in.cols() / 2 + j);
}
double ActRun::grad_gate(int64_t r, int64_t j) const { return out.get(r, j); }
double ActRun::grad_up_value(int64_t r, int64_t j) const {
  return grad_up.cols() > 0 ? grad_up.get(r, j) : out.get(r, out.cols() / 2 + j);
}

namespace {

// c's buffers on `backend`, outputs poisoned, inputs filled and uploaded.
ActRun prepare_act_run(const ActCase& c, Backend backend, const ActFill& fill) {
  const int64_t m = c.rows, n = c.cols;
  const bool separate = c.layout == ActLayout::kSplitSeparate;
  ActRun run;
  // Inputs: separate buffers for gate and up (different stride and offset), else one [M, 2N].
  if (separate) {
    run.in = RowBuffer(backend, c.dtype, m, n, n + c.in_pad, c.in_offset);
    run.up = RowBuffer(backend, c.dtype, m, n, n + c.in_pad + 3, c.in_offset + 1);
  } else {
    run.in = RowBuffer(backend, c.dtype, m, 2 * n, 2 * n + c.in_pad, c.in_offset);
  }
  const bool backward = c.mode == ActMode::kBackward;
  if (backward) {
    run.grad_out = RowBuffer(backend, c.dtype, m, n, n + c.out_pad + 1, c.out_offset);
    if (split(c)) {
      run.out = RowBuffer(backend, c.dtype, m, n, n + c.out_pad, c.out_offset);
      run.grad_up = RowBuffer(backend, c.dtype, m, n, n + c.out_pad + 2, c.out_offset + 1);
    } else {
      run.out = RowBuffer(backend, c.dtype, m, 2 * n, 2 * n + c.out_pad, c.out_offset);
    }
  } else {
    const DType out_dtype = c.mode == ActMode::kQuantFp8 ? fp8_format_dtype(c.format) : c.dtype;
    run.out = RowBuffer(backend, out_dtype, m, n, n + c.out_pad, c.out_offset);
    if (c.mode == ActMode::kQuantFp8) run.scale = RowBuffer(backend, DType::kFloat32, 1, m);
  }

  std::mt19937 rng(c.seed);
  if (fill) {
    fill(run, rng);
  } else {
    run.in.fill_random(rng, 2.0);
    if (separate) run.up.fill_random(rng, 2.0);
    if (backward) run.grad_out.fill_random(rng);
  }
  run.in.upload();
  run.up.upload();
  run.grad_out.upload();
  run.in_before = run.in.snapshot();
  run.up_before = run.up.snapshot();
  run.grad_out_before = run.grad_out.snapshot();
  return run;
}

// Waits for the call and brings every buffer back to the host.
void finish_act_run(Backend backend, ActRun* run) {
  if (backend == Backend::kGPU) {
    // A fault of the kernel shows here, not in the launch's status.
    const Status sync = gpu_synchronize(0);
    if (run->status.ok() && !sync.ok()) run->status = sync;
  }
  for (RowBuffer* b : {&run->in, &run->up, &run->grad_out, &run->out, &run->grad_up, &run->scale}) {
    b->download();
  }
}

}  // namespace

ActRun run_act_case(const ActCase& c, Backend backend, const ActFill& fill) {
  const int64_t n = c.cols;
  const bool separate = c.layout == ActLayout::kSplitSeparate;
  ActRun run = prepare_act_run(c, backend, fill);
  const TensorView gate = split(c) ? columns(c, run.in, 0, n) : TensorView();
  const TensorView up = separate ? whole(c, run.up)
                                 : (split(c) ? columns(c, run.in, n, n) : TensorView());
  const TensorView x = whole(c, run.in);
  switch (c.mode) {
    case ActMode::kForward:
      run.status = split(c) ? act_and_mul(c.act, whole(c, run.out), gate, up)
                            : act_and_mul(c.act, whole(c, run.out), x);
      break;
    case ActMode::kQuantFp8: {
      const TensorView s = scale_view(c, run.scale);
      run.status = split(c) ? act_and_mul_quant_fp8(c.act, whole(c, run.out), s, gate, up,
                                                    c.format, c.scale_upper_bound)
                            : act_and_mul_quant_fp8(c.act, whole(c, run.out), s, x, c.format,
                                                    c.scale_upper_bound);
      break;
    }
    case ActMode::kBackward:
      run.status = split(c) ? act_and_mul_backward(c.act, whole(c, run.out), whole(c, run.grad_up),
                                                   whole(c, run.grad_out), gate, up)
                            : act_and_mul_backward(c.act, whole(c, run.out),
                                                   whole(c, run.grad_out), x);
      break;
  }
  finish_act_run(backend, &run);
  return run;
}

ActRun run_act_quant_case_with(const ActCase& c, const ActQuantConfigure& configure) {
  ActRun run = prepare_act_run(c, Backend::kGPU, {});
  if (c.mode != ActMode::kQuantFp8 || c.rank3_d0 != 0 || c.rank1) {
    run.status = Status::invalid_argument("run_act_quant_case_with: a quantized case of rank 2");
    return run;
  }
  // The problem act_and_mul_quant_fp8 builds for these tensors (act_api.cc): gate and up as row
  // pointers with their strides, the fused input's up half N elements past its gate.
  const int64_t elem = static_cast<int64_t>(dtype_size(c.dtype));
  detail::ActProblem p;
  p.act = c.act;
  p.rows = c.rows;
  p.cols = c.cols;
  p.dtype = c.dtype;
  p.gate = run.in.data();
  p.gate_stride = run.in.row_stride();
  const bool separate = c.layout == ActLayout::kSplitSeparate;
  p.up = separate ? run.up.data() : static_cast<const char*>(run.in.data()) + c.cols * elem;
  p.up_stride = separate ? run.up.row_stride() : run.in.row_stride();
  p.out = run.out.data();
  p.out_stride = run.out.row_stride();
  p.quantize = true;
  p.format = c.format;
  p.scale = static_cast<float*>(run.scale.data());
  p.scale_upper_bound = c.scale_upper_bound;
  p.device = device_of(Backend::kGPU);
  gpu::ActShape shape;
  run.status = gpu::act_shape_of(p, &shape);
  gpu::ActQuantConfig config;
  if (run.status.ok() && !configure(shape, &config)) {
    run.status = Status::unsupported("run_act_quant_case_with: no such configuration here");
  }
  if (run.status.ok()) {
    gpu::ActLaunchOverrides overrides;
    overrides.quant = &config;
    run.status = gpu::run_act_gpu_with(p, nullptr, overrides);
  }
  finish_act_run(Backend::kGPU, &run);
  return run;
}

::testing::AssertionResult check_act_run(const ActCase& c, const ActRun& run) {
  if (!run.status.ok()) {
    return ::testing::AssertionFailure() << c.name() << ": " << run.status.to_string();
  }
  for (const RowBuffer* b : {&run.in, &run.up, &run.grad_out, &run.out, &run.grad_up,
                             &run.scale}) {
    if (!b->padding_untouched()) {
      return ::testing::AssertionFailure() << c.name() << ": a buffer's padding was written";
    }
  }
  // The inputs are read-only, and the reference below reads them after the call: an op that
  // wrote into them would otherwise be checked against what it wrote.
  if (!run.in.equals_snapshot(run.in_before) || !run.up.equals_snapshot(run.up_before) ||
      !run.grad_out.equals_snapshot(run.grad_out_before)) {
    return ::testing::AssertionFailure() << c.name() << ": an input was written";
  }
  const Tolerance tol = act_tolerance(c.dtype);
  int failures = 0;
  auto fail = ::testing::AssertionFailure();
  auto report = [&](const char* what, int64_t r, int64_t j, double out, double ref) {
    if (failures++ < 5) {
      fail << c.name() << ": " << what << "[" << r << ", " << j << "] = " << out
           << " but the reference is " << ref << "\n";
    }
  };

  for (int64_t r = 0; r < c.rows; ++r) {
    std::vector<double> y(static_cast<size_t>(c.cols));
    double max_abs = 0.0;
    bool row_nan = false;
    for (int64_t j = 0; j < c.cols; ++j) {
      const double g = run.gate(r, j), u = run.up_value(r, j);
      y[static_cast<size_t>(j)] = act_reference(c.act, g) * u;
      if (c.mode == ActMode::kQuantFp8 && !std::isnan(y[static_cast<size_t>(j)])) {
        // quantization saturates y at float32's largest
        const double flt_max = std::numeric_limits<float>::max();
        y[static_cast<size_t>(j)] = std::max(-flt_max, std::min(flt_max, y[static_cast<size_t>(j)]));
      }
      row_nan = row_nan || std::isnan(y[static_cast<size_t>(j)]);
      max_abs = std::max(max_abs, std::fabs(y[static_cast<size_t>(j)]));
    }
    if (c.mode == ActMode::kForward) {
      for (int64_t j = 0; j < c.cols; ++j) {
        const double ref = y[static_cast<size_t>(j)];
        const double out = run.out.get(r, j);
        const double allowed = tol.rel * std::fabs(ref) + tol.abs +
                               kIntermediateResolution * std::max(1.0, std::fabs(run.gate(r, j))) *
                                   std::fabs(run.up_value(r, j));
        if (!within(out, ref, round_to_dtype(ref, c.dtype), allowed)) {
          report("out", r, j, out, ref);
        }
      }
    } else if (c.mode == ActMode::kQuantFp8) {
      // scale = max(min(max|y| / fp8_max, bound), 1 / (fp8_max * 512)), from the float64 y.
      const double fp8_max = fp8_format_max(c.format);
      double scale_ref = max_abs / fp8_max;
      if (c.scale_upper_bound > 0) scale_ref = std::min(scale_ref, double{c.scale_upper_bound});
      scale_ref = std::max(scale_ref, 1.0 / (fp8_max * 512.0));
      if (row_nan) scale_ref = NAN;
      const double scale = run.scale.get(0, r);
      if (!within(scale, scale_ref, 2e-5 * scale_ref)) report("scale", r, 0, scale, scale_ref);
      // Each value within half an fp8 step of y / scale: 2^-4 relative (3 mantissa bits), half
      // the smallest subnormal below, saturation at fp8_max.
      const double smallest = std::ldexp(1.0, (c.format == Fp8Format::kE4M3FN ? -6 : -7) - 3);
      double decoded_max = 0.0;
      for (int64_t j = 0; j < c.cols; ++j) {
        const double q = run.out.get(r, j);
        double want = std::max(-fp8_max, std::min(fp8_max, y[static_cast<size_t>(j)] / scale_ref));
        const double resolution = kIntermediateResolution *
                                  std::max(1.0, std::fabs(run.gate(r, j))) *
                                  std::fabs(run.up_value(r, j)) / scale_ref;
        if (row_nan) want = NAN;
        const double allowed =
            std::fabs(want) / 16 * (1 + 1e-4) + smallest / 2 * (1 + 1e-4) + resolution;
        if (!within(q, want, allowed)) report("out (in units of scale)", r, j, q, want);
        if (!row_nan) decoded_max = std::max(decoded_max, std::fabs(q));
      }
      // The row's largest |y| lands on +-fp8_max unless the bound or the floor raised the scale.
      const bool unscaled = scale_ref == max_abs / fp8_max;
      if (!row_nan && unscaled && c.cols > 0 && decoded_max != fp8_max) {
        report("max |out|", r, 0, decoded_max, fp8_max);
      }
    } else {
      for (int64_t j = 0; j < c.cols; ++j) {
        const double g = run.gate(r, j), u = run.up_value(r, j);
        const double dy = run.grad_out.get(r, j);
        const double dg_ref = dy * u * act_derivative_reference(c.act, g);
        const double du_ref = dy * act_reference(c.act, g);
        // act' is a sum of two terms that cancel near its zeros (e.g. gelu's minimum): allow the
        // float32 error of the terms, ~1e-6 of |dy * u| (1 + 2|g|), besides the rounding.
        const double cancel = 1e-5 * std::fabs(dy * u) * (1 + 2 * std::fabs(g)) +
                              kIntermediateResolution * std::max(1.0, std::fabs(g)) *
                                  std::fabs(dy * u);
        const double dg = run.grad_gate(r, j), du = run.grad_up_value(r, j);
        if (!within(dg, dg_ref, round_to_dtype(dg_ref, c.dtype),
                    tol.rel * std::fabs(dg_ref) + tol.abs + cancel)) {
          report("grad_gate", r, j, dg, dg_ref);
        }
        if (!within(du, du_ref, round_to_dtype(du_ref, c.dtype),
                    tol.rel * std::fabs(du_ref) + tol.abs +
                        kIntermediateResolution * std::max(1.0, std::fabs(g)) *
                            std::fabs(dy))) {
          report("grad_up", r, j, du, du_ref);
        }
      }
    }
  }
  if (failures > 0) return fail << failures << " mismatches";
  return ::testing::AssertionSuccess();
}

// Element by element, bit for bit, except that two NaNs of a 16- or 32-bit float output count as
// equal whatever their sign and payload (the CPU and GPU conversions pick different quiet NaNs,
// and nothing reads them); fp8 NaNs are part of the format and must match exactly. Padding is
// checked by check_act_run.
bool gpu_writes_cpu_bits(const ActCase& c) {
  return !(c.mode == ActMode::kForward && c.dtype != DType::kFloat32);
}

::testing::AssertionResult same_act_outputs(const ActCase& c, const ActRun& a, const ActRun& b) {
  auto compare = [&](const char* what, const RowBuffer& x,
                     const RowBuffer& y) -> ::testing::AssertionResult {
    if (x.rows() != y.rows() || x.cols() != y.cols()) {
      return ::testing::AssertionFailure() << c.name() << ": " << what << " shapes differ";
    }
    const bool fp8 = x.dtype() == DType::kFloat8E4M3FN || x.dtype() == DType::kFloat8E4M3FNUZ;
    for (int64_t r = 0; r < x.rows(); ++r) {
      for (int64_t j = 0; j < x.cols(); ++j) {
        if (x.raw(r, j) == y.raw(r, j)) continue;
        if (!fp8 && std::isnan(x.get(r, j)) && std::isnan(y.get(r, j))) continue;
        return ::testing::AssertionFailure() << c.name() << ": " << what << "[" << r << ", " << j
                                             << "] bits " << x.raw(r, j) << " vs " << y.raw(r, j);
      }
    }
    return ::testing::AssertionSuccess();
  };
  for (const auto& [what, x, y] : {std::tuple{"out", &a.out, &b.out},
                                   std::tuple{"grad_up", &a.grad_up, &b.grad_up},
                                   std::tuple{"scale", &a.scale, &b.scale}}) {
    const ::testing::AssertionResult same = compare(what, *x, *y);
    if (!same) return same;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace fusekit::testing
