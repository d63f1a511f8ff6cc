// Norm test cases: how one call is set up (dtypes, sizes, layout, options), run on a backend,
// and checked against a float64 reference.
//
// The reference follows the definition in include/fusekit/norm.h: h = round_to_residual_dtype(
// float32(x) + float32(residual)) when adding, statistics of h in float64, the optional rounding
// before the weight, and no rounding of the result, which is compared with a per-dtype tolerance.
#pragma once

#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test_support.h"

namespace fusekit::testing {

enum class NormOp {
  kRms,
  kAddRmsInPlace,
  kAddRms,  // out of place
  kLayer,
  kAddLayerInPlace,
  kAddLayer,
};
const char* norm_op_name(NormOp op);
bool is_layer(NormOp op);
bool is_add(NormOp op);
bool is_in_place(NormOp op);

struct NormCase {
  NormOp op = NormOp::kRms;
  DType x_dtype = DType::kBFloat16;
  DType weight_dtype = DType::kBFloat16;
  DType residual_dtype = DType::kBFloat16;
  int64_t rows = 3;
  int64_t cols = 4096;
  // Row stride = cols + pad; base pointer `offset` elements past an aligned allocation.
  int64_t x_pad = 0, out_pad = 0, residual_pad = 0, residual_out_pad = 0;
  int64_t x_offset = 0, out_offset = 0, residual_offset = 0;
  int64_t affine_offset = 0;  // weight's and bias's base pointers, likewise
  int rank3_d0 = 0;  // > 0: pass [d0, rows / d0, cols] views
  bool rank1 = false;  // rows == 1: pass 1-D [cols] views
  // With rank3_d0: x's and out's views' d0 runs of rows lie a further `_run_gap` elements apart
  // than their row stride alone would put them (rows in runs, as per-head views of a fused
  // projection's output; 0: the view flattens into rows of one stride).
  int64_t x_run_gap = 0, out_run_gap = 0;
  bool has_weight = true;
  bool has_bias = true;  // layer norms only
  float eps = 1e-6f;
  float weight_offset = 0.0f;
  bool weight_after_cast = false;
  bool stats = false;  // request rstd (and mean)
  double input_mean = 0.0;  // shifts x, to exercise LayerNorm's cancellation
  uint32_t seed = 1;

  std::string name() const;
};

// Buffers of one call, after it ran (downloaded to the host).
struct NormRun {
  RowBuffer x, residual, out, residual_out, weight, bias, rstd, mean;
  Status status;
};

// Fills an input buffer; the default draws normal random values (never zero) from the case seed.
using NormFill = std::function<void(const std::string& name, RowBuffer& buffer, std::mt19937& rng)>;

// Makes poisoned buffers on `backend`, fills inputs, calls the op and downloads everything. The
// inputs as they were before the call are returned in `inputs_before` (x is overwritten by the
// in-place forms).
NormRun run_norm_case(const NormCase& c, Backend backend, NormRun* inputs_before = nullptr,
                      const NormFill& fill = {});

// Compares a finished run with the float64 reference computed from `inputs` (the buffers before
// the call): outputs within tolerance and free of NaN, residual_out bit-exact, rstd/mean close,
// padding and read-only inputs untouched.
::testing::AssertionResult check_norm_run(const NormCase& c, const NormRun& inputs,
                                          const NormRun& run);

}  // namespace fusekit::testing
