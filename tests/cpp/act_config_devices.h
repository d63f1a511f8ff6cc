// The devices the gated-activation heuristic's tests take (test_act_config.cc for the plain op's
// and the backward pass's launches, test_act_quant_config.cc for the quantizing ones): the facts
// a launch depends on, so that no GPU is needed.
#pragma once

#include <cstdint>

#include "gpu/act/act_config.h"

namespace fusekit::gpu::act_test {

constexpr int64_t kMaxGridX = 2147483647;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A few devices: H100 (132 SMs), A100 (108), MI300X (304 CUs, 64-wide wavefronts), RDNA (40
// CUs of 32-wide waves, 1024 threads each).
inline ActShape device_shape(int which) {
  ActShape s;
  switch (which) {
    case 0: s.sm_count = 132; s.max_cluster_blocks = 16; s.max_smem_per_block = 232448; break;
    case 1: s.sm_count = 108; s.max_smem_per_block = 166912; break;
    case 2: s.sm_count = 304; s.warp_size = 64; s.max_smem_per_block = 65536; break;
    default: s.sm_count = 40; s.max_threads_per_sm = 1024; s.max_smem_per_block = 65536; break;
  }
  return s;
}

}  // namespace fusekit::gpu::act_test
