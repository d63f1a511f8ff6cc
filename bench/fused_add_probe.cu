// A measurement probe, not library code: the shortest out-of-place fused add + RMSNorm we could
// write (bf16, one row a block of 128 threads, `items` 16-byte groups a thread, no bounds beyond
// the row's end, no tails), with each of the library kernel's choices as a switch, so that one
// process can time which of them separates fusekit's kernel from the seed kernel at batches that
// fill the GPU several times over (bench/NOTES.md, "The fused add at M = 2048 against a minimal
// kernel"). bench/fused_add_probe.py compiles it with nvcc and times it beside the library, the
// seed kernel and torch.compile. CUDA only (sm_90 and newer for the PDL switch), outside the
// library's build and its platform layer on purpose: it is a yardstick, kept short.
//
// The switches (bits of `choices`):
//   kRoundedSquares  the sum of squares over h rounded to bf16 (the library's numerics: what is
//                    normalized is the residual as stored), rather than over the float sum;
//   kEarlyWeight     the weight's loads beside the row's (the library's general kernels) rather
//                    than after the reduction;
//   kLateResidual    h stored with the outputs, after the reduction, rather than before it (the
//                    library's place);
//   kExactDivision   sum / n through an IEEE division (the library's) rather than a product by
//                    the reciprocal of n;
//   kDependentLaunch griddepcontrol.wait and launch_dependents at the start, launched with
//                    programmatic stream serialization (the library's default);
//   kWeightAtOnce    without kEarlyWeight: every group's weight loaded after the reduction before
//                    any output is stored, rather than group by group beside its outputs (where
//                    each group's load waits behind the previous group's stores: one cache round
//                    trip a group on the row's path).
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

namespace {

enum Choice : int {
  kRoundedSquares = 1,
  kEarlyWeight = 2,
  kDependentLaunch = 4,
  kLateResidual = 8,
  kExactDivision = 16,
  kWeightAtOnce = 32,
};
constexpr int kChoiceCount = 64;

// kWeightAtOnce orders the late weight's loads: with kEarlyWeight there are none to order.
__host__ __device__ constexpr bool choices_valid(int choices) {
  return !((choices & kWeightAtOnce) != 0 && (choices & kEarlyWeight) != 0);
}

constexpr int kThreads = 128;
constexpr int kGroup = 8;  // bf16 elements in 16 bytes

struct alignas(16) Group {
  __nv_bfloat162 pairs[4];
};

__device__ __forceinline__ Group load_group(const __nv_bfloat16* p) {
  const uint4 bits = __ldg(reinterpret_cast<const uint4*>(p));
  Group g;
  __builtin_memcpy(&g, &bits, sizeof(bits));
  return g;
}

__device__ __forceinline__ void store_group(__nv_bfloat16* p, const Group& g) {
  uint4 bits;
  __builtin_memcpy(&bits, &g, sizeof(bits));
  *reinterpret_cast<uint4*>(p) = bits;
}

template <int kItems, int kChoices>
__global__ void __launch_bounds__(kThreads)
    fused_add_probe_kernel(const __nv_bfloat16* __restrict__ x,
                           const __nv_bfloat16* __restrict__ residual,
                           const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ y,
                           __nv_bfloat16* __restrict__ residual_out, int n, float eps) {
  constexpr bool kRounded = (kChoices & kRoundedSquares) != 0;
  constexpr bool kEarly = (kChoices & kEarlyWeight) != 0;
  constexpr bool kLate = (kChoices & kLateResidual) != 0;
  constexpr bool kAtOnce = (kChoices & kWeightAtOnce) != 0;
  static_assert(choices_valid(kChoices), "the weight at once is a late weight");
  if constexpr ((kChoices & kDependentLaunch) != 0) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
  }
  __shared__ float warp_sums[kThreads / 32];
  const size_t row = static_cast<size_t>(blockIdx.x) * n;
  const int t = static_cast<int>(threadIdx.x);
  Group xg[kItems], rg[kItems], wg[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int col = (t + i * kThreads) * kGroup;
    if (col < n) {
      xg[i] = load_group(x + row + col);
      rg[i] = load_group(residual + row + col);
      if constexpr (kEarly) wg[i] = load_group(weight + col);
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) xg[i].pairs[k] = rg[i].pairs[k] = __floats2bfloat162_rn(0, 0);
    }
  }
  float h[kItems][kGroup];
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    Group stored;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 a = __bfloat1622float2(xg[i].pairs[k]);
      const float2 b = __bfloat1622float2(rg[i].pairs[k]);
      h[i][2 * k] = a.x + b.x;
      h[i][2 * k + 1] = a.y + b.y;
      stored.pairs[k] = __floats2bfloat162_rn(h[i][2 * k], h[i][2 * k + 1]);
      if constexpr (kRounded) {
        const float2 q = __bfloat1622float2(stored.pairs[k]);
        h[i][2 * k] = q.x;
        h[i][2 * k + 1] = q.y;
      }
    }
    const int col = (t + i * kThreads) * kGroup;
    if constexpr (!kLate) {
      if (col < n) store_group(residual_out + row + col, stored);
    }
