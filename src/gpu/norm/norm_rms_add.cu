// The RMSNorm part of the norm kernel set with the fused residual add (fused_add_rms_norm, in
// place or not, every dtype combination but those of bf16 x: norm_rms_add_bf16.cu). See
// norm_launch.cuh.
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm<NormKind::kRms, true>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int,
    const DeviceInfo&, bool, StreamHandle);
}  // namespace fusekit::gpu
