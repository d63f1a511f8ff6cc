// CPU backend for the gated activations: plain loops over rows, float32 math from core/act_math.h
// (the same functions, operation for operation, as the GPU kernels: PortableOps for float32
// outputs and the backward pass, Fp8Ops for the fp8 forms), so fp8 codes and scales are
// the reference the GPU must match bit for bit. Compiled with floating-point contraction off
// (CMakeLists.txt) for that reason. Rows are independent and split across OpenMP threads when
// OpenMP is available and the call is large enough (cpu/common/parallel.h); each row's loops run
// compiled for AVX2 + FMA where the CPU has them (cpu/common/cpu_isa.h), with the same bits, and
// are written to vectorize: one pass per loop, no branch in a loop's body. A row is read and
// written a run at a time (cpu/common/row_convert.h: fp16 through local float32 arrays).
#include <cstdint>
#include <vector>

#include "act/act_problem.h"
#include "core/act_math.h"
#include "core/dtype_dispatch.h"
#include "core/fp8.h"
#include "cpu/common/cpu_isa.h"
#include "cpu/common/fp8_rows.h"
#include "cpu/common/parallel.h"
#include "cpu/common/row_convert.h"

namespace fusekit::detail {
namespace {

template <Activation kAct, typename T>
void act_rows(const ActProblem& p) {
  const int64_t n = p.cols;
#if defined(_OPENMP)
#pragma omp parallel if (cpu_parallel_worthwhile(p.rows, p.rows * n))
#endif
  {
    std::vector<float> y(p.quantize ? static_cast<size_t>(n) : 0);
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (int64_t row = 0; row < p.rows; ++row) {
      const T* gate = static_cast<const T*>(p.gate) + row * p.gate_stride;
      const T* up = static_cast<const T*>(p.up) + row * p.up_stride;
      if (!p.quantize) {
        T* out = static_cast<T*>(p.out) + row * p.out_stride;
        for_this_cpu([&] {
          for_each_run<T>(n, [&](int64_t j0, int64_t count) {
            const RunReader<T> g(gate + j0, count), u(up + j0, count);
            RunWriter<T> y(out + j0, count);
            for (int64_t k = 0; k < count; ++k) y.set(k, ActMath<kAct>::value(g[k]) * u[k]);
            y.finish();
          });
        });
        continue;
      }
      float* y_row = y.data();
      float max_abs = 0.0f;
      for_this_cpu([&] {
        for_each_run<T>(n, [&](int64_t j0, int64_t count) {
          const RunReader<T> g(gate + j0, count), u(up + j0, count);
          float* y = y_row + j0;
          for (int64_t k = 0; k < count; ++k) {
            y[k] = ActMath<kAct>::template value<Fp8Ops>(g[k]) * u[k];
          }
        });
        max_abs = row_max_abs(y_row, n);
      });
      uint8_t* out = static_cast<uint8_t*>(p.out) + row * p.out_stride;
      dispatch_fp8_format(p.format, [&](auto format_tag) {
        using F = decltype(format_tag);
        const float scale = fp8_row_scale<F>(max_abs, p.scale_upper_bound);
        const float inverse = fp8_inverse_row_scale(scale);
        for_this_cpu([&] { quantize_row_codes<F>(y_row, n, inverse, out); });
        p.scale[row] = scale;
      });
    }
  }
}

template <Activation kAct, typename T>
void act_backward_rows(const ActBackwardProblem& p) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (cpu_parallel_worthwhile(p.rows, p.rows * p.cols))
#endif
  for (int64_t row = 0; row < p.rows; ++row) {
    const T* grad_out = static_cast<const T*>(p.grad_out) + row * p.grad_out_stride;
    const T* gate = static_cast<const T*>(p.gate) + row * p.gate_stride;
    const T* up = static_cast<const T*>(p.up) + row * p.up_stride;
    T* grad_gate = static_cast<T*>(p.grad_gate) + row * p.grad_gate_stride;
    T* grad_up = static_cast<T*>(p.grad_up) + row * p.grad_up_stride;
    for_this_cpu([&] {
      for_each_run<T>(p.cols, [&](int64_t j0, int64_t count) {
        const RunReader<T> g(gate + j0, count), dy(grad_out + j0, count), u(up + j0, count);
        RunWriter<T> dg(grad_gate + j0, count), du(grad_up + j0, count);
        for (int64_t k = 0; k < count; ++k) {
          // Read once into locals: a store through dg might alias the inputs as far as the
          // compiler knows, and would stop it sharing value's and derivative's common terms.
          const float gate_k = g[k];
          const float dy_k = dy[k];
          const float up_k = u[k];
          dg.set(k, gate_gradient<kAct>(dy_k, up_k, gate_k));
          du.set(k, dy_k * ActMath<kAct>::value(gate_k));
        }
        dg.finish();
        du.finish();
      });
    });
  }
}

}  // namespace

Status run_act_cpu(const ActProblem& p) {
  dispatch_activation(p.act, [&](auto act_tag) {
    dispatch_float_dtype(p.dtype, [&](auto dtype_tag) {
      act_rows<decltype(act_tag)::value, typename decltype(dtype_tag)::type>(p);
    });
  });
  return Status();
}

Status run_act_backward_cpu(const ActBackwardProblem& p) {
  dispatch_activation(p.act, [&](auto act_tag) {
    dispatch_float_dtype(p.dtype, [&](auto dtype_tag) {
      act_backward_rows<decltype(act_tag)::value, typename decltype(dtype_tag)::type>(p);
    });
  });
  return Status();
}

}  // namespace fusekit::detail
