// fused_add_rms_norm's kernels of bf16 x, apart from the rest of its part (norm_rms_add.cu) so
// that the two compile in parallel: norm_launch.cuh, FUSEKIT_NORM_BF16_X_PART.
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
FUSEKIT_NORM_BF16_X_PART(NormKind::kRms, true, void);
}  // namespace fusekit::gpu
