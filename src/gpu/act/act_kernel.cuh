// Gated-activation kernels (act(gate) * up, its fp8-quantized form, and the backward pass):
// device code only.
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
// The quantized op needs the row's max |y| before it can write anything. Small batches (fewer
// rows than SMs) on GPUs with thread-block clusters split each row over the blocks of a cluster
// (act_quant_cluster_kernel): each block holds its slice of y in registers, and the blocks'
// maxima meet through distributed shared memory, so a decode step spreads its math over several
// SMs instead of one. Otherwise act_quant_kernel gives each row a block: every thread computes y
// for kItems groups (act_quant_items: 32 elements) of its warp's tile of the row, at fixed offsets
// from its first (quant_staged_values), the next group's loads in flight during each group's
// math, keeps y in shared memory through the block-wide max (QuantStaging), then scales,
// converts and writes, reading the inputs once. Rows longer than that in a 1024-thread block, or
// than the block's shared memory holds, take the two-pass variant (kItems = 0: max first, then
// recompute y and write), reading the inputs twice, the second time mostly from L2. The row max
// is taken with max.NaN where the GPU has it (core/host_device.h) and only the max is clamped to
// float32's range (core/fp8.h): the per-element work beyond the plain op is one max, one multiply
// and half a conversion.
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
#include "gpu/common/fp8_pack.cuh"
#include "gpu/common/reduce.cuh"
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

// The one-block quantizing kernel's y, from its math to its write: thread t's group i lives in
// shared memory as G / 4 float4 slots, slot h of it at (i * G / 4 + h) * threads + t, so a warp's
// 16-byte accesses are consecutive (no bank conflicts). Each thread reads back only what it wrote,
// so no barrier is needed between the two. Keeping y out of registers is what lets a block of
// up to 448 threads keep two groups' loads in flight at 40 registers (bench/NOTES.md, "fp8
// act_and_mul v6").
template <int G>
struct QuantStaging {
  static constexpr int kSlots = G / 4;
  float4* base;
  int thread;
  int threads;
  static constexpr int64_t bytes(int threads, int items) {
    return int64_t{threads} * items * kSlots * static_cast<int64_t>(sizeof(float4));
  }
  FUSEKIT_DEVICE void put(int item, const float (&y)[G]) const {
#pragma unroll
    for (int h = 0; h < kSlots; ++h) {
      base[(item * kSlots + h) * threads + thread] =
          make_float4(y[4 * h], y[4 * h + 1], y[4 * h + 2], y[4 * h + 3]);
    }
  }
  FUSEKIT_DEVICE void get(int item, float (&y)[G]) const {
#pragma unroll
    for (int h = 0; h < kSlots; ++h) {
      const float4 v = base[(item * kSlots + h) * threads + thread];
      y[4 * h] = v.x;
      y[4 * h + 1] = v.y;
      y[4 * h + 2] = v.z;
      y[4 * h + 3] = v.w;
    }
  }
};

// y for one group (unclamped: fp8_row_scale clamps the max, core/fp8.h); elements past the row
// are 0 (they do not move the max, which starts at 0).
template <class K, typename Index>
FUSEKIT_DEVICE void quant_group_values(const typename K::T* gate, const typename K::T* up,
                                       Index col, Index n, float (&y)[K::kGroup]) {
  constexpr int G = K::kGroup;
  group_values<K, detail::Fp8Ops>(load_group<typename K::T, G, K::kLoad>(gate, col, n),
                  load_group<typename K::T, G, K::kLoad>(up, col, n), y);
}

// y for kItems groups of one thread (first_col, then col_step apart), kept for the write, and
// their max |y| (groups past the row are 0). Every load of the thread is issued before any math,
// as in the elementwise kernel: loading each group just before its math (the compiler does not
// hoist a load over the previous group's branchy math) left one group per thread in flight.
// Index: int64_t, or int where the row is known to be short (fewer registers).
template <class K, int kItems, typename Index>
FUSEKIT_DEVICE float quant_items_values(const typename K::T* gate, const typename K::T* up,
                                        Index first_col, Index col_step, Index n,
                                        float (&y)[kItems][K::kGroup]) {
  using T = typename K::T;
  constexpr int G = K::kGroup;
  Packed<T, G> g[kItems], u[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const Index col = first_col + i * col_step;
    if (col < n) {
      g[i] = load_group<T, G, K::kLoad>(gate, col, n);
      u[i] = load_group<T, G, K::kLoad>(up, col, n);
    }
  }
  float max_abs = 0.0f;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const Index col = first_col + i * col_step;
    if (col < n) {
      group_values<K, detail::Fp8Ops>(g[i], u[i], y[i]);
    } else {
#pragma unroll
      for (int e = 0; e < G; ++e) y[i][e] = 0.0f;
    }
#pragma unroll
    for (int e = 0; e < G; ++e) max_abs = detail::max_abs_accumulate(max_abs, y[i][e]);
  }
  return max_abs;
}

