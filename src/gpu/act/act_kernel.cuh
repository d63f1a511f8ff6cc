// Gated-activation kernels (act(gate) * up and the backward pass) and what the quantized form's
// kernels share with them (ActKernelArgs, ActTraits, group_values): device code only.
//
// Why two kernel shapes. The plain op and the backward pass are elementwise: each element of the
// output needs one element of gate and of up (and of grad_out), so nothing is shared between
// threads and nothing goes through shared memory. act_elementwise_kernel numbers its threads
// flat over (row, thread of the row) slots, a row's threads taking its 16-byte groups strided,
// so every thread has work whatever the row length (a 2D grid of power-of-two blocks left up to
// a third of the threads of N = 11008 idle). The grid covers every row at once, one group per
// thread for the forward op (a decode step is one short dependent chain per thread, and a large
// batch many short-lived warps), two for the backward pass of a large batch (two independent
// chains of math, all loads issued before any use). The math keeps the issue slots busy, so it
// is many resident warps, not many loads per warp, that hide the memory latency. Where the
// launch is simple (whole groups, every row at once, 32-bit offsets: most calls), the forward op
// runs act_forward_compact_kernel, the same math without the bounds checks, the row loop and the
// 64-bit index arithmetic, which cost as many instructions as an 8-byte group's math.
//
// The quantized op, which needs each row's max |y| before it writes, has kernels of its own
// (act_quant_kernel.cuh), built on this file's arguments, traits and math.
//
// Numerics are those of the CPU backend, operation for operation (core/act_math.h, compiled without
// contraction): float32 math, one rounding to the output dtype, and for fp8 the same scale and
// conversion, so GPU and CPU outputs are the same bits. The one exception is the plain forward op
// with 16-bit outputs, whose exp and reciprocal come from the special-function units (ForwardOps
// below): within a few 1e-6 of the exact float32 value, so within the output's rounding of the CPU
// result, and many fewer instructions per element. kLoad, the width of each memory access, adapts
// to alignment without changing any value. A row's max is order-independent, so results do not
// depend on the launch shape or on the other rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/act_math.h"
#include "core/fast_divide.h"
#include "core/fp8.h"
#include "gpu/act/act_config.h"
#include "gpu/common/vec_io.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

using detail::ActMath;
using detail::gate_gradient;

// The forward primitives of core/act_math.h from the special-function units. e^-a is
// 2^(64 - a log2 e) 2^-64: for every a up to 104 (past which e^-a rounds to 0 anyway) the offset
// keeps the hardware's input at -86 or above, where its result is a normal float, and the final
// multiply rounds into the subnormal range once, as the portable form does; the price is one
// rounding of the offset exponent (1.3e-6 relative at most). e^(-x^2 / 2) takes x^2 as rounded
// and leaves out its rounding error (the compiler then drops the exact product's fma): that
// moves the result by x^2 2^-25 relative, under 1e-6 for |x| <= 5.6 (beyond which a float16
// gelu output is 0) and 7e-6 at the clamp, |x| = 15, a hundredth of a bfloat16 rounding step.
// NaN stays NaN and e^-inf is 0.
struct ApproxOps {
  static constexpr bool kFloat32Accurate = false;
  static constexpr bool kNeedsUpperClamp = false;  // see normal_cdf
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kOffset = 64.0f;
  static constexpr float kUndoOffset = 5.42101086242752217e-20f;  // 2^-64
  FUSEKIT_DEVICE static float exp_neg(float a) {
    return approx_exp2(fmaf(a, -kLog2e, kOffset)) * kUndoOffset;
  }
  FUSEKIT_DEVICE static float exp_neg_half_square(float xx, float /*xx_err*/) {
    constexpr float kHalfLog2e = 0.5f * kLog2e;
    return approx_exp2(fmaf(xx, -kHalfLog2e, kOffset)) * kUndoOffset;
  }
  FUSEKIT_DEVICE static float reciprocal(float d) { return approx_reciprocal(d); }
};

// The forward math of the plain op: a 16-bit output is one rounding of the float32 value, whose
// step (2^-8 or 2^-11 relative) is a thousand times ApproxOps' error, so those outputs take the
// cheaper primitives; float32 outputs take the portable ones and match the CPU backend bit for
// bit. The fp8 forms take detail::Fp8Ops (group_values), as the CPU backend does: their codes must
// match the CPU's.
template <typename T>
using ForwardOps = std::conditional_t<sizeof(T) == 2, ApproxOps, detail::PortableOps>;

