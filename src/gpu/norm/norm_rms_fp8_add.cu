// fused_add_rms_norm with e4m3fn codes where the platform converts to them in hardware (CUDA;
// nothing is built elsewhere): norm_rms_fp8.cu's fused-add half, but for bf16 x
// (norm_rms_fp8_add_bf16.cu). See norm_launch.cuh.
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm_dtypes<NormKind::kRms, true, detail::Fp8E4M3FN>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
}  // namespace fusekit::gpu
