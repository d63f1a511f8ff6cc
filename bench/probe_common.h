// What the measurement probes (bench/*_probe.cu) share: the check of a CUDA runtime call (print
// where it failed and exit), eight bfloat16 values from one 16-byte load and back, the library's
// order of a row's sum (warps_first_sum), a launch with programmatic dependent launch allowed,
// the median time a call over replays of a CUDA graph of many calls or cold (ColdTimer), their
// fixed random inputs, and the gated activations' y and e4m3 codes in a fast form. Probes are
// standalone programs outside the library's build, so they do not use its platform layer.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#ifdef PROBE_WITH_FUSEKIT
#include "fusekit/norm.h"
#endif

#define CK(x)                                                                \
  do {                                                                       \
    cudaError_t e = (x);                                                     \
    if (e != cudaSuccess) {                                                  \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

__device__ __forceinline__ void unpack(const uint4& v, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

// Eight floats as eight bfloat16 values in one 16-byte word (round to nearest even).
__device__ __forceinline__ uint4 pack(const float (&f)[8]) {
  uint4 v;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

// The library's order (gpu/common/reduce.cuh, row_sum): each thread's value through shared
// memory, every thread folding its lane's values of all warps as a tree, then the lanes.
// kOnce: the first warp alone folds, and leaves the total for the others past a second barrier.
template <int kThreads, bool kOnce>
__device__ __forceinline__ float warps_first_sum(float v) {
  constexpr int kWarps = kThreads / 32;
  __shared__ float slots[kThreads];
  slots[threadIdx.x] = v;
  __syncthreads();
  auto fold = [&] {
    float w[kWarps];
#pragma unroll
    for (int i = 0; i < kWarps; ++i) w[i] = slots[i * 32 + (threadIdx.x & 31)];
#pragma unroll
    for (int half = kWarps / 2; half > 0; half /= 2) {
#pragma unroll
      for (int i = 0; i < half; ++i) w[i] += w[i + half];
    }
    float s = w[0];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
  };
  if constexpr (!kOnce) {
    return fold();
  } else {
    if (threadIdx.x < 32) {
      const float total = fold();
      if (threadIdx.x == 0) slots[0] = total;
    }
    __syncthreads();
    return slots[0];
  }
}

// Launches kernel<<<blocks, threads, dynamic_smem, stream>>>(args...) with programmatic dependent
// launch allowed: the launch the library gives its decode calls.
template <typename... Params, typename... Args>
void launch_pdl(void (*kernel)(Params...), int blocks, int threads, int dynamic_smem,
                cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = dynamic_smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

// Median us a call over replays of a graph of `calls` calls of `call`.
inline float captured_us(const std::function<void(cudaStream_t)>& call, cudaStream_t s,
                         int calls) {
  cudaGraph_t graph;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < calls; ++i) call(s);
  CK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  CK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> t;
  for (int rep = 0; rep < 25; ++rep) {
    CK(cudaEventRecord(e0, s));
    CK(cudaGraphLaunch(exec, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (rep >= 3) t.push_back(ms * 1000.f / calls);
  }
  std::sort(t.begin(), t.end());
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return t[t.size() / 2];
}

// Reads n 16-byte words (the cold timer's flush); the sink is written only if the words' XOR
// happens to be one value, so the reads cannot be dropped.
__global__ void probe_read_flush(const uint4* p, size_t n, unsigned* sink) {
  unsigned x = 0;
  for (size_t i = blockIdx.x * size_t{256} + threadIdx.x; i < n; i += gridDim.x * size_t{256}) {
    x ^= p[i].x;
  }
  if (x == 0x12345678u) sink[0] = x;
}

// Cold-L2 timing, the benchmark's read-flush method: a read of 256 MB (five times an H100's L2)
// before each call, the call between two events on the default stream, the median of `runs`
// calls after three untimed ones.
class ColdTimer {
 public:
  ColdTimer() {
    CK(cudaMalloc(&flush_, kFlushBytes + 16));
    CK(cudaMemset(flush_, 1, kFlushBytes + 16));
    CK(cudaEventCreate(&start_));
    CK(cudaEventCreate(&stop_));
  }
  ~ColdTimer() {
    cudaFree(flush_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  float median_us(const std::function<void()>& call, int runs = 30) {
    std::vector<float> t;
    for (int i = 0; i < runs + 3; ++i) {
      probe_read_flush<<<132 * 8, 256>>>(flush_, kFlushBytes / 16,
                                         reinterpret_cast<unsigned*>(flush_ + kFlushBytes / 16));
      CK(cudaEventRecord(start_));
      call();
      CK(cudaEventRecord(stop_));
      CK(cudaEventSynchronize(stop_));
      float ms;
      CK(cudaEventElapsedTime(&ms, start_, stop_));
      if (i >= 3) t.push_back(ms * 1000.f);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }

 private:
  static constexpr size_t kFlushBytes = size_t{256} << 20;
  uint4* flush_ = nullptr;
  cudaEvent_t start_, stop_;
};

// silu(gate) * up for eight bfloat16 pairs, with the fast exp (the library's fp8 forms take the
// exact one: probes of bytes and launch shapes, not of numerics).
__device__ __forceinline__ void silu_mul_fast(const uint4& gate, const uint4& up, float (&y)[8]) {
  float g[8], u[8];
  unpack(gate, g);
  unpack(up, u);
#pragma unroll
  for (int e = 0; e < 8; ++e) y[e] = g[e] / (1.0f + __expf(-g[e])) * u[e];
}

// Eight e4m3 codes of y * inverse_scale (round to nearest even, saturating) in one 8-byte word.
__device__ __forceinline__ uint2 e4m3_codes(const float (&y)[8], float inverse_scale) {
  uint2 o;
  __nv_fp8x2_storage_t* p = reinterpret_cast<__nv_fp8x2_storage_t*>(&o);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    p[e] = __nv_cvt_float2_to_fp8x2(
        make_float2(y[2 * e] * inverse_scale, y[2 * e + 1] * inverse_scale), __NV_SATFINITE,
        __NV_E4M3);
  }
  return o;
}

// `count` bfloat16 values in [-0.5, 0.5) from a fixed linear congruential sequence: the same inputs
// in every run and every probe.
inline std::vector<__nv_bfloat16> random_bf16(size_t count) {
  std::vector<__nv_bfloat16> h(count);
  unsigned state = 12345u;
  for (auto& v : h) {
    state = state * 1664525u + 1013904223u;
    v = __float2bfloat16(static_cast<float>(state >> 8) / 16777216.0f - 0.5f);
  }
  return h;
}

// The first line of a graph-replay probe's output: the device and the method.
inline void print_replay_header() {
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  std::printf("%s, %d SMs; graph replay of 200 calls with PDL, median us a call\n", p.name,
              p.multiProcessorCount);
}

#ifdef PROBE_WITH_FUSEKIT
// The library's own call on a probe's bf16 rows ([rows, n], contiguous), for probes linked to a
// CUDA build of it: rms_norm into out or, given a residual, the fused add in place (x <- norm(x +
// residual) w, residual <- x + residual). eps 1e-6, no offset; exits on an error.
inline std::function<void(cudaStream_t)> library_norm_call(void* x, void* residual, void* w,
                                                           void* out, int rows, int n) {
  using fusekit::TensorView;
  const fusekit::Device gpu = fusekit::Device::gpu(0);
  const auto bf16 = fusekit::DType::kBFloat16;
  const int64_t m = rows, cols = n;
  const TensorView xv = TensorView::contiguous(x, bf16, gpu, {m, cols});
  const TensorView rv = residual != nullptr ? TensorView::contiguous(residual, bf16, gpu, {m, cols})
                                            : xv;
  const TensorView ov = TensorView::contiguous(out, bf16, gpu, {m, cols});
  const TensorView wv = TensorView::contiguous(w, bf16, gpu, {cols});
  return [=](cudaStream_t st) {
    const fusekit::Status status =
        residual != nullptr ? fusekit::fused_add_rms_norm_inplace(xv, rv, wv, 1e-6f, 0.0f, {}, st)
                            : fusekit::rms_norm(ov, xv, wv, 1e-6f, 0.0f, {}, st);
    if (!status.ok()) {
      std::printf("fusekit: %s\n", status.message().c_str());
      std::exit(1);
    }
  };
}

// Its median time a call in the probes' graph replay, its first call (setup) outside the capture.
inline float library_norm_us(const std::function<void(cudaStream_t)>& call, cudaStream_t s) {
  call(s);
  CK(cudaStreamSynchronize(s));
  return captured_us(call, s, 200);
}
#endif
