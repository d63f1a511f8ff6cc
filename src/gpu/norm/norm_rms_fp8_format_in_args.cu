// RMSNorm with an fp8 output, without the fused add, every dtype combination: one kernel set for
// both formats, which it reads from the kernel's arguments (Fp8FormatInArgs,
// gpu/common/fp8_pack.cuh). It serves every format on HIP and e4m3fnuz on CUDA, and compiles
// apart from norm_rms_fp8.cu's e4m3fn kernels (CUDA) and from the fused add's
// (norm_rms_fp8_format_in_args_add.cu), in parallel. See norm_launch.cuh.
#include "gpu/common/fp8_pack.cuh"
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm_dtypes<NormKind::kRms, false, Fp8FormatInArgs>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
}  // namespace fusekit::gpu
