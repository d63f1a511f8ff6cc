// Sums across the threads that share a row, for any warp size.
//
// A row is handled by `threads_per_row` consecutive threads of a block: a power of two up to the
// warp size, or a multiple of the warp size. Within a warp the sum is a butterfly (xor shuffles),
// which leaves the bitwise-same total in every lane. Across warps each warp's total goes to shared
// memory and every thread adds its row's warp totals in warp order. Both orders are fixed by
// threads_per_row alone, so results are deterministic and independent of how many rows a launch
// holds. The warp size is a template parameter (32 on NVIDIA and AMD RDNA, 64 on AMD CDNA).
#pragma once

#include "gpu/platform.h"

namespace fusekit::gpu {

template <int kWarp>
FUSEKIT_DEVICE float warp_sum(float v, int lanes) {
  for (int offset = lanes / 2; offset > 0; offset /= 2) v += shfl_xor<kWarp>(v, offset);
  return v;
}

// `scratch` holds one float per warp of the block and must not be in use by another reduction
// that can still be reading it (callers alternate buffers). Every thread of the block calls this.
template <int kWarp>
FUSEKIT_DEVICE float row_sum(float v, int threads_per_row, float* scratch) {
  if (threads_per_row <= kWarp) return warp_sum<kWarp>(v, threads_per_row);
  v = warp_sum<kWarp>(v, kWarp);
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  if (static_cast<int>(threadIdx.x) % kWarp == 0) scratch[warp] = v;
  __syncthreads();
  const int warps_per_row = threads_per_row / kWarp;
  const float* row_warps = scratch + (warp / warps_per_row) * warps_per_row;
  float total = 0.0f;
  for (int w = 0; w < warps_per_row; ++w) total += row_warps[w];
  return total;
}

}  // namespace fusekit::gpu
