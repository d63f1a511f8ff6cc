// RMSNorm and fused_add_rms_norm with an fp8 output (static or dynamic per-row scale): the entry
// that picks the kernel set for the format and the add, and the e4m3fn sets of the platform that
// converts to it in hardware (CUDA; its GPUs before sm_89 convert in software), every dtype
// combination. The sets that convert in software for any format (every format on HIP, e4m3fnuz
// on CUDA) compile apart. See norm_kernel_sets.h.
#include "core/fp8.h"
#include "gpu/common/fp8_pack.cuh"
#include "gpu/norm/norm_kernel_sets.h"
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {

Status launch_norm_fp8(const detail::NormProblem& p, const NormKernelArgs& args,
                       const NormConfig& cfg, int load_width, const DeviceInfo& info, bool pdl,
                       StreamHandle stream) {
  if (p.kind != NormKind::kRms) return Status::runtime_error("norm: fp8 output is RMSNorm only");
  // The kernels are built without it (finish_row_impl, norm_kernel.cuh).
  if (p.weight_after_cast) {
    return Status::runtime_error("norm: fp8 output takes no weight_after_cast");
  }
  return dispatch_codes_format(p.out_fp8_format, [&](auto format_tag) -> Status {
    using F = decltype(format_tag);
    if (p.add_residual) {
      return launch_norm_dtypes<NormKind::kRms, true, F>(p, args, cfg, load_width, info, pdl,
                                                         stream);
    }
    return launch_norm_dtypes<NormKind::kRms, false, F>(p, args, cfg, load_width, info, pdl,
                                                        stream);
  });
}

}  // namespace fusekit::gpu
