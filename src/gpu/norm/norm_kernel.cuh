// RMSNorm / LayerNorm kernels, with or without the fused residual add: device code only.
//
// Why several kernels. A normalization needs a whole row before it can write anything, so the row
// must be held somewhere between its reduction and its output. Up to four 16-byte groups per
// thread (N <= 16384 bf16 or 8192 fp32 with 512 threads) it stays in registers, packed in its
// storage type: one read of each input, one write of each
// output, and nothing but shuffles and one barrier in between, which is what small batches (one
// token, a decode step) need for latency. Beyond that, norm_staged_kernel keeps as much of the
// row as fits in shared memory and re-reads the rest (from L2, where it was just read) in the
// second pass; a whole row of up to ~110K bf16 elements fits on an H100. A third kernel,
// norm_stream_kernel, runs the registers path's per-row code (finish_row) in resident blocks that
// stage upcoming rows in shared memory; the heuristic uses it where it measured faster
// (NormShape::stream_preferred in norm_config.h).
//
// Work split. Work comes in "groups" of 16 bytes of x (8 bf16/fp16 or 4 fp32 elements). In the
// registers path thread t takes groups t, t + T, ... and sums follow one fixed tree over the
// row (see norm_registers_kernel), so results do not depend on how many threads share a row; the
// staged path uses the same split with T = 512 and its own order. kLoad, the width of each memory
// access, adapts to alignment without changing what is summed in which order. Results are
// therefore bitwise identical at any alignment and for any number of rows in the launch.
//
// Numerics. Sums in float32; LayerNorm subtracts the mean before squaring (two passes over data
// already on chip). With a fused add, h = round_to<TR>(x + r) is both written and normalized.
#pragma once

#include <cstdint>

#include "gpu/common/reduce.cuh"
#include "gpu/common/vec_io.cuh"
#include "gpu/platform.h"
#include "norm/norm_problem.h"