// Everything a kernel reads besides its template parameters. Passed by value. In the order the
// forward kernels' paths read it (as NormKernelArgs, norm_kernel_args.cuh, says why: each 64-byte
// line of the constant bank a kernel touches first misses in the SM's constant cache): the
// tensors and their row strides in the first 48 bytes, which share a line with the driver's
// memory descriptor; then the row shape, the fp8 scales and the elementwise kernels' thread
// space (the next line); the backward pass's tensors and the fp8 format after.
struct ActKernelArgs {
  const void* gate;
  const void* up;
  void* out;  // forward: out; backward: grad_gate
  int64_t gate_stride;
  int64_t up_stride;
  int64_t out_stride;
  int64_t rows;
  int64_t cols;
  float* scale;  // quantized
  float scale_upper_bound;
  int cluster_blocks;        // quantized, cluster path: blocks per row
  int trigger_after_writes;  // ActElementwiseConfig::trigger_after_writes
  // Elementwise kernels (act_config.h's ActElementwiseConfig): the flat thread space.
  uint32_t threads_per_row;
  detail::FastDivider row_of_slot;  // slot / threads_per_row
  uint32_t active_threads;
  int64_t rows_per_pass;
  const void* grad_out;  // backward
  void* grad_up;         // backward
  int64_t grad_out_stride;
  int64_t grad_up_stride;
  detail::Fp8Spec fp8;  // quantized: the format (read by Fp8FormatInArgs kernels)
  // Quantized, one block a row: how many rows ahead each block asks L2 for the inputs of
  // (ActQuantConfig::prefetch_rows; 0: none).
  int64_t prefetch_rows;
};

static_assert(offsetof(ActKernelArgs, out_stride) < 48 &&
                  offsetof(ActKernelArgs, rows_per_pass) < 112,
              "ActKernelArgs: the tensors and strides in its first 48 bytes, the row shape, scales "
              "and thread space in the next 64");

// kGroupBytes: the bytes of each input a thread takes per group; 16, or 8 for the narrow groups
// of small batches (act_config.h).
template <Activation kAct_, typename T_, int kLoad_, int kGroupBytes = 16>
struct ActTraits {
  static constexpr Activation kAct = kAct_;
  using T = T_;
  static constexpr int kGroup = kGroupBytes / static_cast<int>(sizeof(T_));
  static constexpr int kLoad = kLoad_;
  static_assert(kGroup % kLoad_ == 0, "the access width must divide the group");
};

// One thread's inputs for one row: kUnroll groups of gate and up (and grad_out for backward).
template <class K, int kUnroll, bool kBackward>
struct ActInputs {
  using T = typename K::T;
  Packed<T, K::kGroup> g[kUnroll], u[kUnroll], dy[kBackward ? kUnroll : 1];

  FUSEKIT_DEVICE void load(const ActKernelArgs& a, int64_t row, int64_t first_col,
                           int64_t col_step) {
    constexpr int G = K::kGroup;
    const T* gate = static_cast<const T*>(a.gate) + row * a.gate_stride;
    const T* up = static_cast<const T*>(a.up) + row * a.up_stride;
    const T* grad_out = static_cast<const T*>(a.grad_out) + row * a.grad_out_stride;
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {  // every load of the thread before any use
      const int64_t col = first_col + i * col_step;
      if (col < a.cols) {
        g[i] = load_group<T, G, K::kLoad>(gate, col, a.cols);
        u[i] = load_group<T, G, K::kLoad>(up, col, a.cols);
        if constexpr (kBackward) dy[i] = load_group<T, G, K::kLoad>(grad_out, col, a.cols);
      }
    }
  }
};

// y = act(gate) * up for one group of loaded inputs, with the primitives of Ops: ForwardOps<T>
// for the plain op, detail::Fp8Ops for the quantizing kernels.
template <class K, class Ops>
FUSEKIT_DEVICE void group_values(const Packed<typename K::T, K::kGroup>& g,
                                 const Packed<typename K::T, K::kGroup>& u,
                                 float (&y)[K::kGroup]) {
  constexpr int G = K::kGroup;
  float gf[G], uf[G];
  to_floats(g, gf);
  to_floats(u, uf);
#pragma unroll
  for (int e = 0; e < G; ++e) {
    y[e] = ActMath<K::kAct>::template value<Ops>(gf[e]) * uf[e];
  }
}

// The math and stores of one row's groups for one thread.
template <class K, int kUnroll, bool kBackward>
FUSEKIT_DEVICE void act_elementwise_row(const ActKernelArgs& a, int64_t row, int64_t first_col,
                                        int64_t col_step,
                                        const ActInputs<K, kUnroll, kBackward>& in) {
  using T = typename K::T;
  constexpr int G = K::kGroup;
  const int64_t n = a.cols;
#pragma unroll
  for (int i = 0; i < kUnroll; ++i) {
    const int64_t col = first_col + i * col_step;
    if (col >= n) continue;
    if constexpr (kBackward) {
      float gf[G], uf[G], dyf[G], dg[G], du[G];
      to_floats(in.g[i], gf);
      to_floats(in.u[i], uf);
      to_floats(in.dy[i], dyf);
#pragma unroll
      for (int e = 0; e < G; ++e) {
        dg[e] = gate_gradient<K::kAct>(dyf[e], uf[e], gf[e]);
        du[e] = dyf[e] * ActMath<K::kAct>::value(gf[e]);
      }
      store_group<T, G, K::kLoad>(static_cast<T*>(a.out) + row * a.out_stride, col, n, dg);
      store_group<T, G, K::kLoad>(static_cast<T*>(a.grad_up) + row * a.grad_up_stride, col, n,
                                  du);
    } else {
      float y[G];
      group_values<K, ForwardOps<T>>(in.g[i], in.u[i], y);
      store_group<T, G, K::kLoad>(static_cast<T*>(a.out) + row * a.out_stride, col, n, y);
    }
  }
}

