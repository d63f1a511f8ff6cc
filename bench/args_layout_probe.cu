// A measurement probe, not library code: does the layout of a kernel's argument block alone move
// a decode call? Norm v72 put the arguments the library's plain norm kernels read before their
// first load into one 64-byte line of the constant bank; most decode calls gained, the 512-thread
// plain kernels at M = 128-256 lost 1-4% with SASS that differed only in the constant offsets,
// and rms_norm [256, 8192] stayed 0.3 us over a lean kernel of the same path (bench/NOTES.md,
// "Norm v72 measured", "The argument block's layout in a lean kernel").
//
// One lean RMSNorm kernel (one bf16 row a block, the weight beside the row, the library's order
// of the sum folded once in the first warp), three argument blocks:
//   lean    x, out, weight, eps and the trigger flag in 32 bytes; the row's stride a constant
//   before  the library's block before Norm v72 as its plain kernels read it: x at 0, out 8,
//           weight 32, the row strides 128 and 136, eps 176, the trigger flag 216 (224 bytes)
//   after   after it: x 0, out 8, weight 16, strides 24 and 32, eps 40, the flag 44 (216 bytes)
//   lean_stride    the lean block with the strides after the pointers (48 bytes): after's first
//                  line alone, so lean_stride against after is the block's size
//   lean_pinned, after_pinned   lean_stride's and after's blocks with the row's start formed on
//                  its own and held by an opaque move: ptxas then reads the stride by a ULDC and
//                  multiplies on the uniform datapath, where in after (and the library) an LDC
//                  reads it into a register on the way to the first load; against lean_stride
//                  and after, that read
// (Before and after also differ from lean in the stride: lean's is a constant.)
// The two library forms read their stride before the first load, as the library does, and test
// the trigger flag at the start and at the end (PDL's trigger after the writes, the heuristic's
// choice at M = 256). Graph replay of 200 PDL calls, medians; [256, 4096] on 256 threads,
// [256, 8192] and [256, 16384] on 512, the shapes the reorder moved in opposite directions. The
// three forms' outputs are checked equal first.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o args_layout_probe \
//     bench/args_layout_probe.cu
// and with the library's own call beside them (column "fusekit"), linked to a CUDA build:
//   nvcc ... -DPROBE_WITH_FUSEKIT -I include -I BUILD/include bench/args_layout_probe.cu \
//     BUILD/libfusekit.a -lcuda -Xcompiler -fopenmp
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#include "probe_common.h"

struct LeanArgs {
  static constexpr const char* kName = "lean";
  static constexpr bool kStrideInArgs = false;
  static constexpr bool kPinnedRowStart = false;
  const uint4* x;
  uint4* out;
  const uint4* w;
  float eps;
  int trigger_after_writes;
};
struct LeanStrideArgs {
  static constexpr const char* kName = "lean_stride";
  static constexpr bool kStrideInArgs = true;
  static constexpr bool kPinnedRowStart = false;
  const uint4* x;
  uint4* out;
  const uint4* w;
  int64_t x_stride;
  int64_t out_stride;
  float eps;
  int trigger_after_writes;
};
struct LeanPinnedArgs : LeanStrideArgs {
  static constexpr const char* kName = "lean_pinned";
  static constexpr bool kPinnedRowStart = true;
};
struct LibraryArgsBefore {
  static constexpr const char* kName = "before";
  static constexpr bool kStrideInArgs = true;
  static constexpr bool kPinnedRowStart = false;
  const uint4* x;
  uint4* out;
  char pad0[16];
  const uint4* w;
  char pad1[88];
  int64_t x_stride;  // in 16-byte groups here
  int64_t out_stride;
  char pad2[32];
  float eps;
  char pad3[36];
  int trigger_after_writes;
  char pad4[4];
};
struct LibraryArgsAfter {
  static constexpr const char* kName = "after";
  static constexpr bool kStrideInArgs = true;
  static constexpr bool kPinnedRowStart = false;
  const uint4* x;
  uint4* out;
  const uint4* w;
  int64_t x_stride;
  int64_t out_stride;
  float eps;
  uint8_t trigger_after_writes;
  char pad[171];
};
struct LibraryPinnedArgs : LibraryArgsAfter {
  static constexpr const char* kName = "after_pinned";
  static constexpr bool kPinnedRowStart = true;
};
static_assert(sizeof(LeanArgs) == 32 && sizeof(LeanStrideArgs) == 48 &&
                  sizeof(LibraryArgsBefore) == 224 && sizeof(LibraryArgsAfter) == 216,
              "the blocks' sizes: the lean kernel's, the library's before and after");