namespace fusekit::gpu {

using detail::NormKind;

// Everything a norm kernel reads besides its template parameters. Passed by value.
struct NormKernelArgs {
  const void* x;
  void* out;
  const void* residual;
  void* residual_out;
  const void* weight;  // may be null (layer norm): 1
  const void* bias;    // may be null: 0
  float* rstd;         // may be null
  float* mean;         // may be null
  int64_t x_stride;
  int64_t out_stride;
  int64_t residual_stride;
  int64_t residual_out_stride;
  int64_t rows;
  int64_t cols;
  float eps;
  float weight_offset;
  bool weight_after_cast;
  int threads_per_row;  // a power of two
  int items;            // registers path: groups per thread (<= kMaxItems)
  int rows_per_block;   // registers path
  int stages;           // streaming path: rows in flight per block
  int64_t smem_groups;  // staged path: groups of the row kept in shared memory
};

template <NormKind kKind_, bool kAdd_, typename TX_, typename TW_, typename TR_, int kLoad_,
          int kWarp_>
struct NormTraits {
  static constexpr NormKind kKind = kKind_;
  static constexpr bool kAdd = kAdd_;
  static constexpr bool kLayer = kKind_ == NormKind::kLayer;
  using TX = TX_;  // x and out
  using TW = TW_;  // weight and bias
  using TR = TR_;  // residual and residual_out; the normalized values h (TX when !kAdd)
  static constexpr int kLoad = kLoad_;
  static constexpr int kWarp = kWarp_;
  static constexpr int kGroup = 16 / static_cast<int>(sizeof(TX));
  static constexpr int kMaxItems = 4;  // registers path: groups per thread (32 bf16 / 16 fp32)
  // Staged path: groups in flight per thread in pass 1 (two inputs each when adding).
  static constexpr int kBatch = kAdd ? 2 : 4;
  static constexpr int kOutBatch = kLayer ? 1 : 2;  // and pass 2 (which also holds weight, bias)
  static constexpr int kMaxThreads = 512;       // registers path
  // Registers path: no occupancy floor (forcing 64 registers spills the fused-add variants).
  static constexpr int kMinBlocksPerSm = 1;
  static constexpr int kStagedThreads = 512;    // staged path: two blocks per SM (64 registers)
  static constexpr int kScratch = 512;  // one float per thread of the largest block
  static constexpr int kMaxWarpsPerRow = 512 / kWarp;
};

// h for one group: x (plus residual, rounded to TR, and written to residual_out when kAdd).
// Loads for all inputs are issued before any store so that they overlap.
template <class K>
FUSEKIT_DEVICE void load_source(const NormKernelArgs& a, int64_t row, int64_t col,
                                float (&h)[K::kGroup]) {
  using TX = typename K::TX;
  using TR = typename K::TR;
  const int64_t n = a.cols;
  load_group<TX, K::kGroup, K::kLoad>(static_cast<const TX*>(a.x) + row * a.x_stride, col, n, h);
  if constexpr (K::kAdd) {
    float r[K::kGroup];
    load_group<TR, K::kGroup, K::kLoad>(
        static_cast<const TR*>(a.residual) + row * a.residual_stride, col, n, r);
#pragma unroll
    for (int e = 0; e < K::kGroup; ++e) h[e] = round_to<TR>(h[e] + r[e]);
    store_group<TR, K::kGroup, K::kLoad>(
        static_cast<TR*>(a.residual_out) + row * a.residual_out_stride, col, n, h);
  }
}

// Weight (with offset) and bias for one group; 1 and 0 where absent.
template <class K>
FUSEKIT_DEVICE void load_affine(const NormKernelArgs& a, int64_t col, float (&w)[K::kGroup],
                                float (&b)[K::kGroup]) {
  using TW = typename K::TW;
  if (a.weight != nullptr) {
    load_group<TW, K::kGroup, K::kLoad>(static_cast<const TW*>(a.weight), col, a.cols, w);
#pragma unroll
    for (int e = 0; e < K::kGroup; ++e) w[e] += a.weight_offset;
  } else {
#pragma unroll
    for (int e = 0; e < K::kGroup; ++e) w[e] = 1.0f;
  }
  if (K::kLayer && a.bias != nullptr) {
    load_group<TW, K::kGroup, K::kLoad>(static_cast<const TW*>(a.bias), col, a.cols, b);
  } else {
#pragma unroll
    for (int e = 0; e < K::kGroup; ++e) b[e] = 0.0f;
  }
}

// y = ((h - mean) * rstd [rounded to TX]) * w + b, stored to out.
template <class K, typename Index>
FUSEKIT_DEVICE void write_output(const NormKernelArgs& a, int64_t row, Index col,
                                 const float (&h)[K::kGroup], const float (&w)[K::kGroup],
                                 const float (&b)[K::kGroup], float mean, float rstd) {
  using TX = typename K::TX;
  float y[K::kGroup];
#pragma unroll
  for (int e = 0; e < K::kGroup; ++e) {
    float v = (h[e] - mean) * rstd;
    if (a.weight_after_cast) v = round_to<TX>(v);
    y[e] = v * w[e] + b[e];
  }
  store_group<TX, K::kGroup, K::kLoad>(static_cast<TX*>(a.out) + row * a.out_stride, col,
                                       static_cast<Index>(a.cols), y);
}

// The second half of the registers and streaming kernels, shared so that both give the same bits:
// from a row's x (and residual, in h) packed in registers to the row's outputs. Thread t of the
// row (of T = tpr threads) holds groups t, t + T, ..., t + (items - 1) T; slots past `items` or
// past the row hold zeros. Sums first add the elements of each group, then combine groups by
// their index from the highest bit down: across the thread's groups (tree_sum over kMaxItems
// slots), then across warps, then across lanes (row_sum). That order depends on neither T nor
// `items`, so the launch shape can follow the batch size while each row's result stays bitwise
// the same. Every thread of the block calls this (row_sum has barriers); `active` is false for
// threads past the last row. `parity` alternates the reduction scratch between consecutive rows
// of one block (a block that loops over rows must not overwrite a buffer still being read).
// `affine(i, col, w, b)` gives item i's weight (offset added) and bias as floats: 1 and 0 where
// absent.
template <class K, class Affine>
FUSEKIT_DEVICE void finish_row(const NormKernelArgs& a, int64_t row, bool active, int t, int tpr,
                               int items, Packed<typename K::TX, K::kGroup> (&x)[K::kMaxItems],
                               Packed<typename K::TR, K::kGroup> (&h)[K::kMaxItems],
                               const Affine& affine, float* scratch0, float* scratch1,
                               int parity) {
  using TR = typename K::TR;
  constexpr int G = K::kGroup;
  constexpr int kItems = K::kMaxItems;
  const int n = static_cast<int>(a.cols);  // <= 16384 on these paths
  if constexpr (K::kAdd) {
    // h = x + residual, rounded to the residual's dtype and written back out.
    TR* r_out = static_cast<TR*>(a.residual_out) + row * a.residual_out_stride;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      float v[G];
#pragma unroll
      for (int e = 0; e < G; ++e) {
        h[i].elems[e] = from_float<TR>(to_float(x[i].elems[e]) + to_float(h[i].elems[e]));
        v[e] = to_float(h[i].elems[e]);
      }
      const int col = (t + i * tpr) * G;
      if (active && i < items && col < n) store_group<TR, G, K::kLoad>(r_out, col, n, v);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kItems; ++i) h[i] = x[i];  // TR is TX
  }

