// The GPU entry points of a build without a GPU backend: they report that no GPU is available
// (gpu_count() == 0) and refuse GPU tensors with kUnsupported instead of failing to link.
#include "fusekit/runtime.h"
#include "gpu/norm/norm_gpu.h"
#include "norm/norm_problem.h"

namespace fusekit {
namespace {
Status not_built(const char* what) {
  return Status::unsupported(std::string(what) +
                             ": fusekit was built without a GPU backend (configure with "
                             "FUSEKIT_GPU=CUDA or FUSEKIT_GPU=HIP)");
}
}  // namespace

const char* gpu_backend_name() { return "none"; }

int gpu_count(std::string* reason) {
  if (reason != nullptr) *reason = "fusekit was built without a GPU backend";
  return 0;
}

std::string gpu_name(int) { return "none"; }
Status gpu_malloc(void**, std::size_t, int) { return not_built("gpu_malloc"); }
Status gpu_free(void*) { return not_built("gpu_free"); }
Status gpu_memcpy(void*, const void*, std::size_t, CopyKind, Stream) {
  return not_built("gpu_memcpy");
}
Status gpu_memset(void*, int, std::size_t, Stream) { return not_built("gpu_memset"); }
Status gpu_synchronize(int) { return not_built("gpu_synchronize"); }

namespace detail {
Status run_norm_gpu(const NormProblem&, Stream) { return not_built("norm"); }
}  // namespace detail

namespace gpu {
Status run_norm_gpu_with(const detail::NormProblem&, Stream, const NormLaunchOverrides&) {
  return not_built("norm");
}
Status norm_shape_of(const detail::NormProblem&, NormShape*) { return not_built("norm"); }
Status describe_norm_config(const detail::NormProblem&, NormConfig*, int*) {
  return not_built("norm");
}
}  // namespace gpu

}  // namespace fusekit
