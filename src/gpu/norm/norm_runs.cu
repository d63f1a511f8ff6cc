// The norm kernels of rows in runs (NormTraits::kRuns): rms_norm and layer_norm on tensors whose
// leading dimensions flatten into two strides, such as per-head q / k norms on a view of a fused
// projection's output. Fewer kernels than the one-stride set (pick_norm_kernel says which), every
// dtype combination, apart from the one-stride kernels so that those keep their code. See
// norm_launch.cuh.
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm_runs<NormKind::kRms>(const detail::NormProblem&,
                                                 const NormKernelArgs&, const NormConfig&, int,
                                                 const DeviceInfo&, bool, StreamHandle);
template Status launch_norm_runs<NormKind::kLayer>(const detail::NormProblem&,
                                                   const NormKernelArgs&, const NormConfig&, int,
                                                   const DeviceInfo&, bool, StreamHandle);
}  // namespace fusekit::gpu
