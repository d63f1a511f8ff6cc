// Internal entry to the GPU norm backend with explicit launch choices, for the benchmark's sweep
// and for tests that cover both kernel paths. Library calls go through run_norm_gpu.
#pragma once

#include "gpu/norm/norm_config.h"
#include "norm/norm_problem.h"

namespace fusekit::gpu {

struct NormLaunchOverrides {
  const NormConfig* config = nullptr;  // null: the heuristic's choice
  int pdl = -1;                        // -1: default; 0 off; 1 on where supported
};

Status run_norm_gpu_with(const detail::NormProblem& p, Stream stream,
                         const NormLaunchOverrides& overrides);

// The heuristic's inputs for `p` on its device.
Status norm_shape_of(const detail::NormProblem& p, NormShape* shape);

// The configuration run_norm_gpu would pick for `p` on its device, and its kernels' kLoad (the
// group, or 1 where each access's width is found at run time: vec_io.cuh).
Status describe_norm_config(const detail::NormProblem& p, NormConfig* config, int* load_width);

}  // namespace fusekit::gpu
