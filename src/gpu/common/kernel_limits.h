// Per-kernel launch limits that have to be raised at run time, once per kernel and device: the
// dynamic shared-memory limit (48 KB by default on CUDA). Shared by every op family's launcher.
#pragma once

#include <atomic>
#include <string>

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

}  // namespace fusekit::gpu
