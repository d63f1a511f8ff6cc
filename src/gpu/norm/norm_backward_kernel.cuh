// Device code of the normalization backward passes (include/fusekit/norm_backward.h), for CUDA and
// HIP alike, with the warp size as a template parameter.
//
// Shape of the work. The M rows are split into `partials` consecutive ranges, one block each (the
// split depends only on M: norm_backward_partials). A block holds `slots` rows at a time, each on
// `threads_per_row` consecutive threads (a power of two chosen from N); thread t of a row owns the
// 16-byte groups t, t + T, t + 2T, ... of it, as in the forward kernels. Per row:
//   pass 1  loads grad_out, h and the weight, and sums g * xhat (and g, for LayerNorm) over the
//           row: per thread in group order, then across the row's threads with reduce.cuh's fixed
//           tree;
//   pass 2  loads them again (from L1/L2: the block read them a moment ago), writes grad_h, and
//           adds grad_out * xhat and grad_out to the block's weight and bias sums.
// Reading twice instead of keeping the row in registers lets one kernel take any N (a row never
// has to fit anywhere) at the cost of a second pass through the cache.
//
// Weight and bias sums without atomics. Every thread adds only to the columns it owns, so no two
// threads ever touch one accumulator. The accumulators are per slot in shared memory when they
// fit (combined slot by slot, in order, into the block's workspace row at the end), or else, for
// long rows where a block holds one row at a time, the block's workspace row in global memory
// itself. A second kernel adds the workspace rows of all blocks in a fixed order: per column, eight
// threads each sum every eighth partial, then a fixed tree combines the eight. Results are
// bitwise reproducible run to run.
#pragma once

#include <cstdint>

#include "gpu/common/convert.cuh"
#include "gpu/common/reduce.cuh"
#include "gpu/common/vec_io.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

constexpr int kBackwardMaxBlock = 512;  // 128 registers per thread: no spills
// The parameter-sum kernel: kParamColumns columns per block, kParamLanes threads per column.
constexpr int kParamColumns = 32;
constexpr int kParamLanes = 8;

struct NormBackwardArgs {
  const void* grad_out;
  const void* x;
  const void* grad_extra;  // may be null
  void* grad_x;
  const float* rstd;
  const float* mean;    // null for RMSNorm
  const void* weight;   // may be null (LayerNorm without weight: 1)
  float* workspace;     // partials rows of ws_row floats; null without parameter gradients
  int64_t grad_out_stride;
  int64_t x_stride;
  int64_t grad_extra_stride;
  int64_t grad_x_stride;
  int64_t rows;
  int64_t cols;
  int64_t partials;
  int64_t ws_row;         // floats per workspace row (N per requested parameter gradient)
  int64_t weight_sum_at;  // offset of the weight sums in a workspace row, or -1
  int64_t bias_sum_at;    // offset of the bias sums, or -1
  float weight_offset;
  int threads_per_row;  // power of two
  int slots;            // rows a block holds at once (slots * threads_per_row <= blockDim.x)
  bool layer;
  bool sums_in_smem;  // accumulate per slot in shared memory (else in the workspace row)
};

