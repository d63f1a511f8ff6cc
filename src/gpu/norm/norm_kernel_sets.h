// The norm kernel sets and the translation units that compile them. Each explicit instantiation
// of launch_norm_dtypes (norm_launch.cuh) declared below is compiled by the unit named beside
// it, and nowhere else: the kernel sets are the longest compiles of the build (minutes each),
// and apart they compile in parallel. The units with the residual add hold more kernels (its
// residual dtypes) and come first in CMakeLists.txt's source list, which is the order the build
// starts them in: the longest first, so that both of CI's two cores finish together
// (bench/NOTES.md, "The norm kernel sets in units of their own add flag").
//
// The fp8 output's entry, launch_norm_fp8 (norm_rms_fp8.cu), picks the format's set; the
// e4m3fn sets of the platform that converts to it in hardware (CUDA) compile there.
#pragma once

#include "fusekit/status.h"
#include "gpu/common/fp8_pack.cuh"
#include "gpu/norm/norm_config.h"
#include "gpu/norm/norm_kernel_args.cuh"
#include "gpu/platform.h"
#include "norm/norm_problem.h"

namespace fusekit::gpu {

template <NormKind kKind, bool kAdd, class Fp8>
Status launch_norm_dtypes(const detail::NormProblem& p, const NormKernelArgs& args,
                          const NormConfig& cfg, int load_width, const DeviceInfo& info, bool pdl,
                          StreamHandle stream);

// norm_rms.cu
extern template Status launch_norm_dtypes<NormKind::kRms, false, void>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
// norm_rms_add.cu
extern template Status launch_norm_dtypes<NormKind::kRms, true, void>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
// norm_layer.cu
extern template Status launch_norm_dtypes<NormKind::kLayer, false, void>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
// norm_layer_add.cu
extern template Status launch_norm_dtypes<NormKind::kLayer, true, void>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
// norm_rms_fp8_software.cu
extern template Status launch_norm_dtypes<NormKind::kRms, false, Fp8FormatInArgs>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);
// norm_rms_fp8_software_add.cu
extern template Status launch_norm_dtypes<NormKind::kRms, true, Fp8FormatInArgs>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int, const DeviceInfo&,
    bool, StreamHandle);

// RMSNorm with an fp8 output, either format (norm_rms_fp8.cu).
Status launch_norm_fp8(const detail::NormProblem& p, const NormKernelArgs& args,
                       const NormConfig& cfg, int load_width, const DeviceInfo& info, bool pdl,
                       StreamHandle stream);

}  // namespace fusekit::gpu
