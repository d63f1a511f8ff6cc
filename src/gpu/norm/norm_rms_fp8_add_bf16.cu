// fused_add_rms_norm's e4m3fn kernels of bf16 x (none where the platform has no hardware
// e4m3fn), apart from the rest of their part (norm_rms_fp8_add.cu) so that the two compile in
// parallel: norm_launch.cuh, FUSEKIT_NORM_BF16_X_PART.
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
FUSEKIT_NORM_BF16_X_PART(NormKind::kRms, true, detail::Fp8E4M3FN);
}  // namespace fusekit::gpu
