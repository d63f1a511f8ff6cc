// The norm family's GPU hooks (see norm_sweep.h), for builds with a GPU backend.
//
// The sweep bypasses the public API on purpose: it builds the detail::NormProblem that the public
// entry would build for the same tensors (their row strides: N, or N + the pad of --row-pad; the
// fp8 codes a contiguous view) and launches it through
// gpu::run_norm_gpu_with with an explicit NormConfig and PDL setting, so each alternative differs
// from the library's own choice in exactly one launch decision.
#include <algorithm>
#include <cstddef>

#include "gpu/norm/norm_config.h"
#include "gpu/norm/norm_gpu.h"
#include "norm/norm_problem.h"
#include "norm_sweep.h"

namespace fusekit::bench {
namespace {

using detail::NormKind;
using detail::NormProblem;
using gpu::NormConfig;

bool is_layer(NormOp op) {
  return op == NormOp::kLayer || op == NormOp::kAddLayer || op == NormOp::kAddLayerOop ||
         op == NormOp::kAddLayerF32Residual;
}
bool f32_residual(NormOp op) {
  return op == NormOp::kAddRmsF32Residual || op == NormOp::kAddLayerF32Residual;
}
bool adds(NormOp op) {
  return op == NormOp::kAddRms || op == NormOp::kAddRmsOop || op == NormOp::kAddLayer ||
         op == NormOp::kAddLayerOop || op == NormOp::kAddRmsFp8 ||
         op == NormOp::kAddRmsFp8Static || f32_residual(op);
}

bool is_fp8(NormOp op) {
  return op == NormOp::kRmsFp8 || op == NormOp::kRmsFp8Static || op == NormOp::kAddRmsFp8 ||
         op == NormOp::kAddRmsFp8Static;
}
bool dynamic_fp8(NormOp op) { return op == NormOp::kRmsFp8 || op == NormOp::kAddRmsFp8; }

// As ops.cc's call_norm passes them: the fp8 forms write codes (a.fp8_format) into out's storage
// and their scales into (or read the static one from) the scale slot; their fused add updates
// the residual in place.
NormProblem problem_of(const OpSpec& spec, const OpArgs& a) {
  const NormOp op = static_cast<NormOp>(spec.variant);
  const bool in_place = op == NormOp::kAddRms || op == NormOp::kAddLayer || f32_residual(op);
  const bool fp8 = is_fp8(op);
  NormProblem p;
  p.kind = is_layer(op) ? NormKind::kLayer : NormKind::kRms;
  p.add_residual = adds(op);
  p.rows = a.m;
  p.cols = a.n;
  p.x_dtype = p.weight_dtype = p.residual_dtype = a.dtype;
  // The row strides of the views the op itself was called on (padded with --row-pad), so that
  // the config described and the variants timed are those of the same call.
  const TensorView& x = a.t[kNormX];
  p.x = x.data;
  p.x_stride = x.stride(0);
  if (in_place) {
    p.out = x.data;
    p.out_stride = x.stride(0);
  } else {
    p.out = a.t[kNormOut].data;
    p.out_stride = fp8 ? a.n : a.t[kNormOut].stride(0);  // call_norm's fp8 view is contiguous
  }
  if (f32_residual(op)) {  // call_norm's contiguous float32 view of the slot
    p.residual_dtype = DType::kFloat32;
    p.residual = p.residual_out = a.t[kNormResidualF32].data;
    p.residual_stride = p.residual_out_stride = a.n;
  } else if (p.add_residual) {
    const TensorView& res = a.t[kNormResidual];
    const TensorView& res_out = in_place || fp8 ? res : a.t[kNormResidualOut];
    p.residual = res.data;
    p.residual_stride = res.stride(0);
    p.residual_out = res_out.data;
    p.residual_out_stride = res_out.stride(0);
  }
  if (fp8) {
    p.out_fp8 = true;
    p.out_fp8_format = a.fp8_format;
    float* scales = static_cast<float*>(a.t[kNormScale].data);
    if (dynamic_fp8(op)) {
      p.dynamic_scale = scales;
    } else {
      p.static_scale = scales;
    }
  }
  p.weight = a.t[kNormWeight].data;
  p.bias = is_layer(op) ? a.t[kNormBias].data : nullptr;
  p.eps = is_layer(op) ? kLayerEps : kRmsEps;
  p.device = a.t[kNormX].device;
  return p;
}

}  // namespace

Status norm_describe(const OpSpec& op, const OpArgs& args, const GpuFacts&, std::string* text) {
  NormConfig c;
  int load = 0;
  const Status s = gpu::describe_norm_config(problem_of(op, args), &c, &load);
  if (!s.ok()) return s;
  // vec: elements per access, or "any" where the alignment is found at run time (vec_io.cuh).
  *text = c.to_string() + " vec=" + (load == 1 ? std::string("any") : std::to_string(load));
  return Status();
}

Status norm_sweep(const OpSpec& op, const OpArgs& args, const GpuFacts& g,
                  std::vector<SweepVariant>* variants) {
  const NormProblem p = problem_of(op, args);
  NormConfig heuristic;
  int load = 0;
  const Status s = gpu::describe_norm_config(p, &heuristic, &load);
  if (!s.ok()) return s;
  gpu::NormShape shape;
  const Status shaped = gpu::norm_shape_of(p, &shape);
  if (!shaped.ok()) return shaped;

  std::vector<NormConfig> configs;
  // Registers-path variants take the plain kernels where the heuristic's config does.
  auto add = [&](const NormConfig& config) {
    NormConfig c = config;
    if (c.path == NormConfig::Path::kRegisters) c.plain = heuristic.plain;
    for (const NormConfig& have : configs)
      if (have.to_string() == c.to_string()) return;
    configs.push_back(c);
  };
  add(heuristic);
  // Where the heuristic takes the plain kernels (registers path, or the cluster path's exact
  // rows), its config in the general form too (labelled "general"): what the plain kernels are
  // worth at the same launch.
  const bool general_twin = heuristic.plain && (heuristic.path == NormConfig::Path::kRegisters ||
                                                heuristic.path == NormConfig::Path::kCluster);
  if (general_twin) {
    NormConfig general = heuristic;
    general.plain = false;
    general.packed_row = false;  // the packed rows' kernels are plain ones
    configs.push_back(general);
  }
  NormConfig c;
  // Registers path with 1, 2 and 4 groups per thread, and 3 and 5 where they cover the row
  // exactly (gpu::kNormOddItemCounts), on as many threads as that takes, in blocks of one row (at
  // least a warp) and of 128, 256 and 512 threads (several rows each).
  const int64_t groups = (shape.cols + shape.group_elems - 1) / shape.group_elems;
  for (int items : {1, 2, 4, 3, 5}) {
    int64_t threads = 1;
    while (threads * items < groups) threads *= 2;
    if (gpu::make_norm_config(shape, NormConfig::Path::kRegisters, static_cast<int>(threads),
                              items, &c)) {
      add(c);
      for (int block : {0, 128, 256, 512}) {
        NormConfig b = c;
        b.rows_per_block = std::max(1, block / c.threads_per_row);
        if (c.threads_per_row < shape.warp_size) {
          b.rows_per_block = std::max(b.rows_per_block, shape.warp_size / c.threads_per_row);
        }
        b.block_threads = b.threads_per_row * b.rows_per_block;
        if (b.block_threads <= gpu::kNormMaxThreads) add(b);
      }
    }
  }
  // The cluster path too, where the GPU has clusters and the row spans at least two blocks: at
  // small batches it spreads a row's traffic over several SMs (its summation order is its own,
  // which is why the heuristic takes it only by N).
  for (int threads : {64, 128, 256, 512}) {
    for (int items : {1, 2, 4}) {
      if (gpu::make_norm_config(shape, NormConfig::Path::kCluster, threads, items, &c) &&
          c.cluster_blocks > 1) {
        add(c);
      }
    }
  }
  for (int threads : {256, 512})
    if (gpu::make_norm_config(shape, NormConfig::Path::kStaged, threads, 0, &c)) add(c);
  // Each registers-path config with the other trigger placement too (the next grid's launch
  // allowed at the kernel's start, or after its writes).
  const std::size_t listed = configs.size();
  for (std::size_t i = 0; i < listed; ++i) {
    if (configs[i].path != NormConfig::Path::kRegisters) continue;
    NormConfig twin = configs[i];
    twin.trigger_after_writes = !twin.trigger_after_writes;
    add(twin);
  }
  // The fused add's exact four-group rows also with the weight loaded at the output
  // (NormConfig::weight_at_output: fewer registers, more blocks per SM), both triggers.
  if (shape.adds_residual && !shape.layer && !shape.fp8_output && shape.whole_groups) {
    const std::size_t with_triggers = configs.size();
    for (std::size_t i = 0; i < with_triggers; ++i) {
      const NormConfig& k = configs[i];
      if (k.path != NormConfig::Path::kRegisters || k.items != gpu::kNormMaxItems ||
          static_cast<int64_t>(k.threads_per_row) * k.items != groups || k.weight_at_output ||
          k.split_blocks != 1) {  // split rows keep the weight beside the row
        continue;
      }
      NormConfig late = k;
      late.weight_at_output = true;
      late.output_parts = 1;  // the held weight is what shared rows need (norm_rows_shareable)
      add(late);
    }
  }
  // And each registers config of exact one-block rows (both trigger placements) with its row's
  // outputs shared by 1, 2 and 4 blocks (NormConfig::output_parts) while the grid fits on the SMs,
  // where the outputs lie apart from the inputs.
  const std::size_t with_twins = configs.size();
  for (std::size_t i = 0; i < with_twins; ++i) {
    if (!gpu::norm_rows_shareable(shape, configs[i])) continue;
    for (int parts = 1; parts <= gpu::kNormMaxOutputParts; parts *= 2) {
      if (shape.rows * parts > shape.sm_count) break;
      NormConfig shared = configs[i];
      shared.output_parts = parts;
      add(shared);
    }
  }
  // And each of those registers configs (one row per block, both triggers) with the row's threads
  // split over 2, 4 and 8 blocks of a cluster (NormConfig::split_blocks), in place too.
  for (std::size_t i = 0; i < with_twins; ++i) {
    for (int blocks = 2; blocks <= gpu::kNormMaxSplitBlocks; blocks *= 2) {
      NormConfig split = configs[i];
      if (gpu::split_norm_rows(shape, blocks, &split)) add(split);
    }
  }
  // Where the call has the plain form but the heuristic takes the general kernels (RMSNorm's forms
  // past twice as many rows as SMs), each one-row-a-block config that the exact kernels of 1, 2
  // or 4 groups take on a fixed thread count, or the one-group kernel (rows of 65-127 groups on
  // 128 threads), in the plain form too (labelled ",plain"): what the plain kernels would be
  // worth there; and where a packed kernel is built for it (gpu::packed_row_built, without the
  // add), packed too (",plain,packed"). Only those configs: elsewhere `plain` is not honoured.
  if (shape.plain_form && shape.fixed_threads_built && shape.whole_groups && !heuristic.plain) {
    const std::size_t before_plain = configs.size();
    for (std::size_t i = 0; i < before_plain; ++i) {
      const NormConfig& k = configs[i];
      const int tpr = k.threads_per_row;
      const bool fixed_threads =
          tpr == 128 || tpr == 256 || tpr == 512 || (shape.layer && tpr == 64);
      const bool plain_built = (static_cast<int64_t>(tpr) * k.items == groups &&
                                (k.items == 1 || k.items == 2 || k.items == gpu::kNormMaxItems)) ||
                               gpu::one_group_last_partial(groups, tpr, k.items);
      if (k.path != NormConfig::Path::kRegisters || k.rows_per_block != 1 ||
          k.block_threads != tpr || !fixed_threads || !plain_built || k.weight_at_output ||
          k.output_parts != 1 || k.split_blocks != 1) {
        continue;
      }
      NormConfig plain = k;
      plain.plain = true;
      NormConfig packed = plain;
      packed.packed_row = true;
      const bool packed_built = !shape.adds_residual && !shape.fp8_output &&
                                static_cast<int64_t>(tpr) * k.items == groups &&
                                gpu::packed_row_built(k.items, tpr);
      for (const NormConfig* twin : {&plain, &packed}) {
        if (twin == &packed && !packed_built) continue;
        bool listed = false;
        for (const NormConfig& have : configs) listed |= have.to_string() == twin->to_string();
        if (!listed) configs.push_back(*twin);
      }
    }
  }

  variants->clear();
  for (std::size_t i = 0; i < configs.size(); ++i) {
    // Each config with and without programmatic dependent launch (where the GPU has it): how the
    // next call's early blocks share the SMs depends on the launch shape.
    const int last_pdl = g.supports_pdl ? 1 : 0;
    for (int pdl = 0; pdl <= last_pdl; ++pdl) {
      const NormConfig config = configs[i];
      SweepVariant v;
      v.label = config.to_string() + " pdl=" + std::to_string(pdl) +
                (general_twin && i == 1 ? " general" : "") + (i == 0 ? " *" : "");
      v.call = [p, config, pdl](Stream stream) {
        gpu::NormLaunchOverrides o;
        o.config = &config;
        o.pdl = pdl;
        return gpu::run_norm_gpu_with(p, stream, o);
      };
      variants->push_back(std::move(v));
    }
  }
  return Status();
}

}  // namespace fusekit::bench