  // Per group, then across the thread's groups, as trees (absent groups are zeros).
  float part[kItems];
  float mean = 0.0f;
  if constexpr (K::kLayer) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      float v[G];
      to_floats(h[i], v);
      part[i] = tree_sum(v);
    }
    mean = row_sum<K::kWarp, K::kMaxWarpsPerRow>(tree_sum(part), tpr, scratch0) /
           static_cast<float>(n);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int col = (t + i * tpr) * G;
      float v[G];
#pragma unroll
      for (int e = 0; e < G; ++e) {
        const float d = to_float(h[i].elems[e]) - mean;
        v[e] = i < items && col + e < n ? d * d : 0.0f;
      }
      part[i] = tree_sum(v);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      float v[G];
#pragma unroll
      for (int e = 0; e < G; ++e) {
        const float f = to_float(h[i].elems[e]);
        v[e] = f * f;
      }
      part[i] = tree_sum(v);
    }
  }
  const float total = row_sum<K::kWarp, K::kMaxWarpsPerRow>(
      tree_sum(part), tpr, K::kLayer || parity ? scratch1 : scratch0);
  const float rstd = rsqrtf(total / static_cast<float>(n) + a.eps);

  if (!active) return;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int col = (t + i * tpr) * G;
    if (i < items && col < n) {
      float hv[G], wv[G], bv[G];
      to_floats(h[i], hv);
      affine(i, col, wv, bv);
      write_output<K>(a, row, col, hv, wv, bv, mean, rstd);
    }
  }
  if (t == 0) {
    if (a.rstd != nullptr) a.rstd[row] = rstd;
    if (K::kLayer && a.mean != nullptr) a.mean[row] = mean;
  }
}

// The weight's floats for one group, offset added; 1 where there is no weight.
template <typename TW, int G>
FUSEKIT_DEVICE void weight_floats(bool present, const Packed<TW, G>& p, float offset,
                                  float (&wv)[G]) {
  if (present) {
    to_floats(p, wv);
#pragma unroll
    for (int e = 0; e < G; ++e) wv[e] += offset;
  } else {
#pragma unroll
    for (int e = 0; e < G; ++e) wv[e] = 1.0f;
  }
}

// The weight's groups for thread t, packed; absent weight leaves them unset (finish_row uses 1).
template <class K>
FUSEKIT_DEVICE void load_weight(const NormKernelArgs& a, int t, int tpr, int items,
                                Packed<typename K::TW, K::kGroup> (&w)[K::kMaxItems]) {
  using TW = typename K::TW;
  constexpr int G = K::kGroup;
  const int n = static_cast<int>(a.cols);
  if (a.weight == nullptr) return;
#pragma unroll
  for (int i = 0; i < K::kMaxItems; ++i) {
    const int col = (t + i * tpr) * G;
    if (i < items && col < n) w[i] = load_group<TW, G, K::kLoad>(static_cast<const TW*>(a.weight), col, n);
  }
}

