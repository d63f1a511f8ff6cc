// A measurement probe, not library code: at M = 256 (a decode batch; graph replay, the L2 warm)
// how much of an RMSNorm call is its weight's traffic? One row a block on 512 threads loads the
// row's weight once a block, so at [256, 8192] bf16 the SMs read 4 MB of weight from L2 beside
// the 4 MB of x and write 4 MB of output (bench/NOTES.md, "Norm v65"). Lean kernels, the same
// harness for all: a CUDA graph of 200 back-to-back calls with programmatic dependent launch (the
// library's decode timing), medians over replays, bf16 rows of a compile-time length:
//   row      one row a block, the weight loaded beside the row (the library's launch shape)
//   no_w     the same without the weight (what its traffic costs)
//   pair     two rows a thread, the weight loaded once for both (half the weight traffic)
//   copy     the row copied, no reduction, no weight (the bytes' floor)
// and the fused add in place (x + r -> r, norm -> x). The row form also with what else sets the
// library's kernels apart (Variant), in graphs of 1000 calls (the library's benchmark), and held
// to two or three 512-thread blocks an SM (held_rungs). Without --all only the rungs of the
// questions still open print (shape()); --profile launches a few rungs for a profiler
// (profile_shape()). The library's argument block in a lean kernel: bench/args_layout_probe.cu.
// Outside the library's build on purpose; CUDA only:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o weight_share_probe \
//     bench/weight_share_probe.cu
// and with the library's own call beside them (column "fusekit"), linked to a CUDA build:
//   nvcc ... -DPROBE_WITH_FUSEKIT -I include -I BUILD/include bench/weight_share_probe.cu \
//     BUILD/libfusekit.a -lcuda -Xcompiler -fopenmp
#include <cuda_bf16.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "probe_common.h"

enum Form { kRow, kNoWeight, kPair, kCopy };
// What else sets the library's kernels apart from these, one at a time on the row form: a larger
// argument block (the library's is 224 bytes), 5 KB of static shared memory (its scratch and
// mailboxes), the mean square by a division (the library divides by N where this multiplies by
// 1 / N), the next grid triggered at the start rather than after the writes, the library's order
// of the sum (warps first through one float a thread of shared memory, then lanes), every warp
// folding the row's slots (kWarpsFirst) or the first warp alone (kFoldOnce, the library since
// "Norm v66"), the weight's loads held beside the row's (kWeightBeside: issued just before x's,
// in flight with them as in the library's SASS, where ptxas otherwise sinks them past the
// squares), and kLibraryPath: the last three together with the division, the library's path in
// the lean kernel.
enum Variant {
  kBase,
  kBigArgs,
  kSharedPad,
  kDivide,
  kEarlyTrigger,
  kWarpsFirst,
  kFoldOnce,
  kWeightBeside,
  kLibraryPath
};

template <int kPadBytes>
struct ProbeArgs {
  uint4* x;
  uint4* r;
  const uint4* w;
  uint4* out;
  float eps;
  int n;
  char pad[kPadBytes];
};

// Sum over the block's threads (kRows independent values), every thread gets the totals.
template <int kThreads, int kRows>
__device__ __forceinline__ void block_sums(float (&v)[kRows]) {
  constexpr int kWarps = kThreads / 32;
  __shared__ float partial[kRows][kWarps];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v[r] += __shfl_xor_sync(0xffffffffu, v[r], o);
  }
  const int warp = threadIdx.x / 32;
  if ((threadIdx.x & 31) == 0) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) partial[r][warp] = v[r];
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += partial[r][w];
    v[r] = s;
  }
}

// kRows rows a block (kRows = 2: each thread the same columns of two rows). kAdd: the fused add
// in place (x <- norm(x + r) w, r <- x + r).
template <int kThreads, int kItems, Form kForm, bool kAdd, Variant kVariant = kBase,
          int kPadFloats = 1280>
