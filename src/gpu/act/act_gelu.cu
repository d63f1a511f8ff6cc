// The gelu kernel set of the gated activations (forward, fp8-quantized, backward; every dtype,
// access width and fp8 format). See act_launch.cuh.
#include "gpu/act/act_launch.cuh"

namespace fusekit::gpu {
template Status launch_act<Activation::kGelu>(const ActLaunch&);
}  // namespace fusekit::gpu
