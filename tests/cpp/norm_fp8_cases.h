// Test cases of RMSNorm with an fp8 output (rms_norm_quant_fp8[_static],
// fused_add_rms_norm_quant_fp8[_static]): how one call is set up, run on a backend, and checked.
//
// Three checks, from the loosest to the most exact:
//   check_norm_fp8_run: against a float64 reference written from include/fusekit/norm.h (h, rstd
//     and y in float64, scale = max|y| / fp8_max capped and floored, or the static scale): each
//     decoded code within half an fp8 step of y / scale (plus float32's error in y), saturating
//     at +-fp8_max; the scale within float32's error of the reference; residual_out exact.
//   matches_quantized_plain_op: the codes and scales, bit for bit, equal the quantization (as
//     norm.h defines it, in float32, with an fp8 encoder of the test's own) of the float32 output
//     of the plain op (rms_norm / fused_add_rms_norm with a float32 out) on the same backend.
//     Only for float32 x, weight and residual, where that output is y itself.
//   agree_across_backends: GPU against CPU: residual_out bit for bit, codes within one step of each
//     other with NaN in the same places, dynamic scales within float32's error (the two backends'
//     row sums and reciprocal square roots differ in order and rounding).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "test_support.h"

namespace fusekit::testing {

enum class NormFp8Op {
  kRms,     // rms_norm_quant_fp8[_static]
  kAddRms,  // fused_add_rms_norm_quant_fp8[_static]
};
enum class Fp8Scale { kDynamic, kStatic };

const char* norm_fp8_op_name(NormFp8Op op, Fp8Scale scale);  // the C++ function's name

struct NormFp8Case {
  NormFp8Op op = NormFp8Op::kRms;
  Fp8Scale scale = Fp8Scale::kDynamic;
  Fp8Format format = Fp8Format::kE4M3FN;
  DType x_dtype = DType::kBFloat16;
  DType weight_dtype = DType::kBFloat16;
  DType residual_dtype = DType::kBFloat16;
  int64_t rows = 3;
  int64_t cols = 769;
  // Row stride = cols + pad; base pointer `offset` elements past an aligned allocation.
  int64_t x_pad = 0, out_pad = 0, residual_pad = 0, residual_out_pad = 0;
  int64_t x_offset = 0, out_offset = 0, residual_offset = 0;
  int rank3_d0 = 0;                // > 0: pass [d0, rows / d0, cols] views
  bool rank1 = false;              // rows == 1: pass 1-D [cols] views
  // With rank3_d0: x's view's d0 runs of rows lie a further x_run_gap elements apart than its
  // row stride alone would put them (rows in runs, which the fp8 forms refuse).
  int64_t x_run_gap = 0;
  bool residual_in_place = false;  // add: residual_out is residual itself
  float eps = 1e-6f;
  float weight_offset = 0.0f;
  float scale_upper_bound = 0.0f;  // dynamic
  bool scale_keepdim = false;      // dynamic: scale of out's shape with last dim 1, else [M]
  float static_scale = 0.02f;      // static: the scale's value
  bool scalar_scale = false;       // static: shape [] instead of [1]
  uint32_t seed = 1;

  std::string name() const;
};

// Buffers of one call, downloaded to the host after it ran. residual_out is absent when the
// call updated residual in place.
struct NormFp8Run {
  RowBuffer x, residual, residual_out, weight, out, scale;
  Status status;
};

// Fills an input buffer ("x", "residual", "weight"); the default draws random values (never
// zero) from the case's seed.
using NormFp8Fill =
    std::function<void(const std::string& name, RowBuffer& buffer, std::mt19937& rng)>;

// Poisoned buffers on `backend`, inputs filled, the op called, everything downloaded. The inputs
// as they were before the call go to `inputs_before` (host copies).
NormFp8Run run_norm_fp8_case(const NormFp8Case& c, Backend backend,
                             NormFp8Run* inputs_before = nullptr, const NormFp8Fill& fill = {});

::testing::AssertionResult check_norm_fp8_run(const NormFp8Case& c, const NormFp8Run& inputs,
                                              const NormFp8Run& run);

::testing::AssertionResult matches_quantized_plain_op(const NormFp8Case& c, Backend backend,
                                                      const NormFp8Run& inputs,
                                                      const NormFp8Run& run);

::testing::AssertionResult agree_across_backends(const NormFp8Case& c, const NormFp8Run& gpu,
                                                 const NormFp8Run& cpu);

// The bits of everything row `r` of a run wrote: codes, residual_out (or the updated residual),
// the dynamic scale.
std::vector<uint64_t> norm_fp8_row_bits(const NormFp8Case& c, const NormFp8Run& run, int64_t r);

}  // namespace fusekit::testing
