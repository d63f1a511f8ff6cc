// Gated-activation test cases: how one call is laid out (fused [..., 2N] input, two strided
// halves of one buffer, or two separate buffers), run on a backend, and checked against a float64
// reference written from the definitions in include/fusekit/activation.h (std::exp, std::tanh,
// std::erfc in double; nothing from src/core/act_math.h).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/act/act_config.h"
#include "gtest/gtest.h"
#include "test_support.h"

namespace fusekit::testing {

enum class ActMode { kForward, kQuantFp8, kBackward };
enum class ActLayout {
  kFused,          // x [M, 2N]
  kSplitHalves,    // gate, up: the two halves of one [M, 2N + pad] buffer (strided views)
  kSplitSeparate,  // gate, up: separate buffers with different strides and offsets
};
const char* act_mode_name(ActMode m);
const char* act_layout_name(ActLayout l);

struct ActCase {
  Activation act = Activation::kSilu;
  ActMode mode = ActMode::kForward;
  ActLayout layout = ActLayout::kFused;
  DType dtype = DType::kBFloat16;
  int64_t rows = 3;
  int64_t cols = 769;        // N
  int64_t in_pad = 0;        // extra elements per input row
  int64_t out_pad = 0;       // extra elements per output row
  int64_t in_offset = 0;     // base pointers this many elements past an aligned allocation
  int64_t out_offset = 0;
  int rank3_d0 = 0;          // > 0: pass [d0, rows / d0, ...] views
  bool rank1 = false;        // rows == 1: pass 1-D views
  Fp8Format format = Fp8Format::kE4M3FN;
  float scale_upper_bound = 0.0f;
  bool scale_keepdim = false;  // scale as out's shape with last dim 1, else [M]
  uint32_t seed = 1;

  std::string name() const;
};

// Buffers of one call, downloaded to the host after it ran.
struct ActRun {
  RowBuffer in;        // x [M, 2N] (fused, split halves) or gate [M, N] (separate)
  RowBuffer up;        // separate layout only
  RowBuffer grad_out;  // backward
  RowBuffer out;       // forward / quant: [M, N]; backward: grad_x [M, 2N] or grad_gate [M, N]
  RowBuffer grad_up;   // backward, split layouts
  RowBuffer scale;     // quant: [1, M]
  Status status;
  // The input buffers' bytes as filled, before the call: check_act_run holds the inputs to them
  // (the reference is computed from the inputs as they are after the call).
  std::vector<uint8_t> in_before, up_before, grad_out_before;

  double gate(int64_t r, int64_t j) const;
  double up_value(int64_t r, int64_t j) const;
  double grad_gate(int64_t r, int64_t j) const;
  double grad_up_value(int64_t r, int64_t j) const;
};

// Sets the inputs (gate, up, grad_out as RowBuffers on the host, before upload). The default
// fills every input with random values (never zero) from the case's seed.
using ActFill = std::function<void(ActRun& run, std::mt19937& rng)>;

// Poisoned buffers on `backend`, inputs filled, the op called, everything downloaded.
ActRun run_act_case(const ActCase& c, Backend backend, const ActFill& fill = {});

// The quantized case c (rank 2) on the GPU through the internal entry that takes an explicit
// launch configuration (gpu::run_act_gpu_with, as the benchmark's sweep): `configure` is given the
// call's ActShape and sets the configuration, or returns false where the shape has none of the
// kind it makes (run.status is then kUnsupported and nothing is launched).
using ActQuantConfigure = std::function<bool(const gpu::ActShape&, gpu::ActQuantConfig*)>;
ActRun run_act_quant_case_with(const ActCase& c, const ActQuantConfigure& configure);

// Output against the float64 reference (and scales, fp8 codes for the quantized mode), no NaN
// unless an input is NaN, padding and inputs untouched.
::testing::AssertionResult check_act_run(const ActCase& c, const ActRun& run);

// Whether two runs of the same case wrote bitwise the same outputs (and scales).
::testing::AssertionResult same_act_outputs(const ActCase& c, const ActRun& a, const ActRun& b);

// Whether the GPU must write the CPU backend's bits for this case: every case but the plain
// forward op with 16-bit outputs, whose GPU exp and reciprocal are the hardware approximations
// (src/gpu/act/act_kernel.cuh, ForwardOps); check_act_run holds those to the float64 reference.
bool gpu_writes_cpu_bits(const ActCase& c);

// The float64 definitions.
double act_reference(Activation act, double g);
double act_derivative_reference(Activation act, double g);

// The parameter space of the suites over every backend, activation and mode (ActValues,
// ActInvariance), and their test names: BACKEND_ACTIVATION_MODE, e.g. gpu_silu_quant_fp8.
using ActParam = std::tuple<Backend, Activation, ActMode>;
inline auto every_act_param() {
  return ::testing::Combine(
      ::testing::Values(Backend::kCPU, Backend::kGPU),
      ::testing::Values(Activation::kSilu, Activation::kGeluTanh, Activation::kGelu),
      ::testing::Values(ActMode::kForward, ActMode::kQuantFp8, ActMode::kBackward));
}
std::string act_param_name(const ::testing::TestParamInfo<ActParam>& info);

}  // namespace fusekit::testing
