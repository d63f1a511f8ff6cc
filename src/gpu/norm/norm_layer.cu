// The LayerNorm part of the norm kernel set without the fused add (layer_norm, every dtype
// combination but those of bf16 x: norm_layer_bf16.cu); the fused add's is norm_layer_add.cu.
// See norm_launch.cuh.
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm<NormKind::kLayer, false>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int,
    const DeviceInfo&, bool, StreamHandle);
}  // namespace fusekit::gpu