// The registers path: each row is loaded straight into registers by threads_per_row threads
// (rows_per_block rows per block), then finish_row. For few rows (latency), and for rows whose
// alignment or length rules out the streaming path.
template <class K>
__global__ void __launch_bounds__(K::kMaxThreads, K::kMinBlocksPerSm)
    norm_registers_kernel(NormKernelArgs a) {
  if constexpr (!warp_size_compiled<K::kWarp>()) return;  // HIP: other warp size (platform.h)
  using TX = typename K::TX;
  using TW = typename K::TW;
  using TR = typename K::TR;
  constexpr int G = K::kGroup;
  constexpr int kItems = K::kMaxItems;
  __shared__ float scratch[2][K::kScratch];
  const int tpr = a.threads_per_row;
  const int items = a.items;
  const int t = static_cast<int>(threadIdx.x) % tpr;
  const int64_t row =
      static_cast<int64_t>(blockIdx.x) * a.rows_per_block + static_cast<int>(threadIdx.x) / tpr;
  const bool active = row < a.rows;
  const int n = static_cast<int>(a.cols);

  wait_for_prior_grids();
  allow_dependent_grids();

  // The row stays packed in its storage type until used: h in TR (x's type, or residual's when
  // adding, which is exactly what gets normalized), weight in TW. All loads but the bias's are
  // issued before the first use.
  Packed<TX, G> x[kItems];
  Packed<TR, G> h[kItems];
  Packed<TW, G> w[kItems];
  const TX* x_row = static_cast<const TX*>(a.x) + row * a.x_stride;
  const TR* r_row = static_cast<const TR*>(a.residual) + row * a.residual_stride;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int col = (t + i * tpr) * G;
    if (active && i < items && col < n) {
      x[i] = load_group<TX, G, K::kLoad>(x_row, col, n);
      if constexpr (K::kAdd) h[i] = load_group<TR, G, K::kLoad>(r_row, col, n);
    } else {
#pragma unroll
      for (int e = 0; e < G; ++e) x[i].elems[e] = from_float<TX>(0.0f);
#pragma unroll
      for (int e = 0; e < G; ++e) h[i].elems[e] = from_float<TR>(0.0f);
    }
  }
  load_weight<K>(a, t, tpr, items, w);
  const bool has_weight = a.weight != nullptr;
  const bool has_bias = K::kLayer && a.bias != nullptr;
  auto affine = [&](int i, int col, float (&wv)[G], float (&bv)[G]) {
    weight_floats(has_weight, w[i], a.weight_offset, wv);
    if (has_bias) {
      // Loaded only now (from cache: every row reads it) to keep registers for occupancy.
      load_group<TW, G, K::kLoad>(static_cast<const TW*>(a.bias), col, n, bv);
    } else {
#pragma unroll
      for (int e = 0; e < G; ++e) bv[e] = 0.0f;
    }
  };
  finish_row<K>(a, row, active, t, tpr, items, x, h, affine, scratch[0], scratch[1], 0);
}

