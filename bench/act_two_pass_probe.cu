// A measurement probe, not library code: the fp8 act_and_mul's row max found by an elementwise
// pass and its codes written by a second pass over the same chunks while they are still in L2.
// One persistent kernel of 256-thread blocks (as many as the SMs hold, so that its waits cannot
// deadlock); a row in chunks of 2048 elements; at step s each block takes chunk s's first pass
// (loads, y, the chunk's max, an atomic max into the row's bits, then a count) and chunk
// s - lag's second (waits for the row's count, loads again, writes the codes; the row's last
// chunk clears its count and bits, so no memset between calls). Beside it in one process: the
// same y with a fixed scale (no row max) and a block-a-row kernel of 896 threads, whose codes and
// scales the two-pass kernel's must equal. Simplified math (__expf), bf16 in, e4m3 out; 256 MB
// read before each call, events, medians of 30 (bench/NOTES.md, "the codes from a second pass
// over L2"). CUDA only, outside the library's build:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o act_two_pass_probe \
//     bench/act_two_pass_probe.cu
// Its results (bench/results/act-fp8-two-pass-probe-h100-2026-12-06-e9fe383.txt)
// were measured before its timer and math moved into probe_common.h, unchanged.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "probe_common.h"

constexpr int kThreads = 256;  // a chunk: 256 groups of 8 = 2048 elements
__device__ __forceinline__ void values(const uint4* in, int64_t row, int64_t groups, int64_t c,
                                       float (&y)[8]) {
  silu_mul_fast(in[row * 2 * groups + c], in[row * 2 * groups + groups + c], y);
}
__device__ __forceinline__ float block_max(float m, float* sm) {
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(~0u, m, o));
  if (threadIdx.x % 32 == 0) sm[threadIdx.x / 32] = m;
  __syncthreads();
  m = sm[threadIdx.x % 32 < blockDim.x / 32 ? threadIdx.x % 32 : 0];
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(~0u, m, o));
  __syncthreads();
  return m;
}
__device__ __forceinline__ float scale_of(float m) { return fmaxf(m / 448.0f, 1e-12f); }

__global__ void __launch_bounds__(kThreads) tile2(const uint4* in, uint2* out, float* scale,
                                                  unsigned* maxbits, unsigned* done, int64_t rows,
                                                  int64_t groups, int chunks, int lag) {
  __shared__ float sm[8];
  __shared__ float inv_s;
  const int64_t G = gridDim.x, items = rows * chunks;
  const int64_t steps = (items + G - 1) / G;
  for (int64_t s = 0; s < steps + lag; ++s) {
    if (s < steps) {
      const int64_t item = s * G + blockIdx.x;
      if (item < items) {
        const int64_t row = item / chunks, c = (item % chunks) * kThreads + threadIdx.x;
        float m = 0.0f;
        if (c < groups) {
          float y[8];
          values(in, row, groups, c, y);
#pragma unroll
          for (int e = 0; e < 8; ++e) m = fmaxf(m, fabsf(y[e]));
        }
        m = block_max(m, sm);
        if (threadIdx.x == 0) {
          atomicMax(&maxbits[row], __float_as_uint(m));
          __threadfence();
          atomicAdd(&done[row], 1u);
        }
      }
    }
    if (s >= lag) {
      const int64_t item = (s - lag) * G + blockIdx.x;
      if (item < items) {
        const int64_t row = item / chunks, chunk = item % chunks;
        const int64_t c = chunk * kThreads + threadIdx.x;
        if (threadIdx.x == 0) {
          volatile unsigned* d = &done[row];
          while (*d < static_cast<unsigned>(chunks)) {
          }
          __threadfence();
          const float m = __uint_as_float(*(volatile unsigned*)&maxbits[row]);
          const float sc = scale_of(m);
          inv_s = 1.0f / sc;
          if (chunk == 0) scale[row] = sc;
          const unsigned old = atomicAdd(&done[row], 1u);
          if (old == 2u * chunks - 1) {
            maxbits[row] = 0;
            done[row] = 0;
          }
        }
        __syncthreads();
        const float inv = inv_s;
        if (c < groups) {
          float y[8];
          values(in, row, groups, c, y);
          out[row * groups + c] = e4m3_codes(y, inv);
        }
        __syncthreads();
      }
    }
  }
}

// A block a row (1024 threads at most, groups strided): the reference codes, and the shape of
// the library's kernels.
__global__ void __launch_bounds__(1024) rowwise(const uint4* in, uint2* out, float* scale,
                                                int64_t groups) {
  __shared__ float sm[32];
  const int64_t row = blockIdx.x;
  float y[2][8];
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t c = threadIdx.x + i * blockDim.x;
    if (c < groups) {
      values(in, row, groups, c, y[i]);
#pragma unroll
      for (int e = 0; e < 8; ++e) m = fmaxf(m, fabsf(y[i][e]));
    }
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(~0u, m, o));
  if (threadIdx.x % 32 == 0) sm[threadIdx.x / 32] = m;
  __syncthreads();
  m = sm[threadIdx.x % 32 < blockDim.x / 32 ? threadIdx.x % 32 : 0];
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(~0u, m, o));
  const float sc = scale_of(m), inv = 1.0f / sc;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t c = threadIdx.x + i * blockDim.x;
    if (c < groups) out[row * groups + c] = e4m3_codes(y[i], inv);
  }
  if (threadIdx.x == 0) scale[row] = sc;
}