// A quantized row's dynamic scale from its max|y| (core/fp8.h fp8_row_scale).
template <class Format>
FUSEKIT_DEVICE float quant_row_scale(const ActKernelArgs& a, float max_abs) {
  return detail::fp8_row_scale(max_abs, a.scale_upper_bound, codes_spec<Format>(a.fp8));
}

template <class K, class Format, typename Index>
FUSEKIT_DEVICE void quant_group_store(const ActKernelArgs& a, uint8_t* out, Index col, Index n,
                                      const float (&y)[K::kGroup], float inverse_scale) {
  const Packed<uint8_t, K::kGroup> q = quantize_group<Format>(y, inverse_scale, a.fp8);
  store_packed<uint8_t, K::kGroup, K::kLoad>(out, col, n, q);
}

// The staged kernel's y for one thread of a row: kItems groups, `step` elements apart from
// `first`. The kernel gives aligned rows in warp tiles: kItems * kWarp consecutive groups a warp,
// of which item i of every lane is one contiguous run (step = kWarp * G), so each access of the
// warp is coalesced and a thread's items lie at fixed offsets from its first group: immediate
// offsets in the loads and stores, no address arithmetic per item (bench/NOTES.md, "fp8
// act_and_mul: warp tiles"). Item i + 1's loads are issued before item i's math (two items'
// inputs in registers at most; held there by issue_memory_accesses_here, platform.h, where no
// branch holds them, which needs the whole warp); each item's y goes to the thread's own slots of
// `staging`, and the return value is their max |y|. kWhole: every item is a whole, 16-byte aligned
// group of the row, so nothing is checked and each is one vector access; otherwise items past the
// row are skipped and a partial last group reads zeros past it.
template <class K, int kItems, bool kWhole>
FUSEKIT_DEVICE float quant_staged_values(const typename K::T* gate, const typename K::T* up,
                                         int first, int step, int cols,
                                         const QuantStaging<K::kGroup>& staging) {
  using T = typename K::T;
  constexpr int G = K::kGroup;
  static_assert(!kWhole || K::kLoad == G, "unchecked items are aligned groups");
  Packed<T, G> g[2], u[2];
  auto fetch = [&](int i) {
    const int col = first + i * step;
    if constexpr (kWhole) {
      g[i % 2].load(gate + col);
      u[i % 2].load(up + col);
    } else if (col < cols) {
      g[i % 2] = load_group<T, G, K::kLoad>(gate, col, cols);
      u[i % 2] = load_group<T, G, K::kLoad>(up, col, cols);
    }
  };
  fetch(0);
  float max_abs = 0.0f;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (i + 1 < kItems) fetch(i + 1);
    // Loads with no branch around them (loads in branches stay where they are). Every lane of
    // the warp comes here.
    if constexpr (kWhole) issue_memory_accesses_here();
    if (kWhole || first + i * step < cols) {
      float y[G];
      group_values<K, detail::Fp8Ops>(g[i % 2], u[i % 2], y);
#pragma unroll
      for (int e = 0; e < G; ++e) max_abs = detail::max_abs_accumulate(max_abs, y[e]);
      staging.put(i, y);
    }
  }
  return max_abs;
}

// The codes of quant_staged_values' groups, from `staging`, scaled by `inverse`.
template <class K, class Format, int kItems, bool kWhole>
FUSEKIT_DEVICE void quant_staged_store(const ActKernelArgs& a, uint8_t* out, int first, int step,
                                       int cols, const QuantStaging<K::kGroup>& staging,
                                       float inverse) {
  constexpr int G = K::kGroup;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int col = first + i * step;
    if (kWhole || col < cols) {
      float y[G];
      staging.get(i, y);
      const Packed<uint8_t, G> q = quantize_group<Format>(y, inverse, a.fp8);
      if constexpr (kWhole) {
        q.store(out + col);
      } else {
        store_packed<uint8_t, G, K::kLoad>(out, col, cols, q);
      }
    }
  }
}

// Blocks of an act_quant_kernel build that must fit an SM at once: the compact build caps its
// registers so that kActQuantCompactBlocksPerSm do (act_config.cc says why).
constexpr int quant_min_blocks_per_sm(int max_threads) {
  return max_threads == kActQuantCompactThreads ? kActQuantCompactBlocksPerSm : 1;
}

