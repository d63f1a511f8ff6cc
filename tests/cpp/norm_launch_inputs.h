// Inputs of the launch-shape tests (test_norm_invariance.cc, test_norm_fp8_launch_shapes.cc,
// test_norm_split_rows.cc), which run one NormProblem under several explicit NormConfigs
// (gpu::run_norm_gpu_with) and compare the outputs' bits.
#pragma once

#include <cstdint>
#include <random>

#include <gtest/gtest.h>

#include "norm/norm_problem.h"
#include "test_support.h"

namespace fusekit::testing {

// Random GPU inputs for an M x N problem (x, residual, weight, bias) and a NormProblem over
// them; outputs are set by the caller.
struct LaunchShapeInputs {
  LaunchShapeInputs(bool layer, bool add, DType dtype, int64_t m, int64_t n, uint32_t seed)
      : x(Backend::kGPU, dtype, m, n), r(Backend::kGPU, dtype, m, n),
        w(Backend::kGPU, dtype, 1, n), b(Backend::kGPU, dtype, 1, n) {
    refill(seed);
    p.kind = layer ? detail::NormKind::kLayer : detail::NormKind::kRms;
    p.add_residual = add;
    p.rows = m;
    p.cols = n;
    p.x_dtype = p.weight_dtype = p.residual_dtype = dtype;
    p.x = x.data();
    p.x_stride = n;
    p.residual = r.data();
    p.residual_stride = n;
    p.weight = w.data();
    p.bias = layer ? b.data() : nullptr;
    p.eps = 1e-5f;
    p.weight_offset = -0.0f;  // a zero offset, as the API passes it (norm_api.cc)
    p.device = Device::gpu(0);
    static_scale.set(0, 0, 0.0123);
    static_scale.upload();
  }
  // The inputs drawn again from `seed` (the constructor's values for the same seed) and uploaded:
  // a launch that wrote over x and residual in place can then run again on the same buffers.
  void refill(uint32_t seed) {
    std::mt19937 rng(seed);
    for (RowBuffer* in : {&x, &r, &w, &b}) {
      in->fill_random(rng);
      if (in == &w) {
        // Zero weights of both signs: y = v * w keeps the sign, which a kernel that added a zero
        // offset as +0 would lose (OutputForm::kPlain skips the add).
        w.set(0, 0, -0.0);
        if (w.cols() > 1) w.set(0, w.cols() - 1, 0.0);
      }
      in->upload();
    }
  }
  // An fp8 output in `format`; the caller points p.dynamic_scale at its buffer, or p.static_scale
  // at static_scale's.
  void output_fp8(Fp8Format format) {
    p.out_fp8 = true;
    p.out_fp8_format = format;
  }
  RowBuffer x, r, w, b;
  RowBuffer static_scale{Backend::kGPU, DType::kFloat32, 1, 1};  // 0.0123
  detail::NormProblem p;
};

// The launch-shape tests' comparison: the first launch's output bits become the reference, and
// each later launch's must equal them.
template <class Bits>
void expect_bits_of_first_launch(Bits* reference, const Bits& bits) {
  if (reference->empty()) {
    *reference = bits;
  } else {
    EXPECT_EQ(bits, *reference);
  }
}

}  // namespace fusekit::testing
