// A measurement probe, not library code: can silu_and_mul_quant_fp8 at M = 2048 lose its start
// and tail? The library's one-block kernel gives each row a block that holds it from its first
// load to its last store, so the grid's first wave waits on its loads with nothing to compute and
// its last blocks compute and write with the memory idle: about one block lifetime per call,
// 17% of [2048, 14336] (bench/NOTES.md, "fp8 act_and_mul over M: a fixed cost, not a tail").
// Here the same row work (a warp tile of four 16-byte groups a thread, y staged in shared memory
// through the row's max) runs in three launch forms:
//   block    a block a row, grid = M (the library's launch shape)
//   static   k resident blocks an SM, each taking rows blockIdx.x + i * grid, the next row's loads
//            issued into registers once the current row's y is staged, before its max and stores
//   dynamic  the same, rows taken from a counter (atomicAdd), so no block waits on a fixed share
// (k = 1, 2: three blocks of 448 threads that hold a row's loads spill), and, with
// PROBE_WITH_FUSEKIT, the library's own call (column "fusekit"). Cold timing as the
// library's benchmark: a read of 256 MB before each call, events around it, medians. Each form's
// codes and scales are checked equal to the block form's.
// Outside the library's build on purpose; CUDA only:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o act_quant_pipeline_probe \
//     bench/act_quant_pipeline_probe.cu
// and with the library's call beside them, linked to a CUDA build:
//   nvcc ... -DPROBE_WITH_FUSEKIT -I include -I BUILD/include bench/act_quant_pipeline_probe.cu \
//     BUILD/libfusekit.a -lcuda -Xcompiler -fopenmp
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "probe_common.h"

#ifdef PROBE_WITH_FUSEKIT
#include "fusekit/activation.h"
#include "fusekit/fp8.h"
#endif

namespace {

constexpr int kItems = 4;   // 16-byte groups a thread, as the library's one-block kernel
constexpr int kGroup = 8;   // bf16 elements a group
constexpr float kFp8Max = 448.0f;

__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// Rows of [gate | up] (x of [M, 2N]); the thread's groups: warp tile of kItems x 32 groups,
// item i of lane l at group (warp * kItems + i) * 32 + l.
struct RowLoads {
  uint4 g[kItems], u[kItems];
  __device__ __forceinline__ void issue_item(const __nv_bfloat16* x, int64_t row, int n,
                                             int first, int step, int i) {
    const __nv_bfloat16* gate = x + row * 2 * static_cast<int64_t>(n);
    const int col = first + i * step;
    if (col < n) {
      g[i] = __ldg(reinterpret_cast<const uint4*>(gate + col));
      u[i] = __ldg(reinterpret_cast<const uint4*>(gate + n + col));
    }
  }
  __device__ __forceinline__ void issue(const __nv_bfloat16* x, int64_t row, int n, int first,
                                        int step) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) issue_item(x, row, n, first, step, i);
  }
};

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// kMode: 0 block (grid = M), 1 static rows, 2 rows from counter[0].
template <int kMode, int kMinBlocks>
__global__ void __launch_bounds__(448, kMinBlocks)
    quant_rows(const __nv_bfloat16* x, uint8_t* out, float* scale, int m, int n, int* counter) {
  extern __shared__ float4 staging[];  // [kItems][2][blockDim.x] float4: y of the thread's items
  __shared__ float warp_maxima[2][32];
  // Dynamic rows: the row of iteration k at next_rows[k % 3], taken two iterations ahead, so a
  // slot is rewritten only after a barrier that follows its last read.
  __shared__ int next_rows[3];
  const int t = threadIdx.x, lane = t % 32, warp = t / 32, warps = blockDim.x / 32;
  const int first = (warp * kItems * 32 + lane) * kGroup, step = 32 * kGroup;
  int row;
  if constexpr (kMode == 2) {
    if (t == 0) {
      next_rows[0] = atomicAdd(counter, 1);
      next_rows[1] = atomicAdd(counter, 1);
    }
    __syncthreads();
    row = next_rows[0];
  } else {
    row = blockIdx.x;
  }
  RowLoads loads;
  // The block form issues a row's items two at a time (item i + 1's loads before item i's math),
  // as the library's kernel does within its 48 registers; the resident forms hold a whole row's
  // loads, issued during the previous row's max and stores.
  if constexpr (kMode == 0) {
    if (row < m) loads.issue_item(x, row, n, first, step, 0);
  } else {
    if (row < m) loads.issue(x, row, n, first, step);
  }
  for (int it = 0; row < m; ++it) {
    float max_abs = 0.0f;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if constexpr (kMode == 0) {
        if (i + 1 < kItems) loads.issue_item(x, row, n, first, step, i + 1);
      }
      const int col = first + i * step;
      if (col < n) {
        float g[kGroup], u[kGroup], y[kGroup];
        unpack(loads.g[i], g);
        unpack(loads.u[i], u);
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
          y[e] = silu_mul(g[e], u[e]);
          max_abs = fmaxf(max_abs, fabsf(y[e]));
        }
        staging[(2 * i) * blockDim.x + t] = make_float4(y[0], y[1], y[2], y[3]);
        staging[(2 * i + 1) * blockDim.x + t] = make_float4(y[4], y[5], y[6], y[7]);
      }
    }
    int next;
    if constexpr (kMode == 0) {
      next = m;
    } else if constexpr (kMode == 1) {
      next = row + gridDim.x;
    } else {
      next = next_rows[(it + 1) % 3];
    }
    // The next row's loads in flight through this row's max and stores.
    if (next < m) loads.issue(x, next, n, first, step);
    max_abs = warp_max(max_abs);
    if (lane == 0) warp_maxima[it & 1][warp] = max_abs;
    if constexpr (kMode == 2) {
      if (t == 0) next_rows[(it + 2) % 3] = atomicAdd(counter, 1);  // the row after next
    }
    __syncthreads();
    max_abs = lane < warps ? warp_maxima[it & 1][lane] : 0.0f;
    max_abs = warp_max(max_abs);
    const float s = fmaxf(max_abs / kFp8Max, 1e-12f);
    const float inverse = 1.0f / s;
    uint8_t* out_row = out + static_cast<int64_t>(row) * n;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int col = first + i * step;
      if (col < n) {
        const float4 a = staging[(2 * i) * blockDim.x + t];
        const float4 b = staging[(2 * i + 1) * blockDim.x + t];
        const float y[kGroup] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        uint8_t q[kGroup];
#pragma unroll
        for (int e = 0; e < kGroup; ++e) {
          q[e] = __nv_cvt_float_to_fp8(y[e] * inverse, __NV_SATFINITE, __NV_E4M3);
        }
        uint2 packed;
        std::memcpy(&packed, q, sizeof(packed));
        *reinterpret_cast<uint2*>(out_row + col) = packed;
      }
    }
    if (t == 0) scale[row] = s;
    row = next;
  }
}

