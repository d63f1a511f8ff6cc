// RMSNorm and fused_add_rms_norm with an fp8 output (static or dynamic per-row scale), every
// dtype combination: the e4m3fn kernels, and the entry that picks the format. The e4m3fnuz
// kernels compile apart, in parallel (norm_rms_fp8_fnuz.cu): each format is a full kernel set,
// and together they were the longest translation unit of the build. See norm_launch.cuh.
#include "core/fp8.h"
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {

template Status launch_norm_dtypes<NormKind::kRms, detail::Fp8E4M3FN>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
extern template Status launch_norm_dtypes<NormKind::kRms, detail::Fp8E4M3FNUZ>(
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
  return detail::dispatch_fp8_format(p.out_fp8_format, [&](auto format_tag) -> Status {
    return launch_norm_dtypes<NormKind::kRms, decltype(format_tag)>(p, args, cfg, load_width,
                                                                     info, pdl, stream);
  });
}

}  // namespace fusekit::gpu
