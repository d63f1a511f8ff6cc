// A minimal, framework-free view of the GPU runtime, enough to allocate, copy and synchronize
// without including CUDA or HIP headers: what fusekit's tests, benchmark and examples use, and
// what a C++ user who has no other GPU code needs to call the ops. Builds without a GPU backend
// report zero devices and return kUnsupported from the rest.
#pragma once

#include <cstddef>
#include <string>

#include "fusekit/status.h"
#include "fusekit/tensor.h"

namespace fusekit {

// "cuda", "hip" or "none": the GPU backend this library was built with.
const char* gpu_backend_name();

// Number of usable GPUs; 0 when none is present or no GPU backend was built. `reason`, when given,
// receives why there are none.
int gpu_count(std::string* reason = nullptr);

std::string gpu_name(int device);

Status gpu_malloc(void** ptr, std::size_t bytes, int device = 0);
Status gpu_free(void* ptr);

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };
Status gpu_memcpy(void* dst, const void* src, std::size_t bytes, CopyKind kind,
                  Stream stream = nullptr);
Status gpu_memset(void* ptr, int byte_value, std::size_t bytes, Stream stream = nullptr);
Status gpu_synchronize(int device = 0);

}  // namespace fusekit
