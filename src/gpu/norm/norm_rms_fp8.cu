// RMSNorm and fused_add_rms_norm with an fp8 output (static or dynamic per-row scale), every
// dtype combination: the entry that picks the kernel set for the format, and the e4m3fn kernels
// of the platform that converts to it in hardware (CUDA; their GPUs before sm_89 convert in
// software). The kernels that read the format from their arguments (every format on HIP,
// e4m3fnuz on CUDA) compile apart, in parallel (norm_rms_fp8_format_in_args.cu). See
// norm_launch.cuh.
#include "core/fp8.h"
#include "gpu/common/fp8_pack.cuh"
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {

extern template Status launch_norm_dtypes<NormKind::kRms, Fp8FormatInArgs>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);

Status launch_norm_fp8(const detail::NormProblem& p, const NormKernelArgs& args,
                       const NormConfig& cfg, int load_width, const DeviceInfo& info, bool pdl,
                       StreamHandle stream) {
  if (p.kind != NormKind::kRms) return Status::runtime_error("norm: fp8 output is RMSNorm only");
  // The kernels are built without it (finish_row_impl, norm_kernel.cuh).
  if (p.weight_after_cast) {
    return Status::runtime_error("norm: fp8 output takes no weight_after_cast");
  }
  return dispatch_codes_format(p.out_fp8_format, [&](auto format_tag) -> Status {
    return launch_norm_dtypes<NormKind::kRms, decltype(format_tag)>(p, args, cfg, load_width,
                                                                     info, pdl, stream);
  });
}

}  // namespace fusekit::gpu
