// Exhaustive check of float32 -> fp8 on a CUDA GPU against the same conversion compiled for the
// host (a ctest test of CUDA builds; exit code 77, counted as skipped, where no GPU is present).
//
// The GPU tests compare the fp8 ops with the CPU backend bit for bit, but only on the values their
// inputs make. core/fp8.h's float_to_fp8 is one source for both sides, yet the device compiler
// may treat it differently: denormal flushing, fma contraction, its rounding of the float add
// that rounds subnormal codes. And on sm_89+ the e4m3fn codes of the kernels come from the
// hardware conversion instead (gpu/common/fp8_pack.cuh quantize_group), whose rule must be the
// same. And kernels that convert in software read the format's constants from their arguments
// (Fp8FormatInArgs), where the compiler no longer folds them. This program converts every one of
// the 2^32 float bit patterns three ways on the GPU, for both formats, and compares each code
// with float_to_fp8 run on the host, which tests/cpp/test_fp8.cc checks against an independent
// oracle. Exits 1 on any difference.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/fp8.h"
#include "gpu/common/fp8_pack.cuh"

namespace fusekit::gpu {
namespace {

constexpr uint64_t kChunk = uint64_t{1} << 28;  // floats per launch (two 256 MiB code buffers)

// Codes of the floats with bits first + i: by float_to_fp8 (`scalar`), by quantize_group with
// an inverse scale of 1 (`grouped`: the hardware conversion where the kernels take it) and by
// quantize_group of the kernels that take the format from their arguments (`in_args`, given
// F's spec as a kernel argument).
template <class F>
__global__ void convert_kernel(uint32_t first, detail::Fp8Spec spec, uint8_t* scalar,
                               uint32_t* grouped, uint32_t* in_args, int* hardware) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *hardware = hardware_fp8_codes<F>();
  }
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t w = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; w < kChunk / 4;
       w += stride) {
    float v[4];
    for (int b = 0; b < 4; ++b) {
      const uint32_t bits = first + static_cast<uint32_t>(4 * w + b);
      std::memcpy(&v[b], &bits, sizeof(float));
      scalar[4 * w + b] = detail::float_to_fp8<F>(v[b]);
    }
    grouped[w] = quantize_group<F, 4>(v, 1.0f, spec).words[0];
    in_args[w] = quantize_group<Fp8FormatInArgs, 4>(v, 1.0f, spec).words[0];
  }
}

bool cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::printf("%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

// Converts all 2^32 floats; prints the counts of codes that differ from the host's.
template <class F>
bool check_format(const char* name) {
  uint8_t* scalar = nullptr;
  uint32_t* grouped = nullptr;
  uint32_t* in_args = nullptr;
  int* hardware = nullptr;
  bool ok = cuda_ok(cudaMalloc(&scalar, kChunk), "cudaMalloc") &&
            cuda_ok(cudaMalloc(&grouped, kChunk), "cudaMalloc") &&
            cuda_ok(cudaMalloc(&in_args, kChunk), "cudaMalloc") &&
            cuda_ok(cudaMallocManaged(&hardware, sizeof(int)), "cudaMallocManaged");
  std::vector<uint8_t> host_scalar(ok ? kChunk : 0), host_grouped(ok ? kChunk : 0),
      host_in_args(ok ? kChunk : 0);
  uint64_t scalar_differs = 0, grouped_differs = 0, in_args_differs = 0;
  uint32_t first_scalar = 0, first_grouped = 0, first_in_args = 0;
  // The spec as the library makes it for a call (fp8_spec, a host function), not a constant.
  const detail::Fp8Spec spec = detail::fp8_spec(F::kFormat);
  for (uint64_t first = 0; ok && first < (uint64_t{1} << 32); first += kChunk) {
    convert_kernel<F><<<1024, 256>>>(static_cast<uint32_t>(first), spec, scalar, grouped,
                                     in_args, hardware);
    ok = cuda_ok(cudaGetLastError(), "launch") &&
         cuda_ok(cudaMemcpy(host_scalar.data(), scalar, kChunk, cudaMemcpyDeviceToHost),
                 "copy") &&
         cuda_ok(cudaMemcpy(host_grouped.data(), grouped, kChunk, cudaMemcpyDeviceToHost),
                 "copy") &&
         cuda_ok(cudaMemcpy(host_in_args.data(), in_args, kChunk, cudaMemcpyDeviceToHost),
                 "copy");
    for (uint64_t i = 0; ok && i < kChunk; ++i) {
      const auto bits = static_cast<uint32_t>(first + i);
      float f;
      std::memcpy(&f, &bits, sizeof(f));
      const uint8_t want = detail::float_to_fp8<F>(f);
      // grouped holds each word's codes in memory order (v0 in the low byte, little-endian).
      if (host_scalar[i] != want && scalar_differs++ == 0) first_scalar = bits;
      if (host_grouped[i] != want && grouped_differs++ == 0) first_grouped = bits;
      if (host_in_args[i] != want && in_args_differs++ == 0) first_in_args = bits;
    }
  }
  const bool used_hardware = ok && *hardware != 0;
  cudaFree(scalar);
  cudaFree(grouped);
  cudaFree(in_args);
  cudaFree(hardware);
  if (!ok) return false;
  std::printf("%-9s float_to_fp8 differs at %llu floats", name,
              static_cast<unsigned long long>(scalar_differs));
  if (scalar_differs) std::printf(" (first bits 0x%08x)", first_scalar);
  std::printf(", quantize_group (%s) at %llu", used_hardware ? "hardware" : "integer",
              static_cast<unsigned long long>(grouped_differs));
  if (grouped_differs) std::printf(" (first bits 0x%08x)", first_grouped);
  std::printf(", format in arguments at %llu", static_cast<unsigned long long>(in_args_differs));
  if (in_args_differs) std::printf(" (first bits 0x%08x)", first_in_args);
  std::printf("\n");
  return scalar_differs == 0 && grouped_differs == 0 && in_args_differs == 0;
}

}  // namespace
}  // namespace fusekit::gpu

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA GPU\n");
    return 77;
  }
  using fusekit::detail::Fp8E4M3FN;
  using fusekit::detail::Fp8E4M3FNUZ;
  bool ok = fusekit::gpu::check_format<Fp8E4M3FN>("e4m3fn");
  ok = fusekit::gpu::check_format<Fp8E4M3FNUZ>("e4m3fnuz") && ok;
  std::printf(ok ? "all equal\n" : "DIFFERENCES\n");
  return ok ? 0 : 1;
}
