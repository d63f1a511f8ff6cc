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
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <vector>

__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }

// kSpread: consecutive blocks take different rows (block b: row b % rows, chunk b / rows), so the
// blocks in flight at once span as many rows as a block-a-row kernel's.
template <int kMode, bool kSpread = false>  // 0: bf16 out, 1: fp8 out, 2: read only
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
  const uint4 gv = in[r * 2 * groups + c];
  const uint4 uv = in[r * 2 * groups + groups + c];
  const __nv_bfloat16* g = reinterpret_cast<const __nv_bfloat16*>(&gv);
  const __nv_bfloat16* u = reinterpret_cast<const __nv_bfloat16*>(&uv);
  float y[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) y[e] = silu(__bfloat162float(g[e])) * __bfloat162float(u[e]);
  if constexpr (kMode == 0) {
    uint4 o;
    __nv_bfloat16* ob = reinterpret_cast<__nv_bfloat16*>(&o);
#pragma unroll
    for (int e = 0; e < 8; ++e) ob[e] = __float2bfloat16(y[e]);
    static_cast<uint4*>(out)[t] = o;
  } else if constexpr (kMode == 1) {
    uint2 o;
    __nv_fp8x2_storage_t* p = reinterpret_cast<__nv_fp8x2_storage_t*>(&o);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      p[e] = __nv_cvt_float2_to_fp8x2(make_float2(y[2 * e] * inv, y[2 * e + 1] * inv),
                                      __NV_SATFINITE, __NV_E4M3);
    }
    static_cast<uint2*>(out)[t] = o;
  } else {
    float s = 0;
#pragma unroll
    for (int e = 0; e < 8; ++e) s += y[e];
    if (s == 12345.678f) static_cast<float*>(out)[0] = s;
  }
}

__global__ void flush(const uint4* p, int64_t n, uint4* sink) {
  uint32_t x = 0;
  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < n; i += gridDim.x * 256ll) x ^= p[i].x;
  if (x == 0x12345678u) sink[0].x = x;
}

int main() {
  const int64_t N = 14336;
  const int64_t kMaxM = 16384;
  uint4 *in, *out, *fl, *copy_src, *copy_dst;
  const size_t in_bytes = kMaxM * 2 * N * 2, fl_bytes = 256ull << 20;
  cudaMalloc(&in, in_bytes);
  cudaMalloc(&out, kMaxM * N * 2);
  cudaMalloc(&fl, fl_bytes);
  cudaMalloc(&copy_src, kMaxM * N * 3);
  cudaMalloc(&copy_dst, kMaxM * N * 3);
  cudaMemset(in, 0x3c, in_bytes);
  cudaMemset(fl, 1, fl_bytes);
  cudaMemset(copy_src, 2, kMaxM * N * 3);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  auto timed = [&](auto&& call) {
    std::vector<float> v;
    for (int i = 0; i < 33; ++i) {
      flush<<<132 * 8, 256>>>(fl, fl_bytes / 16, out);
      cudaEventRecord(a);
      call();
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms;
      cudaEventElapsedTime(&ms, a, b);
      if (i >= 3) v.push_back(ms * 1000);
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (int64_t M : {2048, 4096, 16384}) {
    const int64_t groups = N / 8, threads = M * groups;
    const unsigned grid = static_cast<unsigned>((threads + 255) / 256);
    const double rb = M * 2 * N * 2.0;
    const double plain_b = rb + M * N * 2.0, fp8_b = rb + M * N * 1.0;
    const float t0 = timed([&] { ew<0><<<grid, 256>>>(in, out, M, groups, 1.0f); });
    const float t1 = timed([&] { ew<1><<<grid, 256>>>(in, out, M, groups, 0.5f); });
    const float t2 = timed([&] { ew<2><<<grid, 256>>>(in, out, M, groups, 1.0f); });
    const unsigned spread_grid = static_cast<unsigned>(M * ((groups + 255) / 256));
    const float t3 = timed([&] { ew<1, true><<<spread_grid, 256>>>(in, out, M, groups, 0.5f); });
    const float c1 = timed([&] {
      cudaMemcpyAsync(copy_dst, copy_src, static_cast<size_t>(fp8_b / 2), cudaMemcpyDeviceToDevice);
    });
    const float c0 = timed([&] {
      cudaMemcpyAsync(copy_dst, copy_src, static_cast<size_t>(plain_b / 2),
                      cudaMemcpyDeviceToDevice);
    });
    std::printf("M=%lld N=%lld | plain-bytes ew %.2f us (%.0f GB/s), copy same bytes %.2f | "
                "fp8-bytes ew %.2f us (%.0f GB/s), copy same bytes %.2f | read-only %.2f us "
                "(%.0f GB/s) | fp8-bytes ew, blocks spread over rows %.2f us\n",
                (long long)M, (long long)N, t0, plain_b / t0 / 1e3, c0, t1, fp8_b / t1 / 1e3, c1,
                t2, rb / t2 / 1e3, t3);
  }
  cudaError_t e = cudaGetLastError();
  std::printf("status: %s\n", cudaGetErrorString(e));
  return 0;
}
