// The RMSNorm half of the norm kernel set (rms_norm and fused_add_rms_norm, every dtype
// combination). See norm_launch.cuh.
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm<NormKind::kRms>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int,
    const DeviceInfo&, bool, StreamHandle);
}  // namespace fusekit::gpu
