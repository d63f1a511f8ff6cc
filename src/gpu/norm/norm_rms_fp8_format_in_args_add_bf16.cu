// fused_add_rms_norm's kernels of bf16 x with the fp8 format in their arguments, apart from the
// rest of their part (norm_rms_fp8_format_in_args_add.cu) so that the two compile in parallel:
// norm_launch.cuh, FUSEKIT_NORM_BF16_X_PART.
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
FUSEKIT_NORM_BF16_X_PART(NormKind::kRms, true, Fp8FormatInArgs);
}  // namespace fusekit::gpu