// The streaming path, for batches that fill the GPU: a grid of resident blocks, each of
// threads_per_row threads, loops over rows blockIdx.x, blockIdx.x + gridDim.x, ... and keeps
// `stages` rows in flight ahead of the one it normalizes, copied asynchronously into a ring of
// shared-memory stages. Reads of many rows thus overlap the reductions and writes of others, and
// a batch of a few thousand rows is in flight at once instead of in waves. Each thread reads back
// only the words it copied itself, so no barrier guards the ring. Requires full 16-byte groups
// (N a multiple of the group, every row of x and residual 16-byte aligned: kLoad == kGroup).
template <class K>
__global__ void __launch_bounds__(K::kMaxThreads, 2) norm_stream_kernel(NormKernelArgs a) {
  static_assert(K::kLoad == K::kGroup, "the streaming path moves whole 16-byte groups");
  if constexpr (!warp_size_compiled<K::kWarp>()) return;  // HIP: other warp size (platform.h)
  {
    using TX = typename K::TX;
    using TW = typename K::TW;
    using TR = typename K::TR;
    constexpr int G = K::kGroup;
    constexpr int kItems = K::kMaxItems;
    constexpr int kXWords = static_cast<int>(sizeof(TX)) * G / 16;
    constexpr int kRWords = K::kAdd ? static_cast<int>(sizeof(TR)) * G / 16 : 0;
    constexpr int kWords = kXWords + kRWords;  // 16-byte words staged per group
    // Dynamic shared memory: the ring, [stage][item][word][thread], then two floats per thread
    // of reduction scratch.
    extern __shared__ Bytes16 ring[];
    const int tpr = a.threads_per_row;  // == blockDim.x
    const int items = a.items;
    const int stages = a.stages;
    const int t = static_cast<int>(threadIdx.x);
    const int n = static_cast<int>(a.cols);
    const int64_t step = gridDim.x;

    wait_for_prior_grids();
    allow_dependent_grids();

    auto slot = [&](int stage, int i, int word) {
      return ring + ((stage * items + i) * kWords + word) * tpr + t;
    };
    // Copies row `row` (if any) into `stage`; always commits one group, so that group k of every
    // thread is row k of its block.
    auto issue = [&](int64_t row, int stage) {
      if (row < a.rows) {
        const auto* x_row = reinterpret_cast<const Bytes16*>(static_cast<const TX*>(a.x) + row * a.x_stride);
        const auto* r_row = reinterpret_cast<const Bytes16*>(static_cast<const TR*>(a.residual) +
                                                             row * a.residual_stride);
#pragma unroll
        for (int i = 0; i < kItems; ++i) {
          const int g = t + i * tpr;
          if (i < items && g * G < n) {
            copy_async_16(slot(stage, i, 0), x_row + g * kXWords);
#pragma unroll
            for (int word = 0; word < kRWords; ++word) {
              copy_async_16(slot(stage, i, kXWords + word), r_row + g * kRWords + word);
            }
          }
        }
      }
      commit_async();
    };

    // After the ring: the weight and bias, [item][word][thread] each (written and read by the
    // same thread), then reduction scratch.
    constexpr int kAffineWords = static_cast<int>(sizeof(TW)) * G / 16;
    const bool has_weight = a.weight != nullptr;
    const bool has_bias = K::kLayer && a.bias != nullptr;
    Bytes16* weight_words = ring + stages * items * kWords * tpr;
    Bytes16* bias_words = weight_words + (has_weight ? items * kAffineWords * tpr : 0);
    float* scratch =
        reinterpret_cast<float*>(bias_words + (has_bias ? items * kAffineWords * tpr : 0));
    auto affine_slot = [&](Bytes16* base, int i, int word) {
      return base + (i * kAffineWords + word) * tpr + t;
    };

    int64_t row = blockIdx.x;
    for (int s = 0; s < stages; ++s) issue(row + s * step, s);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int g = t + i * tpr;
      if (i < items && g * G < n) {
        Packed<TW, G> p;
        if (has_weight) {
          p = load_group<TW, G, K::kLoad>(static_cast<const TW*>(a.weight), g * G, n);
#pragma unroll
          for (int word = 0; word < kAffineWords; ++word) *affine_slot(weight_words, i, word) = p.raw[word];
        }
        if (has_bias) {
          p = load_group<TW, G, K::kLoad>(static_cast<const TW*>(a.bias), g * G, n);
#pragma unroll
          for (int word = 0; word < kAffineWords; ++word) *affine_slot(bias_words, i, word) = p.raw[word];
        }
      }
    }
    auto affine = [&](int i, int, float (&wv)[G], float (&bv)[G]) {
      Packed<TW, G> p;
      if (has_weight) {
#pragma unroll
        for (int word = 0; word < kAffineWords; ++word) p.raw[word] = *affine_slot(weight_words, i, word);
      }
      weight_floats(has_weight, p, a.weight_offset, wv);
      if (has_bias) {
#pragma unroll
        for (int word = 0; word < kAffineWords; ++word) p.raw[word] = *affine_slot(bias_words, i, word);
        to_floats(p, bv);
      } else {
#pragma unroll
        for (int e = 0; e < G; ++e) bv[e] = 0.0f;
      }
    };

    for (int k = 0; row < a.rows; ++k, row += step) {
      const int stage = k % stages;
      wait_async_groups(stages - 1);  // this row's group is complete
      Packed<TX, G> x[kItems];
      Packed<TR, G> h[kItems];
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const int g = t + i * tpr;
        if (i < items && g * G < n) {
          x[i].raw[0] = *slot(stage, i, 0);
          if constexpr (K::kAdd) {
            using Words = typename Packed<TR, G>::Access;
            static_assert(sizeof(Words) == 16, "residual groups move as 16-byte words");
#pragma unroll
            for (int word = 0; word < kRWords; ++word) h[i].raw[word] = *slot(stage, i, kXWords + word);
          }
        } else {
#pragma unroll
          for (int e = 0; e < G; ++e) x[i].elems[e] = from_float<TX>(0.0f);
#pragma unroll
          for (int e = 0; e < G; ++e) h[i].elems[e] = from_float<TR>(0.0f);
        }
      }
      issue(row + stages * step, stage);  // the stage's words are in registers now
      finish_row<K>(a, row, true, t, tpr, items, x, h, affine, scratch, scratch + tpr, k & 1);
    }
    wait_async<0>();  // no copy may outlive the block
  }
}

