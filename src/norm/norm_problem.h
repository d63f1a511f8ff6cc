// NormProblem: one validated normalization call, flattened to rows and raw pointers.
//
// The public entry points (norm_api.cc) check their arguments and build one of these; the CPU
// backend (cpu/norm) and the GPU backend (gpu/norm) each take it as their only input, so all four
// ops and both backends share one description and the backends never re-validate.
#pragma once

#include <cstdint>

#include "fusekit/fp8.h"
#include "fusekit/status.h"
#include "fusekit/tensor.h"

namespace fusekit::detail {

enum class NormKind { kRms, kLayer };

struct NormProblem {
  NormKind kind = NormKind::kRms;
  bool add_residual = false;  // fused_add_*: h = x + residual is normalized

  int64_t rows = 0;  // M
  int64_t cols = 0;  // N

  DType x_dtype = DType::kFloat32;         // also out's dtype, unless out_fp8
  DType weight_dtype = DType::kFloat32;    // dtype of weight and bias (when present)
  DType residual_dtype = DType::kFloat32;  // dtype of residual and residual_out (add only)

  // Row r of x starts at x + r * x_stride + (r / run_rows) * x_run_skip (elements), and likewise
  // out's: rows in runs (core/validate.h, Rows), such as per-head rows of a fused projection's
  // output; rms_norm and layer_norm only. run_rows 0: one run, every skip 0.
  const void* x = nullptr;
  int64_t x_stride = 0;  // row strides, in elements
  int64_t x_run_skip = 0;
  void* out = nullptr;
  int64_t out_stride = 0;
  int64_t out_run_skip = 0;
  int64_t run_rows = 0;  // < 2^31 rows in all when > 0
  const void* residual = nullptr;
  int64_t residual_stride = 0;
  void* residual_out = nullptr;
  int64_t residual_out_stride = 0;

  const void* weight = nullptr;  // [N]; may be null for layer norms (then 1)
  const void* bias = nullptr;    // [N]; layer norms only, may be null (then 0)
  float* rstd = nullptr;         // [M] optional
  float* mean = nullptr;         // [M] optional, layer norms only

  // fp8 output (RMSNorm kinds only): out holds codes of out_fp8_format, out = fp8(y * (1 / s))
  // with y the float32 value out would otherwise be rounded from (core/fp8.h). s is either
  // static_scale[0] (a float32 scalar on the problem's device, read by the kernel) or, with
  // dynamic_scale set, the row's own scale from max|y| (fp8_row_scale, capped by
  // scale_upper_bound when > 0), written to dynamic_scale[row]. Exactly one of the two is set.
  bool out_fp8 = false;
  Fp8Format out_fp8_format = Fp8Format::kE4M3FN;
  const float* static_scale = nullptr;  // [1]
  float* dynamic_scale = nullptr;       // [M]
  float scale_upper_bound = 0.0f;

  float eps = 1e-6f;
  float weight_offset = -0.0f;  // a zero offset is -0, which leaves a -0 weight as it is (norm_api)
  bool weight_after_cast = false;

  Device device;

  // The dtype of h, the values that get normalized: residual's dtype when adding, else x's.
  DType source_dtype() const { return add_residual ? residual_dtype : x_dtype; }

  // Elements from x's or out's base to the start of its row `row` (stride and run_skip its own).
  int64_t row_offset(int64_t row, int64_t stride, int64_t run_skip) const {
    return row * stride + (run_rows > 0 ? row / run_rows * run_skip : 0);
  }
};

// Backends. The GPU one is a stub returning kUnsupported in builds without a GPU backend.
Status run_norm_cpu(const NormProblem& p);
Status run_norm_gpu(const NormProblem& p, Stream stream);

}  // namespace fusekit::detail
