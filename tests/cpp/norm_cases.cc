// Norm test cases: setup, run, float64 reference, and checks. See norm_cases.h.
#include "norm_cases.h"

#include <cmath>
#include <sstream>

namespace fusekit::testing {

const char* norm_op_name(NormOp op) {
  switch (op) {
    case NormOp::kRms: return "rms_norm";
    case NormOp::kAddRmsInPlace: return "fused_add_rms_norm_inplace";
    case NormOp::kAddRms: return "fused_add_rms_norm";
    case NormOp::kLayer: return "layer_norm";
    case NormOp::kAddLayerInPlace: return "fused_add_layer_norm_inplace";
    case NormOp::kAddLayer: return "fused_add_layer_norm";
  }
  return "?";
}
bool is_layer(NormOp op) {
  return op == NormOp::kLayer || op == NormOp::kAddLayerInPlace || op == NormOp::kAddLayer;
}
bool is_add(NormOp op) { return op != NormOp::kRms && op != NormOp::kLayer; }
bool is_in_place(NormOp op) {
  return op == NormOp::kAddRmsInPlace || op == NormOp::kAddLayerInPlace;
}

std::string NormCase::name() const {
  std::ostringstream s;
  s << norm_op_name(op) << " x=" << dtype_name(x_dtype) << " w=" << dtype_name(weight_dtype);
  if (is_add(op)) s << " r=" << dtype_name(residual_dtype);
  s << " M=" << rows << " N=" << cols;
  if (x_pad || out_pad || residual_pad || residual_out_pad) {
    s << " pads=" << x_pad << "/" << out_pad << "/" << residual_pad << "/" << residual_out_pad;
  }
  if (x_offset || out_offset || residual_offset) {
    s << " offsets=" << x_offset << "/" << out_offset << "/" << residual_offset;
  }
  if (affine_offset) s << " affine-offset=" << affine_offset;
  if (rank3_d0) s << " rank3(d0=" << rank3_d0 << ")";
  if (rank1) s << " rank1";
  if (x_run_gap || out_run_gap) s << " run-gaps=" << x_run_gap << "/" << out_run_gap;
  if (!has_weight) s << " no-weight";
  if (is_layer(op) && !has_bias) s << " no-bias";
  if (weight_offset != 0.0f) s << " offset=" << weight_offset;
  if (weight_after_cast) s << " weight-after-cast";
  if (stats) s << " stats";
  if (input_mean != 0.0) s << " input-mean=" << input_mean;
  return s.str();
}

namespace {

TensorView view_of(const NormCase& c, const RowBuffer& b) {
  if (c.rank1) return b.view_1d();
  return c.rank3_d0 > 0 ? b.view_3d(c.rank3_d0) : b.view();
}

}  // namespace

NormRun run_norm_case(const NormCase& c, Backend backend, NormRun* inputs_before,
                      const NormFill& fill) {
  const bool add = is_add(c.op);
  const bool layer = is_layer(c.op);
  const bool in_place = is_in_place(c.op);
  const int64_t m = c.rows, n = c.cols;
  NormRun run;
  const int64_t run_rows = c.rank3_d0 > 0 ? m / c.rank3_d0 : 0;
  run.x = RowBuffer(backend, c.x_dtype, m, n, n + c.x_pad, c.x_offset, run_rows, c.x_run_gap);
  if (!in_place) {
    run.out = RowBuffer(backend, c.x_dtype, m, n, n + c.out_pad, c.out_offset, run_rows,
                        c.out_run_gap);
  }
  if (add) {
    run.residual =
        RowBuffer(backend, c.residual_dtype, m, n, n + c.residual_pad, c.residual_offset);
    if (!in_place) {
      run.residual_out = RowBuffer(backend, c.residual_dtype, m, n, n + c.residual_out_pad);
    }
  }
  if (c.has_weight) run.weight = RowBuffer(backend, c.weight_dtype, 1, n, n, c.affine_offset);
  if (layer && c.has_bias) run.bias = RowBuffer(backend, c.weight_dtype, 1, n, n, c.affine_offset);
  if (c.stats) {
    run.rstd = RowBuffer(backend, DType::kFloat32, 1, m);
    if (layer) run.mean = RowBuffer(backend, DType::kFloat32, 1, m);
  }

  std::mt19937 rng(c.seed);
  auto fill_input = [&](const std::string& name, RowBuffer& b, double scale, double mean) {
    if (fill) {
      fill(name, b, rng);
    } else {
      b.fill_random(rng, scale, mean);
    }
    b.upload();
  };
  fill_input("x", run.x, 1.0, c.input_mean);
  if (add) fill_input("residual", run.residual, 1.0, 0.0);
  if (c.has_weight) fill_input("weight", run.weight, 1.0, 0.0);
  if (layer && c.has_bias) fill_input("bias", run.bias, 1.0, 0.0);

  if (inputs_before != nullptr) {
    // Host copies of the inputs (CPU-side buffers suffice for the reference).
    auto copy = [&](const RowBuffer& from, RowBuffer& to) {
      if (from.rows() == 0 && from.cols() == 0) return;
      to = RowBuffer(Backend::kCPU, from.dtype(), from.rows(), from.cols(), from.row_stride());
      for (int64_t r = 0; r < from.rows(); ++r) {
        for (int64_t col = 0; col < from.cols(); ++col) to.set(r, col, from.get(r, col));
      }
    };
    copy(run.x, inputs_before->x);
    if (add) copy(run.residual, inputs_before->residual);
    if (c.has_weight) copy(run.weight, inputs_before->weight);
    if (layer && c.has_bias) copy(run.bias, inputs_before->bias);
  }

  NormOptions options;
  options.weight_after_cast = c.weight_after_cast;
  if (c.stats) {
    options.rstd = run.rstd.view_1d();
    if (layer) options.mean = run.mean.view_1d();
  }
  const TensorView none;
  const TensorView x = view_of(c, run.x);
  const TensorView w = c.has_weight ? run.weight.view_1d() : none;
  const TensorView b = layer && c.has_bias ? run.bias.view_1d() : none;
  const TensorView out = in_place ? x : view_of(c, run.out);
  const TensorView r = add ? view_of(c, run.residual) : none;
  const TensorView r_out = add && !in_place ? view_of(c, run.residual_out) : r;
  Stream stream = nullptr;
  switch (c.op) {
    case NormOp::kRms:
      run.status = rms_norm(out, x, w, c.eps, c.weight_offset, options, stream);
      break;
    case NormOp::kAddRmsInPlace:
      run.status = fused_add_rms_norm_inplace(x, r, w, c.eps, c.weight_offset, options, stream);
      break;
    case NormOp::kAddRms:
      run.status = fused_add_rms_norm(out, r_out, x, r, w, c.eps, c.weight_offset, options, stream);
      break;
    case NormOp::kLayer:
      run.status = layer_norm(out, x, w, b, c.eps, options, stream);
      break;
    case NormOp::kAddLayerInPlace:
      run.status = fused_add_layer_norm_inplace(x, r, w, b, c.eps, options, stream);
      break;
    case NormOp::kAddLayer:
      run.status = fused_add_layer_norm(out, r_out, x, r, w, b, c.eps, options, stream);
      break;
  }
  if (backend == Backend::kGPU) {
    const Status sync = gpu_synchronize(0);
    if (run.status.ok() && !sync.ok()) run.status = sync;
  }
  for (RowBuffer* buf : {&run.x, &run.residual, &run.out, &run.residual_out, &run.weight,
                         &run.bias, &run.rstd, &run.mean}) {
    if (buf->rows() > 0 || buf->cols() > 0) buf->download();
  }
  return run;
}

::testing::AssertionResult check_norm_run(const NormCase& c, const NormRun& in,
                                          const NormRun& run) {
  if (!run.status.ok()) {
    return ::testing::AssertionFailure() << c.name() << ": " << run.status.to_string();
  }
  const bool add = is_add(c.op);
  const bool layer = is_layer(c.op);
  const bool in_place = is_in_place(c.op);
  const RowBuffer& out = in_place ? run.x : run.out;
  const RowBuffer& r_out = in_place ? run.residual : run.residual_out;
  Tolerance tol = output_tolerance(c.x_dtype);
  if (c.weight_after_cast) tol.rel *= 2;  // two roundings, each possibly one ulp off
  const int64_t n = c.cols;

  std::ostringstream errors;
  int bad = 0;
  double err2 = 0.0, ref2 = 0.0;
  std::vector<double> h(static_cast<size_t>(n));
  for (int64_t row = 0; row < c.rows; ++row) {
    for (int64_t j = 0; j < n; ++j) {
      if (add) {
        const float sum =
            static_cast<float>(in.x.get(row, j)) + static_cast<float>(in.residual.get(row, j));
        h[j] = round_to_dtype(sum, c.residual_dtype);
        if (r_out.get(row, j) != h[j] && bad++ < 5) {
          errors << "\n  residual_out[" << row << "," << j << "] = " << r_out.get(row, j)
                 << ", expected " << h[j];
        }
      } else {
        h[j] = in.x.get(row, j);
      }
    }
    double mean = 0.0, ss = 0.0;
    if (layer) {
      for (int64_t j = 0; j < n; ++j) mean += h[j];
      mean /= static_cast<double>(n);
      for (int64_t j = 0; j < n; ++j) ss += (h[j] - mean) * (h[j] - mean);
    } else {
      for (int64_t j = 0; j < n; ++j) ss += h[j] * h[j];
    }
    const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(c.eps));
    for (int64_t j = 0; j < n; ++j) {
      double v = (h[j] - mean) * rstd;
      if (c.weight_after_cast) v = round_to_dtype(v, c.x_dtype);
      if (c.has_weight) v *= in.weight.get(0, j) + static_cast<double>(c.weight_offset);
      if (layer && c.has_bias) v += in.bias.get(0, j);
      const double got = out.get(row, j);
      err2 += (got - v) * (got - v);
      ref2 += v * v;
      // Bound: one rounding (or two with weight_after_cast) of each term before the sum with
      // the bias, plus the float32 error of the mean, which (h - mean) carries at |mean|.
      const double w = c.has_weight ? in.weight.get(0, j) + c.weight_offset : 1.0;
      const double b = layer && c.has_bias ? in.bias.get(0, j) : 0.0;
      const double bound = tol.rel * (std::fabs(v - b) + std::fabs(b)) + tol.abs +
                           1e-6 * std::fabs(mean) * rstd * std::fabs(w);
      if (!(std::fabs(got - v) <= bound) && bad++ < 5) {
        errors << "\n  out[" << row << "," << j << "] = " << got << ", expected " << v;
      }
    }
    if (c.stats) {
      const double got_rstd = run.rstd.get(0, row);
      if (!(std::fabs(got_rstd - rstd) <= 2e-4 * rstd) && bad++ < 5) {
        errors << "\n  rstd[" << row << "] = " << got_rstd << ", expected " << rstd;
      }
      if (layer) {
        const double got_mean = run.mean.get(0, row);
        const double scale = std::sqrt(ss / static_cast<double>(n)) + std::fabs(mean);
        if (!(std::fabs(got_mean - mean) <= 1e-5 * scale) && bad++ < 5) {
          errors << "\n  mean[" << row << "] = " << got_mean << ", expected " << mean;
        }
      }
    }
  }
  // Padding (poisoned) must be untouched everywhere; read-only inputs must be unchanged.
  const std::pair<const char*, const RowBuffer*> all[] = {
      {"x", &run.x},           {"residual", &run.residual}, {"out", &run.out},
      {"residual_out", &run.residual_out}, {"weight", &run.weight}, {"bias", &run.bias}};
  for (const auto& [name, buf] : all) {
    if ((buf->rows() > 0 || buf->cols() > 0) && !buf->padding_untouched() && bad++ < 5) {
      errors << "\n  " << name << ": memory outside the rows was written";
    }
  }
  if (!in_place) {
    for (int64_t row = 0; row < c.rows && bad < 5; ++row) {
      for (int64_t j = 0; j < n; ++j) {
        if (run.x.get(row, j) != in.x.get(row, j) ||
            (add && run.residual.get(row, j) != in.residual.get(row, j))) {
          errors << "\n  an input was modified at [" << row << "," << j << "]";
          ++bad;
          break;
        }
      }
    }
  }
  if (bad > 0) {
    return ::testing::AssertionFailure()
           << c.name() << ": " << bad << " mismatches (relative error "
           << (ref2 > 0 ? std::sqrt(err2 / ref2) : 0.0) << ")" << errors.str();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace fusekit::testing
