// A measurement probe, not library code: does a kernel that asks for dynamic shared memory pay a
// fixed cost a launch when the kernel before it ran with none (the driver then sets another
// L1/shared split on each SM)? The benchmark's cold-L2 timing runs a flush kernel with no shared
// memory before every timed call, so such a cost would show in every kernel that stages in shared
// memory (bench/NOTES.md, "The H100 run at 054fd55"). A grid-stride copy with S bytes of dynamic
// shared memory a block (touched, so it is allocated), S = 0-96 KB, timed with events after
// (a) a read-flush kernel with no shared memory, (b) the same flush launched with S bytes (the
// same split: nothing to reconfigure), (c) nothing (back to back). Medians of 180 calls.
// CUDA only, outside the library's build and its platform layer on purpose:
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o carveout_probe bench/carveout_probe.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "probe_common.h"

__global__ void flush_kernel(const uint4* p, size_t n, unsigned* sink) {
  extern __shared__ unsigned s[];
  unsigned acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

__global__ void copy_kernel(const uint4* src, uint4* dst, size_t n, int smem_words) {
  extern __shared__ unsigned s[];
  if (smem_words > 0) s[threadIdx.x % smem_words] = threadIdx.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    dst[i] = src[i];
  }
  if (smem_words > 0 && s[(threadIdx.x + 1) % smem_words] == 0xFFFFFFFFu) dst[0] = uint4{};
}

int main() {
  const size_t flush_bytes = size_t{200} << 20;
  uint4 *flush, *src, *dst;
  unsigned* sink;
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMemset(flush, 0, flush_bytes));
  CK(cudaMalloc(&sink, 4));
  const size_t max_bytes = size_t{64} << 20;
  CK(cudaMalloc(&src, max_bytes));
  CK(cudaMalloc(&dst, max_bytes));
  CK(cudaMemset(src, 1, max_bytes));
  CK(cudaFuncSetAttribute(copy_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  CK(cudaFuncSetAttribute(flush_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t a[64], b[64];
  for (int i = 0; i < 64; ++i) {
    CK(cudaEventCreate(&a[i]));
    CK(cudaEventCreate(&b[i]));
  }
  const int threads = 256;
  std::printf("bytes_copied  smem_per_block  blocks_per_sm  before  median_us\n");
  for (size_t bytes : {size_t{16} << 20, size_t{64} << 20}) {
    const size_t n = bytes / 16;
    for (int smem_kb : {0, 8, 24, 48, 96}) {
      const int smem = smem_kb << 10;
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, copy_kernel, threads, smem));
      const int grid = per_sm * sms;
      for (int mode = 0; mode < 3; ++mode) {
        std::vector<float> ms;
        for (int rep = 0; rep < 3; ++rep) {
          for (int i = 0; i < 64; ++i) {
            if (mode < 2) {
              flush_kernel<<<sms * 8, 512, mode == 1 ? smem : 0, st>>>(flush, flush_bytes / 16,
                                                                         sink);
            }
            CK(cudaEventRecord(a[i], st));
            copy_kernel<<<grid, threads, smem, st>>>(src, dst, n, smem / 4);
            CK(cudaEventRecord(b[i], st));
          }
          CK(cudaStreamSynchronize(st));
          for (int i = 4; i < 64; ++i) {
            float t;
            CK(cudaEventElapsedTime(&t, a[i], b[i]));
            ms.push_back(t);
          }
        }
        std::sort(ms.begin(), ms.end());
        const char* name[] = {"flush(no smem)", "flush(same smem)", "back-to-back"};
        std::printf("%10zu MB  %8d KB  %6d  %-17s %8.2f\n", bytes >> 20, smem_kb, per_sm,
                    name[mode], ms[ms.size() / 2] * 1e3);
      }
    }
  }
  return 0;
}