// Dynamic per-row fp8 quantization of act(gate) * up: one row per block (grid-stride over rows) of
// at most kMaxThreads threads, kItems groups of y per thread staged in shared memory (the launch
// gives it ActQuantConfig::smem_bytes), or (kItems == 0) y recomputed for the write. With staged
// y, a block whose loads are consumed asks L2 for the inputs of the row a.prefetch_rows ahead
// (prefetch_to_l2), which a block of a later wave takes: the memory fetches the next wave while
// this one computes, takes its max and writes (bench/NOTES.md, "later rows fetched into L2").
template <class K, class Format, int kWarp, int kItems, int kMaxThreads>
__global__ void __launch_bounds__(kMaxThreads, quant_min_blocks_per_sm(kMaxThreads))
    act_quant_kernel(ActKernelArgs a) {
  if constexpr (!warp_size_compiled<kWarp>()) {
    return stub_launched();
  } else {
    using T = typename K::T;
    constexpr int G = K::kGroup;
    constexpr int kMaxWarps = kMaxThreads / kWarp;
    static_assert(kMaxWarps * 4 <= kActQuantScratchBytes,  // 4: sizeof(float)
                  "the config leaves kActQuantScratchBytes beside the staging");
    __shared__ float scratch[kMaxWarps];
    extern __shared__ float4 act_quant_staging[];  // kItems > 0: QuantStaging
    wait_for_prior_grids();
    const int64_t n = a.cols;
    const int64_t first_col = static_cast<int64_t>(threadIdx.x) * G;
    const int64_t col_step = static_cast<int64_t>(blockDim.x) * G;
    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
      const T* gate = static_cast<const T*>(a.gate) + row * a.gate_stride;
      const T* up = static_cast<const T*>(a.up) + row * a.up_stride;
      uint8_t* out = static_cast<uint8_t*>(a.out) + row * a.out_stride;
      float max_abs = 0.0f;
      if constexpr (kItems == 0) {
        for (int64_t col = first_col; col < n; col += col_step) {
          float y[G];
          quant_group_values<K>(gate, up, col, n, y);
#pragma unroll
          for (int e = 0; e < G; ++e) max_abs = detail::max_abs_accumulate(max_abs, y[e]);
        }
        max_abs = block_magnitude_max<kWarp, kMaxWarps>(max_abs, scratch);
        const float scale = quant_row_scale<Format>(a, max_abs);
        const float inverse = detail::fp8_inverse_row_scale(scale);
        for (int64_t col = first_col; col < n; col += col_step) {
          float y[G];
          quant_group_values<K>(gate, up, col, n, y);
          quant_group_store<K, Format>(a, out, col, n, y, inverse);
        }
        if (threadIdx.x == 0) a.scale[row] = scale;
      } else {
        // The row fits kMaxThreads * kItems groups here (the config's promise), so its columns
        // are 32-bit: fewer registers.
        const int cols = static_cast<int>(n);
        // Rows of 16-byte aligned groups go in warp tiles, whose items are kWarp * G elements
        // apart (quant_staged_values); rows off that alignment keep the block's threads side by
        // side in each item, and the checked path throughout: in warp tiles they spilled
        // registers and ran 1.13-1.26x the time.
        constexpr bool kAligned = K::kLoad == G;
        const int lane = static_cast<int>(threadIdx.x) % kWarp;
        const int warp = static_cast<int>(threadIdx.x) / kWarp;
        const int first = kAligned ? (warp * kItems * kWarp + lane) * G
                                   : static_cast<int>(threadIdx.x) * G;
        const int step = kAligned ? kWarp * G : static_cast<int>(blockDim.x) * G;
        const QuantStaging<G> staging{act_quant_staging, static_cast<int>(threadIdx.x),
                                      static_cast<int>(blockDim.x)};
        // Uniform in the warp: whether its tile lies in the row's whole groups.
        const bool whole = kAligned && (warp + 1) * kItems * kWarp * G <= cols - cols % G;
        max_abs = whole ? quant_staged_values<K, kItems, kAligned>(gate, up, first, step, cols,
                                                                   staging)
                        : quant_staged_values<K, kItems, false>(gate, up, first, step, cols,
                                                                staging);
        // This thread's loads are consumed; the row a wave ahead is fetched into L2 while this
        // one's max is taken and its codes written, so that its block finds it there.
        if (threadIdx.x == 0 && a.prefetch_rows > 0 && row + a.prefetch_rows < a.rows) {
          const int64_t ahead = row + a.prefetch_rows;
          // Rows here are at most kMaxThreads * kItems groups: far below 4 GB.
          const auto row_bytes = static_cast<uint32_t>(n * static_cast<int64_t>(sizeof(T)));
          prefetch_to_l2(static_cast<const T*>(a.gate) + ahead * a.gate_stride, row_bytes);
          prefetch_to_l2(static_cast<const T*>(a.up) + ahead * a.up_stride, row_bytes);
        }
        max_abs = block_magnitude_max<kWarp, kMaxWarps>(max_abs, scratch);
        const float scale = quant_row_scale<Format>(a, max_abs);
        const float inverse = detail::fp8_inverse_row_scale(scale);
        if (whole) {
          quant_staged_store<K, Format, kItems, kAligned>(a, out, first, step, cols, staging,
                                                          inverse);
        } else {
          quant_staged_store<K, Format, kItems, false>(a, out, first, step, cols, staging,
                                                       inverse);
        }
        if (threadIdx.x == 0) a.scale[row] = scale;
      }
    }
    // The next grid launches after this one's writes: triggered at the start, it measured the
    // same at M = 128 and up to 3 us slower at M = 256 (bench/NOTES.md, "fp8 act_and_mul v13").
    allow_dependent_grids();
  }
}