// Reads group g of h back in the second pass: from shared memory when staged there, else from
// global memory (residual_out when adding, whose values this thread wrote in the first pass;
// x otherwise).
template <class K>
FUSEKIT_DEVICE void reload_source(const NormKernelArgs& a, const typename K::TR* stage,
                                  int64_t row, int64_t g, float (&h)[K::kGroup]) {
  using TR = typename K::TR;
  constexpr int G = K::kGroup;
  if (g < a.smem_groups) {
    Packed<TR, G> p;
    p.load(stage + g * G);
#pragma unroll
    for (int e = 0; e < G; ++e) h[e] = to_float(p.elems[e]);
  } else {
    const TR* src = K::kAdd ? static_cast<const TR*>(a.residual_out) + row * a.residual_out_stride
                            : static_cast<const TR*>(a.x) + row * a.x_stride;
    load_group<TR, G, K::kLoad>(src, g * G, a.cols, h);
  }
}

// One block per row. Pass 1 reads the inputs once (forming and writing h when adding), sums, and
// stages the first smem_groups groups of h in shared memory; pass 2 writes the output.
template <class K>
__global__ void __launch_bounds__(K::kStagedThreads, 2) norm_staged_kernel(NormKernelArgs a) {
  if constexpr (!warp_size_compiled<K::kWarp>()) return;  // HIP: other warp size (platform.h)
  using TR = typename K::TR;
  constexpr int G = K::kGroup;
  constexpr int B = K::kBatch;
  extern __shared__ uint4 stage_words[];
  TR* stage = reinterpret_cast<TR*>(stage_words);
  __shared__ float scratch[2][K::kScratch];

  const int64_t row = blockIdx.x;
  const int threads = static_cast<int>(blockDim.x);
  const int64_t n = a.cols;
  const int64_t groups = (n + G - 1) / G;

  wait_for_prior_grids();
  allow_dependent_grids();

  // Pass 1: read, (add), stage, sum.
  float acc = 0.0f;
  for (int64_t g0 = threadIdx.x; g0 < groups; g0 += static_cast<int64_t>(threads) * B) {
    float h[B][G];
#pragma unroll
    for (int j = 0; j < B; ++j) {
      const int64_t g = g0 + static_cast<int64_t>(j) * threads;
      if (g < groups) {
        load_source<K>(a, row, g * G, h[j]);
      } else {
#pragma unroll
        for (int e = 0; e < G; ++e) h[j][e] = 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < B; ++j) {
      const int64_t g = g0 + static_cast<int64_t>(j) * threads;
      if (g < a.smem_groups) {
        Packed<TR, G> p;
#pragma unroll
        for (int e = 0; e < G; ++e) p.elems[e] = from_float<TR>(h[j][e]);
        p.store(stage + g * G);
      }
#pragma unroll
      for (int e = 0; e < G; ++e) acc += K::kLayer ? h[j][e] : h[j][e] * h[j][e];
    }
  }
  float mean = 0.0f;
  float total = row_sum<K::kWarp, K::kMaxWarpsPerRow>(acc, threads, scratch[0]);
  if constexpr (K::kLayer) {
    // Second pass over data on chip (or in L2): the variance about the mean.
    mean = total / static_cast<float>(n);
    acc = 0.0f;
    for (int64_t g = threadIdx.x; g < groups; g += threads) {
      float h[G];
      reload_source<K>(a, stage, row, g, h);
#pragma unroll
      for (int e = 0; e < G; ++e) {
        const float d = h[e] - mean;
        if (g * G + e < n) acc += d * d;
      }
    }
    total = row_sum<K::kWarp, K::kMaxWarpsPerRow>(acc, threads, scratch[1]);
  }
  const float rstd = rsqrtf(total / static_cast<float>(n) + a.eps);

  // Pass 2: normalize and write.
  constexpr int B2 = K::kOutBatch;
  for (int64_t g0 = threadIdx.x; g0 < groups; g0 += static_cast<int64_t>(threads) * B2) {
    float h[B2][G], w[B2][G], b[B2][G];
#pragma unroll
    for (int j = 0; j < B2; ++j) {
      const int64_t g = g0 + static_cast<int64_t>(j) * threads;
      if (g < groups) {
        reload_source<K>(a, stage, row, g, h[j]);
        load_affine<K>(a, g * G, w[j], b[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < B2; ++j) {
      const int64_t g = g0 + static_cast<int64_t>(j) * threads;
      if (g < groups) write_output<K>(a, row, g * G, h[j], w[j], b[j], mean, rstd);
    }
  }
  if (threadIdx.x == 0) {
    if (a.rstd != nullptr) a.rstd[row] = rstd;
    if (K::kLayer && a.mean != nullptr) a.mean[row] = mean;
  }
}

}  // namespace fusekit::gpu
