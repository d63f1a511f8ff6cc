// Backward test cases of the normalization family: how one backward call is set up (op, dtypes,
// sizes, layout, which gradients), run on a backend, and checked against a float64 reference.
//
// The inputs are random grad_out, h (x or residual_out), weight and grad_residual_out; the saved
// statistics are computed from h in float64 and stored as float32, as the forward pass would. The
// reference differentiates the definition in include/fusekit/norm.h in float64 at the stored
// inputs, so the only differences allowed are float32 arithmetic and the rounding of each output.
#pragma once

#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "test_support.h"

namespace fusekit::testing {

enum class BackwardOp { kRms, kAddRms, kLayer, kAddLayer };
const char* backward_op_name(BackwardOp op);
bool backward_is_layer(BackwardOp op);
bool backward_is_add(BackwardOp op);

struct BackwardCase {
  BackwardOp op = BackwardOp::kRms;
  DType grad_dtype = DType::kBFloat16;  // grad_out (the forward output's dtype)
  DType x_dtype = DType::kBFloat16;     // h, grad_h, grad_residual_out
  DType weight_dtype = DType::kBFloat16;
  int64_t rows = 3;
  int64_t cols = 4096;
  int64_t pad = 0;     // extra elements per row of every [M, N] tensor (each a different amount)
  int64_t offset = 0;  // base pointers this many elements past an aligned allocation
  bool has_weight = true;
  bool weight_grad = true;
  bool bias_grad = true;  // layer norms only
  float weight_offset = 0.0f;
  uint32_t seed = 1;

  std::string name() const;
};

struct BackwardRun {
  RowBuffer grad_out, x, grad_extra, grad_x, rstd, mean, weight, grad_weight, grad_bias,
      workspace;
  Status status;
};

// Makes poisoned outputs (the workspace too) on `backend`, fills the inputs, calls the op and
// downloads everything.
BackwardRun run_backward_case(const BackwardCase& c, Backend backend);

// Compares grad_x, grad_weight and grad_bias with the float64 reference: within tolerance, free of
// NaN, row padding untouched.
::testing::AssertionResult check_backward_run(const BackwardCase& c, const BackwardRun& run);

}  // namespace fusekit::testing