// TG: grad_out's type; TH: h, grad_h and grad_extra; TW: weight. kGroup elements per group (16
// bytes of TG), moved kLoad at a time (kGroup when every pointer and stride allows, else 1).
template <typename TG, typename TH, typename TW, int kGroup, int kLoad, int kWarp>
__global__ void __launch_bounds__(kBackwardMaxBlock)
    norm_backward_rows_kernel(NormBackwardArgs a) {
  if constexpr (!warp_size_compiled<kWarp>()) {
    return stub_launched();  // this copy is for the other wavefront size (platform.h)
  } else {
    __shared__ float scratch[2][kBackwardMaxBlock];
    extern __shared__ float slot_sums[];  // slots x ws_row floats when sums_in_smem

    const int tpr = a.threads_per_row;
    const int slot = static_cast<int>(threadIdx.x) / tpr;
    const int lane = static_cast<int>(threadIdx.x) % tpr;
    const int64_t part = blockIdx.x;
    const int64_t first = part * a.rows / a.partials;
    const int64_t last = (part + 1) * a.rows / a.partials;
    const int64_t n = a.cols;
    const int64_t groups = (n + kGroup - 1) / kGroup;
    const float inv_n = 1.0f / static_cast<float>(n);

    // Threads past slots * threads_per_row (rounding the block up to whole warps) only take part
    // in the row sums.
    const bool in_slot = slot < a.slots;
    const bool sums = in_slot && (a.weight_sum_at >= 0 || a.bias_sum_at >= 0);
    float* acc = nullptr;
    if (sums) {
      acc = a.sums_in_smem ? slot_sums + static_cast<int64_t>(slot) * a.ws_row
                           : a.workspace + part * a.ws_row;
      for (int64_t gi = lane; gi < groups; gi += tpr) {
        for (int e = 0; e < kGroup; ++e) {
          const int64_t col = gi * kGroup + e;
          if (col >= n) break;
          if (a.weight_sum_at >= 0) acc[a.weight_sum_at + col] = 0.0f;
          if (a.bias_sum_at >= 0) acc[a.bias_sum_at + col] = 0.0f;
        }
      }
    }

    const auto* weight = static_cast<const TW*>(a.weight);
    auto weight_group = [&](int64_t col, float (&w)[kGroup]) {
      if (weight != nullptr) {
        load_group<TW, kGroup, kLoad>(weight, col, n, w);
#pragma unroll
        for (int e = 0; e < kGroup; ++e) w[e] += a.weight_offset;
      } else {
#pragma unroll
        for (int e = 0; e < kGroup; ++e) w[e] = 1.0f;
      }
    };

    const int64_t span = last - first;
    const int64_t steps = (span + a.slots - 1) / a.slots;
    int parity = 0;
    for (int64_t step = 0; step < steps; ++step) {
      const int64_t row = first + step * a.slots + slot;
      const bool active = in_slot && row < last;
      const int64_t r = active ? row : 0;
      const TG* dy_row = static_cast<const TG*>(a.grad_out) + r * a.grad_out_stride;
      const TH* h_row = static_cast<const TH*>(a.x) + r * a.x_stride;
      const float rstd = active ? a.rstd[row] : 0.0f;
      const float mean = active && a.layer ? a.mean[row] : 0.0f;

      // Pass 1: this thread's share of sum(g * xhat) and sum(g).
      float part_gx = 0.0f;
      float part_g = 0.0f;
      if (active) {
        for (int64_t gi = lane; gi < groups; gi += tpr) {
          const int64_t col = gi * kGroup;
          float dy[kGroup], h[kGroup], w[kGroup], gx[kGroup];
          load_group<TG, kGroup, kLoad>(dy_row, col, n, dy);
          load_group<TH, kGroup, kLoad>(h_row, col, n, h);
          weight_group(col, w);
#pragma unroll
          for (int e = 0; e < kGroup; ++e) {
            dy[e] *= w[e];  // g; zero past n, where dy loads as 0
            gx[e] = dy[e] * ((h[e] - mean) * rstd);
          }
          part_gx += tree_sum(gx);
          if (a.layer) part_g += tree_sum(dy);
        }
      }
      constexpr int kMaxWarpsPerRow = kBackwardMaxBlock / kWarp;
      const float mean_gx = row_sum<kWarp, kMaxWarpsPerRow>(part_gx, tpr, scratch[parity]) * inv_n;
      parity ^= 1;
      float mean_g = 0.0f;
      if (a.layer) {
        mean_g = row_sum<kWarp, kMaxWarpsPerRow>(part_g, tpr, scratch[parity]) * inv_n;
        parity ^= 1;
      }
      if (!active) continue;

      // Pass 2: grad_h, and the weight and bias sums.
      TH* dx_row = static_cast<TH*>(a.grad_x) + row * a.grad_x_stride;
      const TH* extra_row = a.grad_extra != nullptr
                                ? static_cast<const TH*>(a.grad_extra) + row * a.grad_extra_stride
                                : nullptr;
      for (int64_t gi = lane; gi < groups; gi += tpr) {
        const int64_t col = gi * kGroup;
        float dy[kGroup], h[kGroup], w[kGroup], d[kGroup];
        load_group<TG, kGroup, kLoad>(dy_row, col, n, dy);
        load_group<TH, kGroup, kLoad>(h_row, col, n, h);
        weight_group(col, w);
        if (extra_row != nullptr) {
          load_group<TH, kGroup, kLoad>(extra_row, col, n, d);
        } else {
#pragma unroll
          for (int e = 0; e < kGroup; ++e) d[e] = 0.0f;
        }
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
          const float xhat = (h[e] - mean) * rstd;
          d[e] += rstd * (dy[e] * w[e] - mean_g - xhat * mean_gx);
          h[e] = xhat;
        }
        store_group<TH, kGroup, kLoad>(dx_row, col, n, d);
        if (sums) {
#pragma unroll
          for (int e = 0; e < kGroup; ++e) {
            if (col + e < n) {  // (no early exit: the loop must unroll to keep arrays in registers)
              if (a.weight_sum_at >= 0) acc[a.weight_sum_at + col + e] += dy[e] * h[e];
              if (a.bias_sum_at >= 0) acc[a.bias_sum_at + col + e] += dy[e];
            }
          }
        }
      }
    }

    const bool block_sums = a.weight_sum_at >= 0 || a.bias_sum_at >= 0;  // uniform in the block
    if (block_sums && a.sums_in_smem) {
      __syncthreads();
      float* out = a.workspace + part * a.ws_row;
      for (int64_t j = threadIdx.x; j < a.ws_row; j += blockDim.x) {
        float s = 0.0f;
        for (int k = 0; k < a.slots; ++k) s += slot_sums[static_cast<int64_t>(k) * a.ws_row + j];
        out[j] = s;
      }
    }
  }
}

// out[j] = the sum over partials p of workspace[p * ws_row + at + j], in a fixed order. Block:
// kParamColumns x kParamLanes threads; lane l sums partials l, l + kParamLanes, ...; the lanes'
// sums are then folded as a tree. With no partials (M == 0) every sum is 0.
template <typename TP>
__global__ void __launch_bounds__(kParamColumns* kParamLanes)
    norm_backward_param_kernel(const float* workspace, int64_t partials, int64_t ws_row,
                               int64_t at, int64_t n, TP* out) {
  __shared__ float lanes[kParamLanes][kParamColumns];
  const int c = static_cast<int>(threadIdx.x) % kParamColumns;
  const int l = static_cast<int>(threadIdx.x) / kParamColumns;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kParamColumns + c;
  float s = 0.0f;
  if (j < n) {
    for (int64_t p = l; p < partials; p += kParamLanes) s += workspace[p * ws_row + at + j];
  }
  lanes[l][c] = s;
  __syncthreads();
  if (l == 0 && j < n) {
    float v[kParamLanes];
#pragma unroll
    for (int i = 0; i < kParamLanes; ++i) v[i] = lanes[i][c];
    out[j] = from_float<TP>(tree_sum(v));
  }
}

}  // namespace fusekit::gpu
