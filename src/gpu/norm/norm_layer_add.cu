// The LayerNorm part of the norm kernel set with the fused residual add (fused_add_layer_norm, in
// place or not, every dtype combination but those of bf16 x: norm_layer_add_bf16.cu). See
// norm_launch.cuh.
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm<NormKind::kLayer, true>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int,
    const DeviceInfo&, bool, StreamHandle);
}  // namespace fusekit::gpu
