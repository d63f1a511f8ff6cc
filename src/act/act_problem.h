// ActProblem / ActBackwardProblem: one validated gated-activation call, flattened to rows and raw
// pointers.
//
// The public entry points (act_api.cc) check their arguments and build one of these; both
// backends take it as their only input. The fused-input form [..., 2N] becomes the split form
// here (up = gate + N with the same row stride), so every backend handles one layout.
#pragma once

#include <cstdint>
#include <type_traits>

#include "fusekit/activation.h"
#include "fusekit/fp8.h"
#include "fusekit/status.h"
#include "fusekit/tensor.h"

namespace fusekit::detail {

struct ActProblem {
  Activation act = Activation::kSilu;
  int64_t rows = 0;  // M
  int64_t cols = 0;  // N
  DType dtype = DType::kFloat32;  // gate and up; also out's unless quantizing

  const void* gate = nullptr;
  int64_t gate_stride = 0;  // row strides, in elements
  const void* up = nullptr;
  int64_t up_stride = 0;
  void* out = nullptr;
  int64_t out_stride = 0;

  bool quantize = false;  // out is fp8 of `format`, with one scale per row
  Fp8Format format = Fp8Format::kE4M3FN;
  float* scale = nullptr;            // [M], quantize only
  float scale_upper_bound = 0.0f;    // 0: none

  Device device;
};

struct ActBackwardProblem {
  Activation act = Activation::kSilu;
  int64_t rows = 0;
  int64_t cols = 0;
  DType dtype = DType::kFloat32;  // every tensor

  const void* grad_out = nullptr;
  int64_t grad_out_stride = 0;
  const void* gate = nullptr;
  int64_t gate_stride = 0;
  const void* up = nullptr;
  int64_t up_stride = 0;
  void* grad_gate = nullptr;
  int64_t grad_gate_stride = 0;
  void* grad_up = nullptr;
  int64_t grad_up_stride = 0;

  Device device;
};

// Calls f(std::integral_constant<Activation, a>{}) for the runtime activation `act` (validated).
template <typename F>
decltype(auto) dispatch_activation(Activation act, F&& f) {
  using A = Activation;
  if (act == A::kGeluTanh) return f(std::integral_constant<A, A::kGeluTanh>{});
  if (act == A::kGelu) return f(std::integral_constant<A, A::kGelu>{});
  return f(std::integral_constant<A, A::kSilu>{});
}

// Backends. The GPU ones return kUnsupported in builds without a GPU backend.
Status run_act_cpu(const ActProblem& p);
Status run_act_gpu(const ActProblem& p, Stream stream);
Status run_act_backward_cpu(const ActBackwardProblem& p);
Status run_act_backward_gpu(const ActBackwardProblem& p, Stream stream);

}  // namespace fusekit::detail
