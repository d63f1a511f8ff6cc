// fused_add_rms_norm's kernel set (both forms), every dtype combination.
// See norm_kernel_sets.h.
#include "gpu/norm/norm_kernel_sets.h"
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm_dtypes<NormKind::kRms, true, void>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
}  // namespace fusekit::gpu
