// RMSNorm and fused_add_rms_norm with an e4m3fnuz output, every dtype combination: the other
// half of norm_rms_fp8.cu's kernel set, in its own translation unit so the two compile in
// parallel. See norm_launch.cuh.
#include "core/fp8.h"
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm_dtypes<NormKind::kRms, detail::Fp8E4M3FNUZ>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
}  // namespace fusekit::gpu
