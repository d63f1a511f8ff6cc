// RMSNorm and fused_add_rms_norm with an fp8 output (static or dynamic per-row scale), every
// dtype combination: the entry that picks the kernel set for the format and the form, and the
// e4m3fn kernels without the fused add of the platform that converts to it in hardware (CUDA;
// their GPUs before sm_89 convert in software), but for bf16 x (norm_rms_fp8_bf16.cu). The fused
// add's e4m3fn kernels (norm_rms_fp8_add.cu) and the kernels that read the format from their
// arguments (every format on HIP, e4m3fnuz on CUDA: norm_rms_fp8_format_in_args.cu and its _add)
// compile apart, in parallel. See norm_launch.cuh.
#include "core/fp8.h"
#include "gpu/common/fp8_pack.cuh"
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {

extern template Status launch_norm_dtypes<NormKind::kRms, true, detail::Fp8E4M3FN>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
extern template Status launch_norm_dtypes<NormKind::kRms, false, Fp8FormatInArgs>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
extern template Status launch_norm_dtypes<NormKind::kRms, true, Fp8FormatInArgs>(
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
    return dispatch_bool(p.add_residual, [&](auto add_tag) -> Status {
      // e4m3fn only where the platform converts to it in hardware (dispatch_codes_format).
      return launch_norm_dtypes<NormKind::kRms, decltype(add_tag)::value, decltype(format_tag)>(
          p, args, cfg, load_width, info, pdl, stream);
    });
  });
}

}  // namespace fusekit::gpu
