// Per-kernel launch facts asked of the runtime once per kernel and device: the dynamic
// shared-memory limit (48 KB by default on CUDA), raised where a launch needs more, and how many
// blocks of a kernel an SM holds at once. Shared by every op family's launcher.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "gpu/common/check.h"
#include "gpu/platform.h"

namespace fusekit::gpu {

constexpr int kMaxDevicesTracked = 64;  // per-device caches in the launchers

// Raises `kernel`'s dynamic shared-memory limit to at least `smem` bytes on `device`;
// remembers the largest amount allowed so far per kernel and device (one `allowed` array per
// kernel instance), so the runtime is asked once.
template <class Kernel>
ErrorCode raise_smem_limit(Kernel kernel, size_t smem, int device,
                           std::atomic<int> (&allowed)[kMaxDevicesTracked]) {
  std::atomic<int>& current = allowed[device % kMaxDevicesTracked];
  if (static_cast<int>(smem) > current.load()) {
    const ErrorCode e = set_max_dynamic_smem(kernel, static_cast<int>(smem));
    if (e != kSuccess) return e;
    current.store(static_cast<int>(smem));
  }
  return kSuccess;
}

// The same as a Status; `what` names the caller in the error.
template <class Kernel>
Status allow_smem(Kernel kernel, size_t smem, int device,
                  std::atomic<int> (&allowed)[kMaxDevicesTracked], const char* what) {
  return status_from((std::string(what) + ": raising the shared-memory limit").c_str(),
                     raise_smem_limit(kernel, smem, device, allowed));
}

// How many blocks of `block_threads` threads (and `smem` bytes of dynamic shared memory) of
// `kernel` an SM of `device` (the current one) holds at once. The runtime is asked once per
// kernel, block size, shared memory and device; the answer depends on the kernel's registers,
// which only the compiler knows, so a launch rule that needs it asks here rather than assuming.
template <class Kernel>
ErrorCode resident_blocks_per_sm(Kernel kernel, int block_threads, size_t smem, int device,
                                 int* blocks) {
  using Key = std::tuple<const void*, int, size_t, int>;
  static std::mutex mutex;
  static std::map<Key, int> known;
  const Key key{reinterpret_cast<const void*>(kernel), block_threads, smem, device};
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = known.find(key);
  if (found != known.end()) {
    *blocks = found->second;
    return kSuccess;
  }
  const ErrorCode e = max_resident_blocks(kernel, block_threads, smem, blocks);
  if (e == kSuccess) known.emplace(key, *blocks);
  return e;
}

}  // namespace fusekit::gpu