__global__ void __launch_bounds__(kThreads)
    norm_probe(ProbeArgs<kVariant == kBigArgs ? 188 : 4> a) {
  constexpr int kRows = kForm == kPair ? 2 : 1;
  constexpr int kRowGroups = kThreads * kItems;
  constexpr float kInvN = 1.0f / (kRowGroups * 8);
  uint4* x = a.x;
  uint4* r = a.r;
  const uint4* w = a.w;
  uint4* out = a.out;
  const float eps = kVariant == kBigArgs ? a.eps + a.pad[187] : a.eps;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if constexpr (kVariant == kEarlyTrigger) asm volatile("griddepcontrol.launch_dependents;");
  if constexpr (kVariant == kSharedPad) {
    __shared__ float pad[kPadFloats];
    pad[threadIdx.x % kPadFloats] = 0.f;
    if (a.n == 12345) {
      out[0] = uint4{static_cast<unsigned>(pad[(threadIdx.x + 1) % kPadFloats]), 0, 0, 0};
    }
  }
  // kBeside: the weight's loads first, held there by a warp barrier with a memory access after
  // it (the library's issue_memory_accesses_here), so that they are in flight with the row's.
  uint4 wb[kItems];
  if constexpr ((kVariant == kWeightBeside || kVariant == kLibraryPath) && kForm == kRow) {
    __shared__ float pin[32];
#pragma unroll
    for (int i = 0; i < kItems; ++i) wb[i] = w[i * kThreads + threadIdx.x];
    __syncwarp();
    static_cast<volatile float*>(pin)[threadIdx.x & 31] = 0.f;  // kept though never read
  }
  const size_t row0 = static_cast<size_t>(blockIdx.x) * kRows;
  uint4 xv[kRows][kItems];
#pragma unroll
  for (int q = 0; q < kRows; ++q) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      xv[q][i] = x[(row0 + q) * kRowGroups + i * kThreads + threadIdx.x];
    }
  }
  if constexpr (kForm == kCopy) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) out[row0 * kRowGroups + i * kThreads + threadIdx.x] = xv[0][i];
    asm volatile("griddepcontrol.launch_dependents;");
    return;
  }
  uint4 wv[kItems];
  constexpr bool kBeside = kVariant == kWeightBeside || kVariant == kLibraryPath;
  if constexpr (kForm != kNoWeight) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) wv[i] = kBeside ? wb[i] : w[i * kThreads + threadIdx.x];
  }
  float f[kRows][kItems][8];
  float ss[kRows];
#pragma unroll
  for (int q = 0; q < kRows; ++q) {
    ss[q] = 0.f;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      unpack(xv[q][i], f[q][i]);
      if constexpr (kAdd) {
        float g[8];
        const size_t at = (row0 + q) * kRowGroups + i * kThreads + threadIdx.x;
        unpack(r[at], g);
#pragma unroll
        for (int e = 0; e < 8; ++e) f[q][i][e] += g[e];
        const uint4 h = pack(f[q][i]);  // the sum rounded as stored, as the library's h
        r[at] = h;
        unpack(h, f[q][i]);
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) ss[q] = fmaf(f[q][i][e], f[q][i][e], ss[q]);
    }
  }
  if constexpr (kVariant == kWarpsFirst) {
    ss[0] = warps_first_sum<kThreads, false>(ss[0]);
  } else if constexpr (kVariant == kFoldOnce || kVariant == kLibraryPath) {
    ss[0] = warps_first_sum<kThreads, true>(ss[0]);
  } else {
    block_sums<kThreads, kRows>(ss);
  }
  uint4* dst = kAdd ? x : out;
#pragma unroll
  for (int q = 0; q < kRows; ++q) {
    const bool divides = kVariant == kDivide || kVariant == kLibraryPath;
    const float mean_square = divides ? ss[q] / a.n : ss[q] * kInvN;
    const float rstd = rsqrtf(mean_square + eps);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      float wf[8];
      if constexpr (kForm != kNoWeight) {
        unpack(wv[i], wf);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) wf[e] = 1.0f;
      }
      float y[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) y[e] = f[q][i][e] * rstd * wf[e];
      dst[(row0 + q) * kRowGroups + i * kThreads + threadIdx.x] = pack(y);
    }
  }
  if constexpr (kVariant != kEarlyTrigger) asm volatile("griddepcontrol.launch_dependents;");
}

struct Buffers {
  uint4 *x, *r, *w, *out;
};

template <int kPad>
ProbeArgs<kPad> probe_args(const Buffers& b, int n) {
  ProbeArgs<kPad> args = {};
  args.x = b.x;
  args.r = b.r;
  args.w = b.w;
  args.out = b.out;
  args.eps = 1e-6f;
  args.n = n;
  return args;
}

// The same for back-to-back launches of a probe kernel with PDL; rows of n. carveout:
// cudaFuncAttributePreferredSharedMemoryCarveout, -1 the driver's default, else percent of the
// largest shared memory an SM holds; dynamic_smem: bytes of dynamic shared memory a block asks
// for and never touches (what it does is limit how many blocks an SM holds); both set for this
// timing only.
template <int kPad>
float graph_us(void (*kernel)(ProbeArgs<kPad>), int blocks, int threads, int n, const Buffers& b,
               cudaStream_t s, int calls = 200, int carveout = -1, int dynamic_smem = 0) {
  if (carveout >= 0) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carveout));
  }
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic_smem));
  const ProbeArgs<kPad> args = probe_args<kPad>(b, n);
  const float us = captured_us([&](cudaStream_t st) {
    launch_pdl(kernel, blocks, threads, dynamic_smem, st, args);
  }, s, calls);
  if (carveout >= 0) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, -1));
  }
  return us;
}