__global__ void __launch_bounds__(kThreads) fixed_scale(const uint4* in, uint2* out, int64_t rows,
                                                        int64_t groups) {
  const int64_t t = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (t >= rows * groups) return;
  float y[8];
  values(in, t / groups, groups, t % groups, y);
  out[t] = e4m3_codes(y, 0.5f);
}

__global__ void fill(uint4* p, int64_t n) {
  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < n; i += gridDim.x * 256ll) {
    uint32_t w[4];
    for (int k = 0; k < 4; ++k) {
      uint32_t h = static_cast<uint32_t>(i * 4 + k) * 2654435761u;
      h ^= h >> 15;
      h *= 2246822519u;
      h ^= h >> 13;
      // two bf16 in about [-4, 4]: sign, exponent 125-129, random mantissa
      const uint32_t lo = (h & 0x8000u) | ((125u + (h >> 16) % 5u) << 7) | (h & 0x7fu);
      const uint32_t hi =
          ((h >> 1) & 0x8000u) | ((125u + (h >> 20) % 5u) << 7) | ((h >> 8) & 0x7fu);
      w[k] = lo | (hi << 16);
    }
    p[i] = make_uint4(w[0], w[1], w[2], w[3]);
  }
}
__global__ void differ(const uint2* a, const uint2* b, int64_t n, const float* sa, const float* sb,
                       int64_t rows, unsigned long long* count) {
  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < n; i += gridDim.x * 256ll) {
    if (a[i].x != b[i].x || a[i].y != b[i].y) atomicAdd(count, 1ull);
    if (i < rows && sa[i] != sb[i]) atomicAdd(count, 1ull);
  }
}

int main() {
  const int64_t N = 14336, groups = N / 8, kMaxM = 16384;
  const int chunks = static_cast<int>((groups + kThreads - 1) / kThreads);
  uint4* in;
  uint2 *out, *ref;
  float *scale, *ref_scale;
  unsigned* ws;  // [kMaxM] max bits, then [kMaxM] counts
  unsigned long long* count;
  CK(cudaMalloc(&in, kMaxM * 2 * N * 2));
  CK(cudaMalloc(&out, kMaxM * N));
  CK(cudaMalloc(&ref, kMaxM * N));
  CK(cudaMalloc(&scale, kMaxM * 4));
  CK(cudaMalloc(&ref_scale, kMaxM * 4));
  CK(cudaMalloc(&ws, kMaxM * 8));
  CK(cudaMalloc(&count, 8));
  CK(cudaMemset(ws, 0, kMaxM * 8));
  fill<<<1024, 256>>>(in, kMaxM * 2 * N * 2 / 16);
  int per_sm = 0, sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, tile2, kThreads, 0));
  std::printf("tile2: %d blocks an SM, %d SMs, %d chunks a row\n", per_sm, sms, chunks);
  ColdTimer timer;
  for (int64_t M : {2048, 4096, 16384}) {
    const double bytes = M * 2 * N * 2.0 + M * N;
    const unsigned ew_grid = static_cast<unsigned>((M * groups + kThreads - 1) / kThreads);
    const float t_fixed =
        timer.median_us([&] { fixed_scale<<<ew_grid, kThreads>>>(in, out, M, groups); });
    const float t_row = timer.median_us([&] { rowwise<<<M, 896>>>(in, ref, ref_scale, groups); });
    std::printf("M=%lld: fixed scale %.2f us (%.0f GB/s) | block a row %.2f us\n", (long long)M,
                t_fixed, bytes / t_fixed / 1e3, t_row);
    for (int blocks : {per_sm, per_sm > 4 ? per_sm - 2 : per_sm}) {
      for (int lag : {1, 2, 4}) {
        const unsigned grid = static_cast<unsigned>(blocks * sms);
        const float t = timer.median_us([&] {
          tile2<<<grid, kThreads>>>(in, out, scale, ws, ws + kMaxM, M, groups, chunks, lag);
        });
        CK(cudaMemset(count, 0, 8));
        differ<<<1024, 256>>>(out, ref, M * groups, scale, ref_scale, M, count);
        unsigned long long bad = 0;
        CK(cudaMemcpy(&bad, count, 8, cudaMemcpyDeviceToHost));
        std::printf("  two passes over L2, %d blocks an SM, lag %d: %.2f us (%.0f GB/s), %llu "
                    "codes or scales differ\n",
                    blocks, lag, t, bytes / t / 1e3, bad);
      }
    }
  }
  std::printf("status: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  return 0;
}