__global__ void read_flush(const float4* p, int64_t count, float* sink) {
  float acc = 0.0f;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 v = p[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1234.5f) *sink = acc;
}

__global__ void fill_random(__nv_bfloat16* p, int64_t count, uint32_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xffffff) / 16777216.0f - 0.5f) * 8.0f);
  }
}

struct Buffers {
  __nv_bfloat16* x = nullptr;
  uint8_t* out = nullptr;
  float* scale = nullptr;
  int* counters = nullptr;
  float4* flush = nullptr;
  float* sink = nullptr;
  void* copy_src = nullptr;
  void* copy_dst = nullptr;
};

constexpr int kReps = 30;
constexpr int64_t kFlushBytes = int64_t{256} << 20;

template <class Launch>
float cold_median_us(const Buffers& b, Launch launch) {
  cudaEvent_t start, stop;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int rep = -2; rep < kReps; ++rep) {
    read_flush<<<1056, 256>>>(b.flush, kFlushBytes / 16, b.sink);
    CK(cudaEventRecord(start));
    launch(rep + 2);  // 0 .. kReps + 1: the dynamic form's counter of this call
    CK(cudaEventRecord(stop));
    CK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, start, stop));
    if (rep >= 0) times.push_back(ms * 1000.0f);
  }
  CK(cudaGetLastError());
  std::sort(times.begin(), times.end());
  CK(cudaEventDestroy(start));
  CK(cudaEventDestroy(stop));
  return times[times.size() / 2];
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line out as it is printed
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, sms);
  const int ns[] = {14336, 11008};
  const int ms[] = {2048, 16384, 1024, 4096};
  const int64_t max_elems = int64_t{16384} * 14336;
  Buffers b;
  CK(cudaMalloc(&b.x, max_elems * 2 * sizeof(__nv_bfloat16)));
  CK(cudaMalloc(&b.out, max_elems));
  CK(cudaMalloc(&b.scale, 16384 * sizeof(float)));
  CK(cudaMalloc(&b.counters, (kReps + 2) * sizeof(int)));  // one a call
  CK(cudaMalloc(&b.flush, kFlushBytes));
  CK(cudaMalloc(&b.sink, sizeof(float)));
  // The copy moves half of a call's bytes each way: 5 bytes an element and a float a row.
  const int64_t max_copy_bytes = (max_elems * 5 + int64_t{16384} * 4) / 2;
  CK(cudaMalloc(&b.copy_src, max_copy_bytes));
  CK(cudaMalloc(&b.copy_dst, max_copy_bytes));
  CK(cudaMemset(b.flush, 0, kFlushBytes));
  fill_random<<<1024, 256>>>(b.x, max_elems * 2, 12345u);
  CK(cudaDeviceSynchronize());
  std::vector<uint8_t> ref_out, got_out;
  std::vector<float> ref_scale, got_scale;
  std::printf("%6s %6s %9s %9s %9s %9s %9s %9s %9s   (cold us; %% of a copy of the same bytes "
              "in [])\n",
              "M", "N", "copy", "fusekit", "block", "static1", "static2", "dynamic1", "dynamic2");
  for (const int n : ns) {
    const int groups = n / kGroup;
    const int threads = (groups + kItems * 32 - 1) / (kItems * 32) * 32;
    const size_t smem = static_cast<size_t>(threads) * kItems * kGroup * sizeof(float);
    CK(cudaFuncSetAttribute(quant_rows<0, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(smem)));
    CK(cudaFuncSetAttribute(quant_rows<1, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(smem)));
    CK(cudaFuncSetAttribute(quant_rows<1, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(smem)));
    CK(cudaFuncSetAttribute(quant_rows<2, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(smem)));
    CK(cudaFuncSetAttribute(quant_rows<2, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(smem)));
    for (const int m : ms) {
      const double bytes = static_cast<double>(m) * n * 5 + m * 4.0;
      const float copy = cold_median_us(b, [&](int) {
        CK(cudaMemcpyAsync(b.copy_dst, b.copy_src, static_cast<size_t>(bytes / 2),
                           cudaMemcpyDeviceToDevice));
      });
      auto snapshot = [&](std::vector<uint8_t>& o, std::vector<float>& s) {
        o.resize(static_cast<size_t>(m) * n);
        s.resize(m);
        CK(cudaMemcpy(o.data(), b.out, o.size(), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(s.data(), b.scale, s.size() * sizeof(float), cudaMemcpyDeviceToHost));
      };
      auto poison = [&] {
        CK(cudaMemset(b.out, 0xff, static_cast<size_t>(m) * n));
        CK(cudaMemset(b.scale, 0xff, m * sizeof(float)));
      };
      float fk = 0.0f;
#ifdef PROBE_WITH_FUSEKIT
      {
        const fusekit::Device gpu = fusekit::Device::gpu(0);
        const auto xv = fusekit::TensorView::contiguous(b.x, fusekit::DType::kBFloat16, gpu,
                                                        {m, 2 * int64_t{n}});
        const auto ov = fusekit::TensorView::contiguous(b.out, fusekit::DType::kFloat8E4M3FN,
                                                        gpu, {m, int64_t{n}});
        const auto sv = fusekit::TensorView::contiguous(b.scale, fusekit::DType::kFloat32, gpu,
                                                        {m, int64_t{1}});
        fk = cold_median_us(b, [&](int) {
          const fusekit::Status st = fusekit::silu_and_mul_quant_fp8(
              ov, sv, xv, fusekit::Fp8Format::kE4M3FN, 0.0f, nullptr);
          if (!st.ok()) {
            std::printf("fusekit: %s\n", st.message().c_str());
            std::exit(1);
          }
        });
      }
#endif
      poison();
      const float block = cold_median_us(b, [&](int) {
        quant_rows<0, 3><<<m, threads, smem>>>(b.x, b.out, b.scale, m, n, nullptr);
      });
      snapshot(ref_out, ref_scale);
      int mismatches = 0;
      auto check = [&](const char* name) {
        snapshot(got_out, got_scale);
        if (got_out != ref_out || got_scale != ref_scale) {
          std::printf("MISMATCH %s at [%d, %d]\n", name, m, n);
          ++mismatches;
        }
      };
      auto resident = [&](auto kernel, int per_sm, bool dynamic, const char* name) {
        poison();
        CK(cudaMemset(b.counters, 0, (kReps + 2) * sizeof(int)));
        const float us = cold_median_us(b, [&](int rep) {
          kernel<<<std::min(m, sms * per_sm), threads, smem>>>(
              b.x, b.out, b.scale, m, n, dynamic ? b.counters + rep : nullptr);
        });
        check(name);
        return us;
      };
      const float s1 = resident(quant_rows<1, 1>, 1, false, "static1");
      const float s2 = resident(quant_rows<1, 2>, 2, false, "static2");
      const float d1 = resident(quant_rows<2, 1>, 1, true, "dynamic1");
      const float d2 = resident(quant_rows<2, 2>, 2, true, "dynamic2");
      auto pct = [&](float us) { return us > 0.0f ? 100.0f * copy / us : 0.0f; };
      std::printf("%6d %6d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", m, n, copy, fk, block,
                  s1, s2, d1, d2);
      std::printf("%6s %6s %9s [%5.1f%%] [%5.1f%%] [%5.1f%%] [%5.1f%%] [%5.1f%%] [%5.1f%%]%s\n",
                  "", "", "", pct(fk), pct(block), pct(s1), pct(s2), pct(d1), pct(d2),
                  mismatches ? "  (mismatches above)" : "");
    }
  }
  return 0;
}
