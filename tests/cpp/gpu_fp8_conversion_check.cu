// Exhaustive check of float32 -> fp8 on a CUDA GPU against the same conversion compiled for the
// host (a ctest test of CUDA builds; exit code 77, counted as skipped, where no GPU is present).
//
// The GPU tests compare the fp8 ops with the CPU backend bit for bit, but only on the values their
// inputs make. core/fp8.h's float_to_fp8 is one source for both sides, yet the device compiler
// may treat it differently: denormal flushing, fma contraction, its rounding of the float add
// that rounds subnormal codes. And on sm_89+ the kernels' codes come from the hardware's e4m3fn
// conversion instead (gpu/common/fp8_pack.cuh quantize_group; e4m3fnuz's from that of twice the
// value, fixed up), whose rule must be the same. And kernels of Fp8FormatInArgs read the format's
// constants from their arguments, where the compiler no longer folds them. This program converts
// every one of the 2^32 float bit patterns four ways on the GPU, for both formats, and compares
// each code with float_to_fp8 run on the host, which tests/cpp/test_fp8.cc checks against an
// independent oracle. Exits 1 on any difference.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/fp8.h"
#include "gpu/common/fp8_pack.cuh"

namespace fusekit::gpu {
namespace {

constexpr uint64_t kChunk = uint64_t{1} << 28;  // floats per launch (256 MiB per code buffer)

// The four ways, in the order of the codes buffers below: float_to_fp8 with F's constants
// (`scalar`), quantize_group of F's kernels with an inverse scale of 1 (`grouped`: the hardware
// conversion where the kernels take it), quantize_group of the kernels that take the format from
// their arguments (`in_args`, given F's spec as a kernel argument) and the integer conversion with
// that spec (`integer`: what those kernels run on HIP and before sm_89).
constexpr int kWays = 4;
constexpr const char* kWayNames[kWays] = {"float_to_fp8", "quantize_group", "format in arguments",
                                          "integer, format in arguments"};

// Codes of the floats with bits first + i, each way's into its buffer (grouped codes are written a
// 32-bit word of four at a time, in memory order: v0 in the low byte, little-endian).
template <class F>
__global__ void convert_kernel(uint32_t first, detail::Fp8Spec spec, uint8_t* scalar,
                               uint8_t* grouped, uint8_t* in_args, uint8_t* integer,
                               int* hardware) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *hardware = hardware_fp8_codes();
  }
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t w = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; w < kChunk / 4;
       w += stride) {
    float v[4];
    for (int b = 0; b < 4; ++b) {
      const uint32_t bits = first + static_cast<uint32_t>(4 * w + b);
      std::memcpy(&v[b], &bits, sizeof(float));
      scalar[4 * w + b] = detail::float_to_fp8<F>(v[b]);
      integer[4 * w + b] = detail::float_to_fp8(v[b], spec);
    }
    reinterpret_cast<uint32_t*>(grouped)[w] = quantize_group<F, 4>(v, 1.0f, spec).words[0];
    reinterpret_cast<uint32_t*>(in_args)[w] =
        quantize_group<Fp8FormatInArgs, 4>(v, 1.0f, spec).words[0];
  }
}

bool cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::printf("%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

// Converts all 2^32 floats; prints the counts of codes that differ from the host's.
template <class F>
bool check_format(const char* name) {
  uint8_t* codes[kWays] = {};
  int* hardware = nullptr;
  bool ok = cuda_ok(cudaMallocManaged(&hardware, sizeof(int)), "cudaMallocManaged");
  for (uint8_t*& c : codes) ok = ok && cuda_ok(cudaMalloc(&c, kChunk), "cudaMalloc");
  std::vector<uint8_t> host[kWays];
  for (std::vector<uint8_t>& h : host) h.resize(ok ? kChunk : 0);
  uint64_t differs[kWays] = {};
  uint32_t first_differing[kWays] = {};
  // The spec as the library makes it for a call (fp8_spec, a host function), not a constant.
  const detail::Fp8Spec spec = detail::fp8_spec(F::kFormat);
  for (uint64_t first = 0; ok && first < (uint64_t{1} << 32); first += kChunk) {
    convert_kernel<F><<<1024, 256>>>(static_cast<uint32_t>(first), spec, codes[0], codes[1],
                                     codes[2], codes[3], hardware);
    ok = cuda_ok(cudaGetLastError(), "launch");
    for (int way = 0; ok && way < kWays; ++way) {
      ok = cuda_ok(cudaMemcpy(host[way].data(), codes[way], kChunk, cudaMemcpyDeviceToHost),
                   "copy");
    }
    for (uint64_t i = 0; ok && i < kChunk; ++i) {
      const auto bits = static_cast<uint32_t>(first + i);
      float f;
      std::memcpy(&f, &bits, sizeof(f));
      const uint8_t want = detail::float_to_fp8<F>(f);
      for (int way = 0; way < kWays; ++way) {
        if (host[way][i] != want && differs[way]++ == 0) first_differing[way] = bits;
      }
    }
  }
  const bool used_hardware = ok && *hardware != 0;
  for (uint8_t* c : codes) cudaFree(c);
  cudaFree(hardware);
  if (!ok) return false;
  bool all_equal = true;
  std::printf("%-9s (conversion: %s) differs from the host at", name,
              used_hardware ? "hardware" : "integer");
  for (int way = 0; way < kWays; ++way) {
    std::printf("%s %s: %llu", way ? "," : "", kWayNames[way],
                static_cast<unsigned long long>(differs[way]));
    if (differs[way]) std::printf(" (first bits 0x%08x)", first_differing[way]);
    all_equal = all_equal && differs[way] == 0;
  }
  std::printf("\n");
  return all_equal;
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
