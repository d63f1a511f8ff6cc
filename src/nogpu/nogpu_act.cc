// The GPU entries of the gated activations in a build without a GPU backend: GPU tensors are
// refused with kUnsupported, as nogpu.cc does for the norm family, and so is the internal entry
// with an explicit launch configuration.
#include "act/act_problem.h"
#include "gpu/act/act_gpu.h"

namespace fusekit::detail {
namespace {
Status not_built(const char* op) {
  return Status::unsupported(std::string(op) +
                             ": fusekit was built without a GPU backend (configure with "
                             "FUSEKIT_GPU=CUDA or FUSEKIT_GPU=HIP)");
}
}  // namespace

Status run_act_gpu(const ActProblem&, Stream) { return not_built("act_and_mul"); }
Status run_act_backward_gpu(const ActBackwardProblem&, Stream) {
  return not_built("act_and_mul_backward");
}

}  // namespace fusekit::detail

namespace fusekit::gpu {

Status run_act_gpu_with(const detail::ActProblem&, Stream, const ActLaunchOverrides&) {
  return detail::not_built("act_and_mul");
}
Status act_shape_of(const detail::ActProblem&, ActShape*) {
  return detail::not_built("act_and_mul");
}

}  // namespace fusekit::gpu
