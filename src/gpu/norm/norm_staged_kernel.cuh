// The staged norm kernel: one block per row, the row's first groups kept in shared memory
// between the reduction and the output, the rest read again (from L2, where it was just read).
// It serves rows too long for one block's registers on GPUs without thread-block clusters (HIP,
// before sm_90), and fp8 outputs of such rows everywhere; norm_kernel.cuh has the shared pieces
// (the arguments, the traits, loading a group of the source, the output of a group) and the
// reasons for the three paths.
#pragma once

#include <cstdint>

#include "gpu/norm/norm_kernel.cuh"

namespace fusekit::gpu {

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
    for (int e = 0; e < G; ++e) h[e] = element_float(p, e);
  } else {
    const TR* src =
        K::kAdd ? static_cast<const TR*>(a.residual_out) +
                      row_offset<K, RowTensor::kResidualOut>(a, row)
                : static_cast<const TR*>(a.x) + row_offset<K, RowTensor::kX>(a, row);
    load_group<TR, G, K::kLoad>(src, g * G, a.cols, h);
  }
}

// One block per row. Pass 1 reads the inputs once (forming and writing h when adding), sums, and
// stages the first smem_groups groups of h in shared memory; pass 2 writes the output. An fp8
// output with a dynamic scale also takes max|h * w| in pass 1 (the weight read beside the row),
// reduced beside the sum: max|y| is that times rstd (output_values, norm_group_io.cuh).
template <class K>
__global__ void __launch_bounds__(K::kStagedThreads, 2) norm_staged_kernel(NormKernelArgs a) {
  // HIP: the copy for the other warp size (platform.h)
  if constexpr (!warp_size_compiled<K::kWarp>()) return stub_launched();
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
  const bool max_needed = K::kFp8Out && a.dynamic_scale != nullptr;
  float acc = 0.0f;
  float max_p = 0.0f;  // max|h * w| (fp8 output, dynamic scale)
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
      if constexpr (K::kFp8Out) {
        if (max_needed && g < groups) {
          // The weight from cache (every row reads it), a group at a time: registers for the
          // batch's weights beside its h spilled.
          float w[G], b[G], p[G];
          load_affine<K>(a, g * G, w, b);
#pragma unroll
          for (int e = 0; e < G; ++e) p[e] = h[j][e] * w[e];  // output_values' first product
          max_p = group_max_abs<K, false>(max_p, p, g * G, n);
        }
      }
    }
  }
  float mean = 0.0f;
  float total;
  if (max_needed) {  // uniform
    const SumMax row_values =
        row_sum_max<K::kWarp, K::kMaxWarpsPerRow, RowMaxForm::kShuffles>(acc, max_p, threads,
                                                                         scratch[0], scratch[1]);
    total = row_values.sum;
    max_p = row_values.max;
  } else {
    total = row_sum<K::kWarp, K::kMaxWarpsPerRow>(acc, threads, scratch[0]);
  }
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

  float inverse_scale = 1.0f;
  if constexpr (K::kFp8Out) {
    const StaticScaleAtCodes static_scale{a.static_scale};
    inverse_scale = fp8_inverse_for_row<K>(a, row, max_p * rstd, static_scale, threadIdx.x == 0);
  }

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
      if (g < groups) write_output<K>(a, row, g * G, h[j], w[j], b[j], mean, rstd, inverse_scale);
    }
  }
  if (threadIdx.x == 0) {
    if (a.rstd != nullptr) a.rstd[row] = rstd;
    if (K::kLayer && a.mean != nullptr) a.mean[row] = mean;
  }
}

}  // namespace fusekit::gpu
