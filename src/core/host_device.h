// FUSEKIT_HOST_DEVICE: marks a function that must compile, and give the same results, in host
// code built by a plain C++ compiler (the CPU backend, tests) and in GPU code built by nvcc or
// HIP's clang.
//
// The definitions meant for both sides (the fp8 formats in core/fp8.h, the activation math in
// core/act_math.h) live under src/core/ and include no GPU header, so this test is about which
// kind of compiler is running, not about CUDA versus HIP (that difference stays in
// gpu/platform.h, which includes this header).
#pragma once

#if defined(__CUDACC__) || defined(__HIP__)
#define FUSEKIT_HOST_DEVICE __host__ __device__ inline __attribute__((always_inline))
#else
#define FUSEKIT_HOST_DEVICE inline
#endif
