// fused_add_layer_norm's kernels of bf16 x, apart from the rest of its part (norm_layer_add.cu)
// so that the two compile in parallel: norm_launch.cuh, FUSEKIT_NORM_BF16_X_PART.
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
FUSEKIT_NORM_BF16_X_PART(NormKind::kLayer, true, void);
}  // namespace fusekit::gpu
