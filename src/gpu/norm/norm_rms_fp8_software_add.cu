// fused_add_rms_norm_quant_fp8's kernel set for codes converted in software, every dtype
// combination, both formats (norm_rms_fp8_software.cu says how). See norm_kernel_sets.h.
#include "gpu/norm/norm_kernel_sets.h"
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm_dtypes<NormKind::kRms, true, Fp8FormatInArgs>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
}  // namespace fusekit::gpu
