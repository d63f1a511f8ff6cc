// Turning a GPU runtime error code into a fusekit Status.
#pragma once

#include <string>

#include "fusekit/status.h"
#include "gpu/platform.h"

namespace fusekit::gpu {

inline Status status_from(const char* what, ErrorCode e) {
  if (e == kSuccess) return Status();
  return Status::runtime_error(std::string(what) + ": " + error_string(e));
}

}  // namespace fusekit::gpu
