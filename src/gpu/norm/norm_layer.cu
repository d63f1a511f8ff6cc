// The LayerNorm half of the norm kernel set (layer_norm and fused_add_layer_norm, every dtype
// combination). See norm_launch.cuh.
#include "gpu/norm/norm_launch.cuh"

namespace fusekit::gpu {
template Status launch_norm<NormKind::kLayer>(
    const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int,
    const DeviceInfo&, bool, StreamHandle);
}  // namespace fusekit::gpu
