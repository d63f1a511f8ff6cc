// The RMSNorm part of the norm kernel set without the fused add (rms_norm, every dtype
// combination); the fused add's is norm_rms_add.cu. See norm_launch.cuh.
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm<NormKind::kRms, false>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int,
    const DeviceInfo&, bool, StreamHandle);
}  // namespace fusekit::gpu