// Blocks of an act_elementwise_kernel build that must fit an SM at once. The forward builds with
// 16-byte accesses cap their registers for kActForwardBlocksPerSm blocks: more resident warps
// hide more of the loads behind the math (act_config.h). Narrower-access builds (unaligned
// tensors) and the backward pass keep the compiler's choice, since they would spill.
template <class K>
constexpr int elementwise_min_blocks_per_sm(bool backward) {
  return !backward && K::kLoad == K::kGroup ? kActForwardBlocksPerSm : 1;
}

// y = act(gate) * up (backward: grad_gate and grad_up) for kUnroll groups per thread; a thread
// loops over rows only when the batch has more rows than kActMaxActiveThreads' worth.
template <class K, int kUnroll, bool kBackward>
__global__ void __launch_bounds__(kActElementwiseThreads,
                                  elementwise_min_blocks_per_sm<K>(kBackward))
    act_elementwise_kernel(ActKernelArgs a) {
  constexpr int G = K::kGroup;
  wait_for_prior_grids();
  // The next grid may begin launching now (its own wait still waits for this grid to finish),
  // or, for the smallest grids (at most half as many blocks as SMs, which the configuration
  // marks), after this thread's writes (act_config.h). Triggering here also lets a thread end
  // inside its branch, which saves registers (bench/NOTES.md, "silu forward at six blocks per
  // SM"). The flag is uniform.
  if (!a.trigger_after_writes) allow_dependent_grids();
  // This thread's slot in the flat (row, thread of the row) space; 32-bit by the config.
  const uint32_t slot = blockIdx.x * blockDim.x + threadIdx.x;
  if (slot < a.active_threads) {
    const uint32_t row_in_pass = a.row_of_slot.divide(slot);
    const int64_t first_col = static_cast<int64_t>(slot - row_in_pass * a.threads_per_row) * G;
    const int64_t col_step = static_cast<int64_t>(a.threads_per_row) * G;
    for (int64_t row = row_in_pass; row < a.rows; row += a.rows_per_pass) {
      ActInputs<K, kUnroll, kBackward> in;
      in.load(a, row, first_col, col_step);
      act_elementwise_row<K, kUnroll, kBackward>(a, row, first_col, col_step, in);
    }
  }
  if (a.trigger_after_writes) allow_dependent_grids();
}

// The forward op where the launch is simple (act_forward_is_compact, act_config.h): one group per
// thread and every row at once, whole groups only (N a multiple of the group), accesses of the
// whole group, and every element of gate, up and out within 2^31 of its tensor's start. Then a
// thread's work is its (row, column) from one division, three 32-bit offsets, two loads, the math
// and one store: no bounds, no row loop, no 64-bit index arithmetic. The general kernel spends
// about as many instructions on those as on the math of an 8-byte group, and at decode sizes the
// SMs' issue rate is what the call waits on (bench/NOTES.md, "Gated activations v18"). The values
// are the general kernel's, bit for bit.
template <class K>
__global__ void __launch_bounds__(kActElementwiseThreads, elementwise_min_blocks_per_sm<K>(false))
    act_forward_compact_kernel(ActKernelArgs a) {
  static_assert(K::kLoad == K::kGroup, "the compact kernel moves whole groups");
  using T = typename K::T;
  constexpr int G = K::kGroup;
  wait_for_prior_grids();
  if (!a.trigger_after_writes) allow_dependent_grids();  // as in act_elementwise_kernel
  const uint32_t slot = blockIdx.x * blockDim.x + threadIdx.x;
  if (slot < a.active_threads) {
    const uint32_t row = a.row_of_slot.divide(slot);
    const uint32_t col = (slot - row * a.threads_per_row) * G;
    Packed<T, G> g, u;
    g.load(static_cast<const T*>(a.gate) + (row * static_cast<uint32_t>(a.gate_stride) + col));
    u.load(static_cast<const T*>(a.up) + (row * static_cast<uint32_t>(a.up_stride) + col));
    float y[G];
    group_values<K, ForwardOps<T>>(g, u, y);
    pack_floats<T>(y).store(static_cast<T*>(a.out) +
                            (row * static_cast<uint32_t>(a.out_stride) + col));
  }
  if (a.trigger_after_writes) allow_dependent_grids();
}

}  // namespace fusekit::gpu