// Dynamic per-row fp8 quantization with each row split over the a.cluster_blocks blocks of a
// cluster: block r takes groups r * T * kItems + t + i * T (T threads, i < kItems) of the row and
// keeps their y in registers. Every warp sends its maximum into every block's shared memory
// (mailbox_send, platform.h: an asynchronous store counted on the receiver's mailbox), with no
// block reduction first; each block waits for the cluster's maxima in its own mailbox, and a warp
// max over them leaves the row's max in every thread. No cluster barrier follows the row: a block
// leaves once every peer's maxima have arrived, so nothing is still being sent into its shared
// memory, and the barrier's release would have waited for the block's output stores in flight.
// The one barrier, which makes every block's mailbox ready before any peer sends, comes before
// the wait for the previous grid, and the next grid may launch as soon as this one has started:
// in a stream of launches each one's barrier overlaps the end of the one before (bench/NOTES.md,
// "fp8 act_and_mul v13": 2.7 -> 1.8 us at M = 1).
template <class K, class Format, int kWarp, int kItems>
__global__ void __launch_bounds__(kActQuantClusterMaxThreads, kActQuantClusterBlocksPerSm)
    act_quant_cluster_kernel(ActKernelArgs a) {
  if constexpr (!warp_size_compiled<kWarp>() || !clusters_compiled()) {
    return stub_launched();
  } else {
    using T = typename K::T;
    constexpr int G = K::kGroup;
    static_assert(kActQuantMaxClusterBlocks <= kWarp, "a lane per block of the cluster");
    // Blocks of any whole number of warps up to kActQuantClusterMaxThreads (the config's width).
    constexpr int kMaxWarps = kActQuantClusterMaxThreads / kWarp;
    const int warps = static_cast<int>(blockDim.x) / kWarp;
    __shared__ float warp_max[kActQuantMaxClusterBlocks * kMaxWarps];  // [sender rank][warp]
    __shared__ ClusterMailbox mailbox;
    const int blocks = a.cluster_blocks;
    const unsigned rank = cluster_block_rank();
    const int64_t row = static_cast<int64_t>(blockIdx.x) / blocks;
    if (threadIdx.x == 0) {
      mailbox_init(&mailbox);
      mailbox_publish_init();
    }
    cluster_barrier();
    wait_for_prior_grids();
    allow_dependent_grids();  // the next grid may launch now: its own wait still waits for ours
    const int64_t n = a.cols;
    const int64_t col_step = static_cast<int64_t>(blockDim.x) * G;
    const int64_t first_col =
        (static_cast<int64_t>(rank) * blockDim.x * kItems + threadIdx.x) * G;
    const T* gate = static_cast<const T*>(a.gate) + row * a.gate_stride;
    const T* up = static_cast<const T*>(a.up) + row * a.up_stride;
    float y[kItems][G];
    float max_abs = quant_items_values<K>(gate, up, first_col, col_step, n, y);
    max_abs = cluster_nan_max<kWarp>(max_abs, warp_max, &mailbox, blocks, rank, warps, 0);
    const float scale = quant_row_scale<Format>(a, max_abs);
    const float inverse = detail::fp8_inverse_row_scale(scale);
    uint8_t* out = static_cast<uint8_t*>(a.out) + row * a.out_stride;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t col = first_col + i * col_step;
      if (col < n) quant_group_store<K, Format>(a, out, col, n, y[i], inverse);
    }
    if (rank == 0 && threadIdx.x == 0) a.scale[row] = scale;
  }
}

}  // namespace fusekit::gpu
