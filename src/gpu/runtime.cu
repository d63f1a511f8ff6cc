// The GPU runtime seen through fusekit/runtime.h, and the cached device properties that launch
// heuristics read (platform.h's DeviceInfo).
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "fusekit/runtime.h"
#include "gpu/common/access.h"
#include "gpu/common/check.h"
#include "gpu/platform.h"

namespace fusekit {
namespace gpu {

#if FUSEKIT_CUDA_COMPILE_CHECK
// The device code was built unoptimized, only to check that it compiles (CMake's
// FUSEKIT_CUDA_COMPILE_CHECK): gpu_count() reports no usable GPU and no kernel is launched.
constexpr bool kDeviceCodeRuns = false;
#else
constexpr bool kDeviceCodeRuns = true;
#endif

ErrorCode query_device_info(int index, DeviceInfo* info) {
  // Every GPU op reads the device's properties first, so this one check keeps them all from
  // launching the unoptimized kernels of a compile-check build.
  if (!kDeviceCodeRuns) return kNoKernelImage;
  constexpr int kMaxDevices = 64;
  static DeviceInfo cache[kMaxDevices];
  static std::atomic<bool> ready[kMaxDevices];
  static std::mutex mutex;
  if (index >= 0 && index < kMaxDevices && ready[index].load(std::memory_order_acquire)) {
    *info = cache[index];
    return kSuccess;
  }
  DeviceInfo d;
  const ErrorCode e = read_device_info(index, &d);
  if (e != kSuccess) return e;
  d.max_cluster_blocks =
      cluster_blocks_limit(std::getenv("FUSEKIT_MAX_CLUSTER_BLOCKS"), d.max_cluster_blocks);
  if (index >= 0 && index < kMaxDevices) {
    std::lock_guard<std::mutex> lock(mutex);
    cache[index] = d;
    ready[index].store(true, std::memory_order_release);
  }
  *info = d;
  return kSuccess;
}

}  // namespace gpu

const char* gpu_backend_name() { return gpu::kBackendName; }

int gpu_count(std::string* reason) {
  if (!gpu::kDeviceCodeRuns) {
    if (reason != nullptr) {
      *reason = "this fusekit build's CUDA code is unoptimized, built only to check that it "
                "compiles (FUSEKIT_CUDA_COMPILE_CHECK=ON; ./run.sh sets it on a machine without a "
                "GPU): build it again where the GPU is, or with CUDA_ARCHS";
    }
    return 0;
  }
  int n = 0;
  const gpu::ErrorCode e = gpu::get_device_count(&n);
  if (e != gpu::kSuccess) {
    (void)gpu::get_last_error();  // clear the sticky error of a failed query
    if (reason != nullptr) *reason = std::string("no usable GPU: ") + gpu::error_string(e);
    return 0;
  }
  if (n == 0 && reason != nullptr) *reason = "no GPU found";
  return n;
}

std::string gpu_name(int device) { return gpu::device_name(device); }

Status gpu_malloc(void** ptr, std::size_t bytes, int device) {
  gpu::DeviceGuard guard(device);
  return gpu::status_from("gpu_malloc", gpu::malloc_device(ptr, bytes));
}

Status gpu_free(void* ptr) { return gpu::status_from("gpu_free", gpu::free_device(ptr)); }

Status gpu_memcpy(void* dst, const void* src, std::size_t bytes, CopyKind kind, Stream stream) {
  const auto dir = kind == CopyKind::kHostToDevice   ? gpu::CopyDirection::kH2D
                   : kind == CopyKind::kDeviceToHost ? gpu::CopyDirection::kD2H
                                                     : gpu::CopyDirection::kD2D;
  const auto s = static_cast<gpu::StreamHandle>(stream);
  const Status issued = gpu::status_from("gpu_memcpy", gpu::memcpy_async(dst, src, bytes, dir, s));
  if (!issued.ok()) return issued;
  return gpu::status_from("gpu_memcpy", gpu::stream_synchronize(s));
}

Status gpu_memset(void* ptr, int byte_value, std::size_t bytes, Stream stream) {
  return gpu::status_from("gpu_memset", gpu::memset_async(ptr, byte_value, bytes,
                                                        static_cast<gpu::StreamHandle>(stream)));
}

Status gpu_synchronize(int device) {
  gpu::DeviceGuard guard(device);
  return gpu::status_from("gpu_synchronize", gpu::device_synchronize());
}

}  // namespace fusekit
