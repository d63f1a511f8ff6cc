// The GPU entries of the gated activations in a build without a GPU backend: GPU tensors are
// refused with kUnsupported, as nogpu.cc does for the norm family.
#include "act/act_problem.h"

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