// The row form at 512 threads held to two or three blocks an SM by dynamic shared memory it
// does not use, the carveout the same for both (72% of 228 KB: 164 KB, so L1 keeps 92 KB):
// whether the blocks an SM can hold beyond those a call places (PDL starts the next call's blocks
// while this call's still run) is what sets the lean kernel (40 registers: three 512-thread
// blocks an SM) apart from the library's (48: two). Prints the blocks an SM holds as launched.
template <int kThreads, int kItems, bool kAdd>
void held_rungs(int rows, const Buffers& b, cudaStream_t s) {
  constexpr int n = kThreads * kItems * 8;
  auto kernel = norm_probe<kThreads, kItems, kRow, kAdd>;
  for (const int kb : {52, 78}) {
    const int dynamic_smem = kb * 1024;
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 72));
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic_smem));
    int held = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&held, kernel, kThreads, dynamic_smem));
    std::printf(" held%d(%dKB) %.3f", held, kb,
                graph_us(kernel, rows, kThreads, n, b, s, 200, 72, dynamic_smem));
  }
}

// The rungs whose questions were answered (bench/NOTES.md, "Norm v65"): printed with --all.
template <int kThreads, int kItems, bool kAdd>
void answered_rungs(int rows, const Buffers& b, cudaStream_t s) {
  constexpr int n = kThreads * kItems * 8;
  auto t = [&](auto kernel, int blocks, int calls = 200, int carveout = -1) {
    return graph_us(kernel, blocks, kThreads, n, b, s, calls, carveout);
  };
  std::printf(" row1000 %.3f", t(norm_probe<kThreads, kItems, kRow, kAdd>, rows, 1000));
  std::printf(" pair %.3f", t(norm_probe<kThreads, kItems, kPair, kAdd>, rows / 2));
  std::printf(" big_args %.3f", t(norm_probe<kThreads, kItems, kRow, kAdd, kBigArgs>, rows));
  std::printf(" smem5k %.3f", t(norm_probe<kThreads, kItems, kRow, kAdd, kSharedPad>, rows));
  std::printf(" smem1k %.3f",
              t(norm_probe<kThreads, kItems, kRow, kAdd, kSharedPad, 256>, rows));
  std::printf(" smem2k %.3f",
              t(norm_probe<kThreads, kItems, kRow, kAdd, kSharedPad, 512>, rows));
  std::printf(" smem4k %.3f",
              t(norm_probe<kThreads, kItems, kRow, kAdd, kSharedPad, 1024>, rows));
  std::printf(" smem5k_c0 %.3f",
              t(norm_probe<kThreads, kItems, kRow, kAdd, kSharedPad>, rows, 200, 0));
  std::printf(" smem5k_c100 %.3f",
              t(norm_probe<kThreads, kItems, kRow, kAdd, kSharedPad>, rows, 200, 100));
  std::printf(" row_c100 %.3f", t(norm_probe<kThreads, kItems, kRow, kAdd>, rows, 200, 100));
  std::printf(" divide %.3f", t(norm_probe<kThreads, kItems, kRow, kAdd, kDivide>, rows));
  std::printf(" early %.3f", t(norm_probe<kThreads, kItems, kRow, kAdd, kEarlyTrigger>, rows));
}

// Every rung, or (all = false) those of the questions still open: the rest were measured
// (bench/NOTES.md, "Norm v65" and "Norm v66") and print with --all.
template <int kThreads, int kItems, bool kAdd>
void shape(int rows, const Buffers& b, cudaStream_t s, bool all) {
  constexpr int n = kThreads * kItems * 8;
  std::printf("%-18s [%3d, %5d] %3d x %d:", kAdd ? "fused_add_rms_norm" : "rms_norm", rows, n,
              kThreads, kItems);
  auto t = [&](auto kernel, int blocks, int calls = 200, int carveout = -1) {
    return graph_us(kernel, blocks, kThreads, n, b, s, calls, carveout);
  };
  std::printf(" row %.3f", t(norm_probe<kThreads, kItems, kRow, kAdd>, rows));
  if (kThreads == 512) held_rungs<kThreads, kItems, kAdd>(rows, b, s);
  std::printf(" no_w %.3f", t(norm_probe<kThreads, kItems, kNoWeight, kAdd>, rows));
  std::printf(" warps_first %.3f",
              t(norm_probe<kThreads, kItems, kRow, kAdd, kWarpsFirst>, rows));
  std::printf(" fold_once %.3f", t(norm_probe<kThreads, kItems, kRow, kAdd, kFoldOnce>, rows));
  std::printf(" w_beside %.3f",
              t(norm_probe<kThreads, kItems, kRow, kAdd, kWeightBeside>, rows));
  std::printf(" library_path %.3f",
              t(norm_probe<kThreads, kItems, kRow, kAdd, kLibraryPath>, rows));
  if (all) answered_rungs<kThreads, kItems, kAdd>(rows, b, s);
  if (!kAdd) std::printf(" copy %.3f", t(norm_probe<kThreads, kItems, kCopy, kAdd>, rows));
#ifdef PROBE_WITH_FUSEKIT
  // The library's call of the same shape in the same harness (its own launch heuristic).
  const auto library = library_norm_call(b.x, kAdd ? b.r : nullptr, b.w, b.out, rows, n);
  std::printf(" fusekit %.3f", library_norm_us(library, s));
#endif
  std::printf(" us\n");
}

