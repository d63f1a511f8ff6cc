// Internal entry to the GPU gated-activation backend with an explicit launch configuration, for
// the benchmark's sweep. Library calls go through run_act_gpu, which takes the heuristic's choice.
#pragma once

#include "act/act_problem.h"
#include "gpu/act/act_config.h"

namespace fusekit::gpu {

struct ActLaunchOverrides {
  // The forward op's configuration, and the quantized form's; null: the heuristic's choice.
  const ActElementwiseConfig* elementwise = nullptr;
  const ActQuantConfig* quant = nullptr;
};

Status run_act_gpu_with(const detail::ActProblem& p, Stream stream,
                        const ActLaunchOverrides& overrides);

// The heuristic's inputs for `p` on its device.
Status act_shape_of(const detail::ActProblem& p, ActShape* shape);

}  // namespace fusekit::gpu