template <int kThreads, int kItems, class Args>
__global__ void __launch_bounds__(kThreads) args_probe(Args a) {
  constexpr int kRowGroups = kThreads * kItems;
  constexpr float kInvN = 1.0f / (kRowGroups * 8);
  int64_t x_stride = kRowGroups, out_stride = kRowGroups;
  if constexpr (Args::kStrideInArgs) x_stride = a.x_stride, out_stride = a.out_stride;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (!a.trigger_after_writes) asm volatile("griddepcontrol.launch_dependents;");
  // The row's start: as the library forms it (row * stride + the thread's group in one IMAD.WIDE,
  // whose stride operand an LDC reads into a register after the wait), or kPinnedRowStart: the
  // row's offset formed on its own, held by an opaque move, which ptxas then forms from a ULDC
  // and uniform multiplies (no LDC on the way to the first load).
  auto row_start = [](auto* base, int64_t stride) {
    auto* row = base + static_cast<int64_t>(blockIdx.x) * stride;
    if constexpr (Args::kPinnedRowStart) {
      asm volatile("mov.b64 %0, %0;" : "+l"(row));
      __builtin_assume(__isGlobal(row));  // global loads, not generic ones
    }
    return row;
  };
  const uint4* x = row_start(a.x, x_stride);
  uint4 xv[kItems], wv[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) xv[i] = x[i * kThreads + threadIdx.x];
#pragma unroll
  for (int i = 0; i < kItems; ++i) wv[i] = a.w[i * kThreads + threadIdx.x];
  float f[kItems][8];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    unpack(xv[i], f[i]);
#pragma unroll
    for (int e = 0; e < 8; ++e) ss = fmaf(f[i][e], f[i][e], ss);
  }
  ss = warps_first_sum<kThreads, true>(ss);
  const float rstd = rsqrtf(ss * kInvN + a.eps);
  uint4* out = row_start(a.out, out_stride);
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    float wf[8], y[8];
    unpack(wv[i], wf);
#pragma unroll
    for (int e = 0; e < 8; ++e) y[e] = f[i][e] * rstd * wf[e];
    out[i * kThreads + threadIdx.x] = pack(y);
  }
  if (a.trigger_after_writes) asm volatile("griddepcontrol.launch_dependents;");
}

struct Buffers {
  uint4 *x, *w, *out;
};

template <class Args>
Args args_of(const Buffers& b, int n) {
  Args a = {};
  a.x = b.x;
  a.out = b.out;
  a.w = b.w;
  if constexpr (Args::kStrideInArgs) a.x_stride = a.out_stride = n / 8;
  a.eps = 1e-6f;
  a.trigger_after_writes = 1;
  return a;
}

// Every form, timed and checked in this order.
template <class... Forms>
struct FormList {};
using AllForms = FormList<LeanArgs, LeanStrideArgs, LeanPinnedArgs, LibraryArgsBefore,
                          LibraryArgsAfter, LibraryPinnedArgs>;

template <int kThreads, int kItems, class... Forms>
void shape(int rows, const Buffers& b, cudaStream_t s, FormList<Forms...>) {
  constexpr int n = kThreads * kItems * 8;
  std::printf("rms_norm [%3d, %5d] %3d x %d:", rows, n, kThreads, kItems);
  auto t = [&](auto kernel, const auto& args) {
    return captured_us([&](cudaStream_t st) { launch_pdl(kernel, rows, kThreads, 0, st, args); },
                       s, 200);
  };
  ((std::printf(" %s %.3f", Forms::kName,
                t(args_probe<kThreads, kItems, Forms>, args_of<Forms>(b, n)))),
   ...);
#ifdef PROBE_WITH_FUSEKIT
  const auto library = library_norm_call(b.x, nullptr, b.w, b.out, rows, n);
  std::printf(" fusekit %.3f", library_norm_us(library, s));
#endif
  std::printf(" us\n");
}

// Every form writes the lean form's bits (the same arithmetic; only where the arguments lie and
// how the row's start is formed differ).
template <int kThreads, int kItems, class... Forms>
bool forms_agree(int rows, const Buffers& b, cudaStream_t s, FormList<Forms...>) {
  constexpr int n = kThreads * kItems * 8;
  const size_t bytes = static_cast<size_t>(rows) * n * 2;
  std::vector<char> first(bytes), other(bytes);
  bool same = true;
  int form = 0;
  auto run = [&](auto args) {
    CK(cudaMemsetAsync(b.out, 0xff, bytes, s));  // NaN everywhere: an unwritten row shows
    args_probe<kThreads, kItems><<<rows, kThreads, 0, s>>>(args);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync((form == 0 ? first : other).data(), b.out, bytes, cudaMemcpyDeviceToHost,
                       s));
    CK(cudaStreamSynchronize(s));
    if (form++ > 0) same = same && std::memcmp(first.data(), other.data(), bytes) == 0;
  };
  (run(args_of<Forms>(b, n)), ...);
  return same;
}

int main() {
  constexpr int kRows = 256, kMaxN = 16384;
  const size_t bytes = size_t{kRows} * kMaxN * 2;
  Buffers b;
  CK(cudaMalloc(&b.x, bytes));
  CK(cudaMalloc(&b.w, kMaxN * 2));
  CK(cudaMalloc(&b.out, bytes));
  const std::vector<__nv_bfloat16> h = random_bf16(bytes / 2);
  CK(cudaMemcpy(b.x, h.data(), bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.w, h.data(), kMaxN * 2, cudaMemcpyHostToDevice));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  print_replay_header();
  const bool agree = forms_agree<256, 2>(kRows, b, s, AllForms{}) &&
                     forms_agree<512, 2>(kRows, b, s, AllForms{}) &&
                     forms_agree<512, 4>(kRows, b, s, AllForms{});
  std::printf("the forms' outputs agree: %s\n", agree ? "yes" : "NO");
  if (!agree) return 1;
  for (int round = 0; round < 3; ++round) {
    std::printf("round %d\n", round + 1);
    shape<256, 2>(kRows, b, s, AllForms{});
    shape<512, 2>(kRows, b, s, AllForms{});
    shape<512, 4>(kRows, b, s, AllForms{});
  }
  return 0;
}
