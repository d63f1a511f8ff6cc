// The gated-activation family's GPU-only hooks: the configuration the launch heuristic picks for
// the forward op, and the alternatives --sweep times (16- or 8-byte groups per thread, blocks of
// 128 or 256 threads); for the fp8 forms, rows split over a cluster or one block per row.
//
// Like norm_sweep.h, they call the library's internal GPU entry (src/gpu/act/act_gpu.h), so they
// come in act_sweep_gpu.cc and act_sweep_none.cc, picked by CMake.
#pragma once

#include <string>
#include <vector>

#include "ops.h"

namespace fusekit::bench {

// Slots (ops.cc declares them in this order): x [M, 2N] (gate, then up), out [M, N], and spare
// [M, N] whose storage holds the fp8 forms' float32 scales.
enum ActSlot { kActX = 0, kActOut, kActSpare };

Status act_describe(const OpSpec& op, const OpArgs& args, const GpuFacts& gpu, std::string* text);
Status act_sweep(const OpSpec& op, const OpArgs& args, const GpuFacts& gpu,
                 std::vector<SweepVariant>* variants);

// The fp8 (e4m3fn) forms: the configuration the heuristic picks, and the alternatives: each
// cluster split the row allows (1, 2 or 4 groups per thread) and one block per row.
Status act_quant_describe(const OpSpec& op, const OpArgs& args, const GpuFacts& gpu,
                          std::string* text);
Status act_quant_sweep(const OpSpec& op, const OpArgs& args, const GpuFacts& gpu,
                       std::vector<SweepVariant>* variants);

}  // namespace fusekit::bench
