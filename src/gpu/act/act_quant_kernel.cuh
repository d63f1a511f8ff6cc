// The quantizing gated-activation kernels: act(gate) * up as fp8 codes with one float32 scale a
// row (dynamic per-token quantization). Device code only; act_kernel.cuh holds the arguments,
// traits and math they share with the plain op.
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
// Batches of more than one wave of rows (what the GPU holds at once) fetch ahead: once a block's
// loads are consumed, it asks L2 for the inputs of the row half a wave ahead, which a block of a
// later wave takes (ActQuantConfig::prefetch_rows), so the memory fetches the coming rows while
// this wave computes and writes.
#pragma once

#include <cstdint>

#include "core/fp8.h"
#include "gpu/act/act_config.h"
#include "gpu/act/act_kernel.cuh"
#include "gpu/common/fp8_pack.cuh"
#include "gpu/common/reduce.cuh"
#include "gpu/common/vec_io.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

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
