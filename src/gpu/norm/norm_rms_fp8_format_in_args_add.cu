// fused_add_rms_norm with an fp8 output, every dtype combination but those of bf16 x
// (norm_rms_fp8_format_in_args_add_bf16.cu), the format read from the kernel's arguments
// (Fp8FormatInArgs): norm_rms_fp8_format_in_args.cu's fused-add half. See norm_launch.cuh.
#include "gpu/common/fp8_pack.cuh"
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm_dtypes<NormKind::kRms, true, Fp8FormatInArgs>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
}  // namespace fusekit::gpu
