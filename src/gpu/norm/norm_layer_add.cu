// fused_add_layer_norm's kernel set (both forms), every dtype combination.
// See norm_kernel_sets.h.
#include "gpu/norm/norm_kernel_sets.h"
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm_dtypes<NormKind::kLayer, true, void>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
}  // namespace fusekit::gpu