#pragma unroll
    for (int e = 0; e < kGroup; ++e) sum += h[i][e] * h[i][e];
  }
#pragma unroll
  for (int lanes = 16; lanes > 0; lanes >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, lanes);
  if ((t & 31) == 0) warp_sums[t >> 5] = sum;
  __syncthreads();
  const float total = (warp_sums[0] + warp_sums[1]) + (warp_sums[2] + warp_sums[3]);
  const float mean_square = (kChoices & kExactDivision) != 0
                                ? __fdiv_rn(total, static_cast<float>(n))
                                : total * __frcp_rn(static_cast<float>(n));
  const float rstd = rsqrtf(mean_square + eps);
  if constexpr (kAtOnce) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int col = (t + i * kThreads) * kGroup;
      if (col < n) wg[i] = load_group(weight + col);
    }
  }
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int col = (t + i * kThreads) * kGroup;
    if (col < n) {
      if constexpr (!kEarly && !kAtOnce) wg[i] = load_group(weight + col);
      Group out, stored;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 w = __bfloat1622float2(wg[i].pairs[k]);
        out.pairs[k] =
            __floats2bfloat162_rn(h[i][2 * k] * rstd * w.x, h[i][2 * k + 1] * rstd * w.y);
        if constexpr (kLate) {
          stored.pairs[k] = __floats2bfloat162_rn(h[i][2 * k], h[i][2 * k + 1]);
        }
      }
      if constexpr (kLate) store_group(residual_out + row + col, stored);
      store_group(y + row + col, out);
    }
  }
}

template <int kItems, int kChoices>
int launch(const void* x, const void* residual, const void* weight, void* y, void* residual_out,
           int rows, int n, float eps, cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(rows));
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  cudaLaunchAttribute dependent;
  dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &dependent;
  config.numAttrs = (kChoices & kDependentLaunch) != 0 ? 1 : 0;
  return cudaLaunchKernelEx(&config, fused_add_probe_kernel<kItems, kChoices>,
                            static_cast<const __nv_bfloat16*>(x),
                            static_cast<const __nv_bfloat16*>(residual),
                            static_cast<const __nv_bfloat16*>(weight),
                            static_cast<__nv_bfloat16*>(y),
                            static_cast<__nv_bfloat16*>(residual_out), n, eps);
}

// Every valid combination of the six switches, for one group count.
template <int kItems, int kChoices = 0>
int launch_choices(int choices, const void* x, const void* residual, const void* weight, void* y,
                   void* residual_out, int rows, int n, float eps, cudaStream_t stream) {
  if constexpr (choices_valid(kChoices)) {
    if (choices == kChoices) {
      return launch<kItems, kChoices>(x, residual, weight, y, residual_out, rows, n, eps, stream);
    }
  }
  if constexpr (kChoices + 1 < kChoiceCount) {
    return launch_choices<kItems, kChoices + 1>(choices, x, residual, weight, y, residual_out,
                                                rows, n, eps, stream);
  }
  return -1;
}

}  // namespace

// 0 on success, a CUDA error code, -1 for choices outside 0-63 or both kEarlyWeight and
// kWeightAtOnce, -2 for a row that is not whole
// 16-byte groups or needs more than 8 a thread (n <= 8192).
extern "C" int fused_add_probe(int choices, const void* x, const void* residual,
                               const void* weight, void* y, void* residual_out, int rows, int n,
                               float eps, void* stream) {
  if (n <= 0 || n % kGroup != 0 || n > 8 * kThreads * kGroup) return -2;
  const int items = (n / kGroup + kThreads - 1) / kThreads;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  auto run = [&](auto count) {
    return launch_choices<decltype(count)::value>(choices, x, residual, weight, y, residual_out,
                                                  rows, n, eps, s);
  };
  switch (items) {
    case 1: return run(std::integral_constant<int, 1>{});
    case 2: return run(std::integral_constant<int, 2>{});
    case 3:
    case 4: return run(std::integral_constant<int, 4>{});
    default: return run(std::integral_constant<int, 8>{});
  }
}
