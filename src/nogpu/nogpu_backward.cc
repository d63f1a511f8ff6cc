// The GPU entry of the normalization backward passes in a build without a GPU backend: GPU
// tensors are refused with kUnsupported, as nogpu.cc does for the forward ops.
#include "norm/norm_backward_problem.h"

namespace fusekit::detail {

Status run_norm_backward_gpu(const NormBackwardProblem&, Stream) {
  return Status::unsupported(
      "norm backward: fusekit was built without a GPU backend (configure with FUSEKIT_GPU=CUDA or "
      "FUSEKIT_GPU=HIP)");
}

}  // namespace fusekit::detail