// For a profiler (--profile: ncu --profile-from-start off): at [256, 4096] and [256, 8192] the
// lean row, fold_once, library_path and (linked) the library's own kernel, each launched three
// times in turn as a stream of PDL launches, inside cudaProfilerStart / Stop; the profiler then
// times and counts each kernel alone, so kernel time and launch overlap can be told apart.
template <int kThreads, int kItems>
void profile_shape(int rows, const Buffers& b, cudaStream_t s) {
  constexpr int n = kThreads * kItems * 8;
  auto launch = [&](auto kernel) { launch_pdl(kernel, rows, kThreads, 0, s, probe_args<4>(b, n)); };
  for (int i = 0; i < 3; ++i) {
    launch(norm_probe<kThreads, kItems, kRow, false>);
    launch(norm_probe<kThreads, kItems, kRow, false, kFoldOnce>);
    launch(norm_probe<kThreads, kItems, kRow, false, kLibraryPath>);
#ifdef PROBE_WITH_FUSEKIT
    library_norm_call(b.x, nullptr, b.w, b.out, rows, n)(s);
#endif
  }
}

// The pair form gives each row the bits of the row form (the same sums in the same order).
bool pair_matches_row(const Buffers& b, cudaStream_t s) {
  constexpr int kRowsN = 256, kT = 512, kI = 2, kN = kT * kI * 8;
  const size_t bytes = size_t{kRowsN} * kN * 2;
  std::vector<char> a(bytes), c(bytes);
  norm_probe<kT, kI, kRow, false><<<kRowsN, kT, 0, s>>>(probe_args<4>(b, kN));
  CK(cudaMemcpyAsync(a.data(), b.out, bytes, cudaMemcpyDeviceToHost, s));
  CK(cudaMemsetAsync(b.out, 0xff, bytes, s));
  norm_probe<kT, kI, kPair, false><<<kRowsN / 2, kT, 0, s>>>(probe_args<4>(b, kN));
  CK(cudaMemcpyAsync(c.data(), b.out, bytes, cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  return std::memcmp(a.data(), c.data(), bytes) == 0;
}
int main(int argc, char** argv) {
  const bool all = argc > 1 && std::strcmp(argv[1], "--all") == 0;
  const bool profile = argc > 1 && std::strcmp(argv[1], "--profile") == 0;
  const size_t bytes = size_t{1024} * 16384 * 2;
  Buffers b;
  CK(cudaMalloc(&b.x, bytes));
  CK(cudaMalloc(&b.r, bytes));
  CK(cudaMalloc(&b.w, 16384 * 2));
  CK(cudaMalloc(&b.out, bytes));
  const std::vector<__nv_bfloat16> h = random_bf16(bytes / 2);
  CK(cudaMemcpy(b.x, h.data(), bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.r, h.data(), bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.w, h.data(), 16384 * 2, cudaMemcpyHostToDevice));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  print_replay_header();
  if (profile) {
    profile_shape<256, 2>(256, b, s);  // warm-up outside the profiled range
    CK(cudaStreamSynchronize(s));
    CK(cudaProfilerStart());
    profile_shape<256, 2>(256, b, s);
    profile_shape<512, 2>(256, b, s);
    CK(cudaStreamSynchronize(s));
    CK(cudaProfilerStop());
    return 0;
  }
  std::printf("pair form's bits equal the row form's: %s\n", pair_matches_row(b, s) ? "yes" : "NO");
  for (int round = 0; round < 3; ++round) {
    std::printf("round %d\n", round + 1);
    shape<256, 2, false>(256, b, s, all);
    shape<512, 2, false>(256, b, s, all);
    shape<256, 4, false>(64, b, s, all);
    shape<512, 2, true>(256, b, s, all);
  }
  return 0;
}
