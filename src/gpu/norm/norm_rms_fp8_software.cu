// rms_norm_quant_fp8's kernel set (static or dynamic scale) for codes converted in software,
// every dtype combination: one set for both formats, which it reads from the kernel's arguments
// (Fp8FormatInArgs, gpu/common/fp8_pack.cuh). It serves every format on HIP and e4m3fnuz on
// CUDA. See norm_kernel_sets.h.
#include "gpu/norm/norm_kernel_sets.h"
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm_dtypes<NormKind::kRms, false, Fp8FormatInArgs>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
}  // namespace fusekit::gpu
