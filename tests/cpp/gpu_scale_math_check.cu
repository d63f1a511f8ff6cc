// Exhaustive check of the straight-line math behind a dynamic fp8 scale, on a CUDA GPU (a ctest
// test of CUDA builds; exit code 77, counted as skipped, where no GPU is present).
//
// A row's scale is max|y| / fp8_max (core/fp8.h fp8_row_scale) and its codes take 1 / scale
// (fp8_inverse_row_scale). On CUDA devices both avoid the IEEE division's slow-path branch: the
// quotient as an estimate corrected by its residual (divide_by_constant), the reciprocal as the
// hardware estimate and two Newton steps (reciprocal_of_normal). The CPU backend, the reference
// the GPU tests compare against bit for bit, divides; those tests see only the scales their
// inputs make. This program runs every non-negative float (and NaN) through both on the GPU, for
// both fp8 formats, and counts where the bits differ:
//   - the scale, against the IEEE quotient floored and NaN-canonicalized the same way, with the
//     format's constants folded in (the e4m3fn kernels) and read from a kernel argument (the
//     kernels that take the format from their arguments, gpu/common/fp8_pack.cuh);
//   - 1 / s, for every float s in the scale's range [1 / (fp8_max * 512), FLT_MAX / fp8_max];
//   - 1 / d for every float d of [1, 16], the activations' range (core/act_math.h).
// Exits 1 on any difference.
#include <cstdio>
#include <cstdint>

#include "core/fp8.h"

namespace {

using fusekit::detail::Fp8E4M3FN;
using fusekit::detail::Fp8E4M3FNUZ;

struct Counts {
  unsigned long long scale_differs, reciprocal_differs, reciprocal_checked;
  float first_scale_input, first_reciprocal_input;
};

template <class F>
__device__ float ieee_row_scale(float max_abs) {
  constexpr float kMinScale = 1.0f / (F::kMax * 512.0f);
  float s = __fdiv_rn(fusekit::detail::saturate_to_float_range(max_abs), F::kMax);
  if (s != s) return __uint_as_float(0x7FC00000u);
  return s < kMinScale ? kMinScale : s;
}

// Thread i takes the floats with bits i, i + stride, ... below +inf, then +inf and a NaN.
template <class F>
__global__ void check(Counts* counts, float low, float high, fusekit::detail::Fp8Spec spec) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t u = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; u <= 0x7F800001u;
       u += stride) {
    const float x = __uint_as_float(static_cast<uint32_t>(u));
    const float fast = fusekit::detail::fp8_row_scale<F>(x, 0.0f);
    const float from_args = fusekit::detail::fp8_row_scale(x, 0.0f, spec);
    const float ieee = ieee_row_scale<F>(x);
    if (__float_as_uint(fast) != __float_as_uint(ieee) ||
        __float_as_uint(from_args) != __float_as_uint(ieee)) {
      if (atomicAdd(&counts->scale_differs, 1ull) == 0) counts->first_scale_input = x;
    }
    if (x >= low && x <= high) {
      atomicAdd(&counts->reciprocal_checked, 1ull);
      const float r = fusekit::detail::reciprocal_of_normal(x);
      if (__float_as_uint(r) != __float_as_uint(__frcp_rn(x))) {
        if (atomicAdd(&counts->reciprocal_differs, 1ull) == 0) counts->first_reciprocal_input = x;
      }
    }
  }
}

bool report(const char* what, const Counts& c) {
  std::printf("%-34s scale differs at %llu floats", what, c.scale_differs);
  if (c.scale_differs) std::printf(" (first %a)", c.first_scale_input);
  std::printf("; 1 / s differs at %llu of %llu", c.reciprocal_differs, c.reciprocal_checked);
  if (c.reciprocal_differs) std::printf(" (first %a)", c.first_reciprocal_input);
  std::printf("\n");
  return c.scale_differs == 0 && c.reciprocal_differs == 0 && c.reciprocal_checked > 0;
}

template <class F>
bool run(const char* name, float low, float high) {
  Counts* counts = nullptr;
  if (cudaMallocManaged(&counts, sizeof(Counts)) != cudaSuccess) return false;
  *counts = Counts{};
  check<F><<<4096, 256>>>(counts, low, high, fusekit::detail::fp8_spec(F::kFormat));
  const cudaError_t status = cudaDeviceSynchronize();
  if (status != cudaSuccess) {
    std::printf("%s: %s\n", name, cudaGetErrorString(status));
    return false;
  }
  const bool ok = report(name, *counts);
  cudaFree(counts);
  return ok;
}

template <class F>
bool run_format(const char* name) {
  constexpr float kMax = F::kMax;
  return run<F>(name, 1.0f / (kMax * 512.0f), 3.40282347e+38f / kMax);
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA GPU\n");
    return 77;
  }
  bool ok = run_format<Fp8E4M3FN>("e4m3fn (1 / s over its scales)");
  ok = run_format<Fp8E4M3FNUZ>("e4m3fnuz (1 / s over its scales)") && ok;
  ok = run<Fp8E4M3FN>("activations (1 / d over [1, 16])", 1.0f, 16.0f) && ok;
  std::printf(ok ? "all equal\n" : "DIFFERENCES\n");
  return ok ? 0 : 1;
}
