// A measurement probe, not library code: what does a kernel moving the fp8 act_and_mul's bytes
// (gate and up read once as bf16, one e4m3 code an element written) take at [M, 14336] when it
// needs no row max (a fixed scale), one thread a 16-byte group as the plain op's kernel? Beside
// it: the same kernel writing bf16 (the plain op's bytes), a read-only pass, the same kernel with
// consecutive blocks on different rows (as many rows in flight as a block-a-row kernel has), and
// cudaMemcpy of the same bytes. 256 MB read before each call, events, medians of 30
// (bench/NOTES.md, "The fp8 act's bytes in an elementwise kernel"). Inputs are a constant
// pattern: the output is not checked, only timed. CUDA only, outside the library's build:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o act_bytes_probe \
//     bench/act_bytes_probe.cu
// Its results (bench/results/act-fp8-bytes-probe-h100-2026-12-06-02d563f.txt)
// were measured before its timer and math moved into probe_common.h, unchanged.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "probe_common.h"

// kMode 0: bf16 out, 1: e4m3 out with a fixed scale, 2: read only. kSpread: consecutive blocks
// take different rows (block b: row b % rows, chunk b / rows), so the blocks in flight at once
// span as many rows as a block-a-row kernel's.
template <int kMode, bool kSpread = false>
__global__ void __launch_bounds__(256) ew(const uint4* __restrict__ in, void* out, int64_t rows,
                                          int64_t groups, float inv) {
  int64_t t = blockIdx.x * 256ll + threadIdx.x;
  if constexpr (kSpread) {
    const int64_t row = blockIdx.x % rows, chunk = blockIdx.x / rows;
    if (chunk * 256 + threadIdx.x >= groups) return;
    t = row * groups + chunk * 256 + threadIdx.x;
  }
  if (t >= rows * groups) return;
  const int64_t r = t / groups, c = t % groups;
  float y[8];
  silu_mul_fast(in[r * 2 * groups + c], in[r * 2 * groups + groups + c], y);
  if constexpr (kMode == 0) {
    static_cast<uint4*>(out)[t] = pack(y);
  } else if constexpr (kMode == 1) {
    static_cast<uint2*>(out)[t] = e4m3_codes(y, inv);
  } else {
    float s = 0;
#pragma unroll
    for (int e = 0; e < 8; ++e) s += y[e];
    if (s == 12345.678f) static_cast<float*>(out)[0] = s;
  }
}

int main() {
  const int64_t N = 14336;
  const int64_t kMaxM = 16384;
  uint4 *in, *out, *copy_src, *copy_dst;
  const size_t in_bytes = kMaxM * 2 * N * 2;
  CK(cudaMalloc(&in, in_bytes));
  CK(cudaMalloc(&out, kMaxM * N * 2));
  CK(cudaMalloc(&copy_src, kMaxM * N * 3));
  CK(cudaMalloc(&copy_dst, kMaxM * N * 3));
  CK(cudaMemset(in, 0x3c, in_bytes));
  CK(cudaMemset(copy_src, 2, kMaxM * N * 3));
  ColdTimer timer;
  for (int64_t M : {2048, 4096, 16384}) {
    const int64_t groups = N / 8, threads = M * groups;
    const unsigned grid = static_cast<unsigned>((threads + 255) / 256);
    const double rb = M * 2 * N * 2.0;
    const double plain_b = rb + M * N * 2.0, fp8_b = rb + M * N * 1.0;
    const float t0 = timer.median_us([&] { ew<0><<<grid, 256>>>(in, out, M, groups, 1.0f); });
    const float t1 = timer.median_us([&] { ew<1><<<grid, 256>>>(in, out, M, groups, 0.5f); });
    const float t2 = timer.median_us([&] { ew<2><<<grid, 256>>>(in, out, M, groups, 1.0f); });
    const unsigned spread_grid = static_cast<unsigned>(M * ((groups + 255) / 256));
    const float t3 = timer.median_us(
        [&] { ew<1, true><<<spread_grid, 256>>>(in, out, M, groups, 0.5f); });
    const float c1 = timer.median_us([&] {
      cudaMemcpyAsync(copy_dst, copy_src, static_cast<size_t>(fp8_b / 2), cudaMemcpyDeviceToDevice);
    });
    const float c0 = timer.median_us([&] {
      cudaMemcpyAsync(copy_dst, copy_src, static_cast<size_t>(plain_b / 2),
                      cudaMemcpyDeviceToDevice);
    });
    std::printf("M=%lld N=%lld | plain-bytes ew %.2f us (%.0f GB/s), copy same bytes %.2f | "
                "fp8-bytes ew %.2f us (%.0f GB/s), copy same bytes %.2f | read-only %.2f us "
                "(%.0f GB/s) | fp8-bytes ew, blocks spread over rows %.2f us\n",
                (long long)M, (long long)N, t0, plain_b / t0 / 1e3, c0, t1, fp8_b / t1 / 1e3, c1,
                t2, rb / t2 / 1e3, t3);
  }
  std::printf("status: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
