// GPU backend entry for the normalization family: pick the launch configuration (norm_config.h)
// and the widest aligned access, then hand over to the per-kind launchers.
#include <algorithm>
#include <cstdint>

#include "gpu/common/access.h"
#include "gpu/common/check.h"
#include "gpu/common/dispatch.h"
#include "gpu/norm/norm_gpu.h"
#include "gpu/norm/norm_kernel.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

template <NormKind kKind, bool kAdd>
Status launch_norm(const detail::NormProblem& p, const NormKernelArgs& args, const NormConfig& cfg,
                   int load_width, const DeviceInfo& info, bool pdl, StreamHandle stream);
template <NormKind kKind>
Status launch_norm_runs(const detail::NormProblem& p, const NormKernelArgs& args,
                        const NormConfig& cfg, int load_width, const DeviceInfo& info, bool pdl,
                        StreamHandle stream);
Status launch_norm_fp8(const detail::NormProblem& p, const NormKernelArgs& args,
                       const NormConfig& cfg, int load_width, const DeviceInfo& info, bool pdl,
                       StreamHandle stream);

namespace {

using detail::NormProblem;

int group_elems(const NormProblem& p) { return 16 / static_cast<int>(dtype_size(p.x_dtype)); }

// The widest access (in elements, at most one group) that every row of every tensor allows.
int widest_load(const NormProblem& p) {
  const size_t x_bytes = dtype_size(p.x_dtype);
  const size_t w_bytes = dtype_size(p.weight_dtype);
  const size_t r_bytes = dtype_size(p.residual_dtype);
  const bool add = p.add_residual;
  return gpu::widest_load(group_elems(p), p.rows,
                          {{p.x, p.x_stride, x_bytes, p.x_run_skip},
                           {p.out, p.out_stride, p.out_fp8 ? 1 : x_bytes, p.out_run_skip},
                           {p.weight, 0, w_bytes},
                           {p.bias, 0, w_bytes},
                           {add ? p.residual : nullptr, p.residual_stride, r_bytes},
                           {add ? p.residual_out : nullptr, p.residual_out_stride, r_bytes}});
}

NormShape shape_of(const NormProblem& p, const DeviceInfo& info) {
  NormShape s;
  const int group = group_elems(p);
  s.rows = p.rows;
  s.cols = p.cols;
  s.sm_count = info.sm_count;
  s.group_elems = group_elems(p);
  s.source_elem_bytes = static_cast<int>(dtype_size(p.source_dtype()));
  s.warp_size = info.warp_size;
  s.max_cluster_blocks = info.max_cluster_blocks;
  s.fp8_output = p.out_fp8;
  s.layer = p.kind == detail::NormKind::kLayer;
  s.adds_residual = p.add_residual;
  s.narrow_accesses = widest_load(p) < group;
  s.whole_groups = !s.narrow_accesses && p.cols % group == 0;
  // The API lets out be x and residual_out be residual (in place) and rejects any other overlap.
  s.outputs_apart = p.out != p.x && (!p.add_residual || p.residual_out != p.residual);
  const bool one_dtype = p.weight_dtype == p.x_dtype && p.source_dtype() == p.x_dtype;
  // What NormTraits::kPlainBuilt and plain_norm_call (norm_launch.cuh) decide for the kernel.
  s.plain_form = !p.out_fp8 && one_dtype && dtype_size(p.x_dtype) == 2 &&
                 norm_plain_call(p.weight != nullptr, p.weight_offset, p.weight_after_cast,
                                 p.rstd != nullptr || p.mean != nullptr);
  // What NormTraits::kFixedRowThreads and kSplitRowsBuilt decide.
  const bool hardware_fp8 =
      p.out_fp8_format == Fp8Format::kE4M3FN && platform_has_hardware_e4m3fn();
  s.fixed_threads_built = one_dtype && dtype_size(p.x_dtype) == 2 && (!p.out_fp8 || hardware_fp8);
  s.split_rows_built = platform_has_clusters() && s.fixed_threads_built;
  s.min_blocks_per_sm = norm_min_blocks_per_sm(
      p.add_residual, p.kind == detail::NormKind::kLayer,
      dtype_size(p.weight_dtype) == dtype_size(p.x_dtype), one_dtype, p.x_dtype == DType::kFloat16);
  // The kernels' static shared memory (reduction scratch) comes out of the same budget.
  constexpr int kStaticSmemReserve = 8 * 1024;
  s.max_smem_bytes = info.max_smem_per_block - kStaticSmemReserve;
  return s;
}

}  // namespace

Status norm_shape_of(const NormProblem& p, NormShape* shape) {
  DeviceInfo info;
  const ErrorCode e = query_device_info(p.device.index, &info);
  if (e != kSuccess) return status_from("norm: querying the device", e);
  *shape = shape_of(p, info);
  return Status();
}

Status describe_norm_config(const NormProblem& p, NormConfig* config, int* load_width) {
  DeviceInfo info;
  const ErrorCode e = query_device_info(p.device.index, &info);
  if (e != kSuccess) return status_from("norm: querying the device", e);
  const NormShape shape = shape_of(p, info);
  *config = choose_norm_config(shape);
  if (p.run_rows > 0) *config = norm_config_for_runs(shape, *config);
  *load_width = widest_load(p) == group_elems(p) ? group_elems(p) : 1;  // the kernels' kLoad
  return Status();
}

Status run_norm_gpu_with(const NormProblem& p, Stream stream,
                         const NormLaunchOverrides& overrides) {
  DeviceGuard guard(p.device.index);
  DeviceInfo info;
  const ErrorCode e = query_device_info(p.device.index, &info);
  if (e != kSuccess) return status_from("norm: querying the device", e);

  const NormShape shape = shape_of(p, info);
  const bool runs = p.run_rows > 0;
  NormConfig cfg = overrides.config != nullptr ? *overrides.config : choose_norm_config(shape);
  if (runs) cfg = norm_config_for_runs(shape, cfg);
  const bool pdl = info.supports_pdl &&
                   (overrides.pdl < 0 ? pdl_enabled_by_default() : overrides.pdl == 1);

  NormKernelArgs a{};
  a.x = p.x;
  a.out = p.out;
  a.residual = p.residual;
  a.residual_out = p.residual_out;
  a.weight = p.weight;
  a.bias = p.bias;
  a.rstd = p.rstd;
  a.mean = p.mean;
  a.static_scale = p.static_scale;
  a.dynamic_scale = p.dynamic_scale;
  a.scale_upper_bound = p.scale_upper_bound;
  // The fp8 forms' format spec, or the runs of rows in runs (NormKernelArgs), each within 32
  // bits (validated: common_run_rows).
  if (p.out_fp8) a.fp8 = detail::fp8_spec(p.out_fp8_format);
  if (runs) {
    a.runs = NormRowRuns{};
    a.runs.rows = static_cast<int32_t>(p.run_rows);
    a.runs.x_skip = static_cast<int32_t>(p.x_run_skip);
    a.runs.out_skip = static_cast<int32_t>(p.out_run_skip);
    a.runs.divider = detail::FastDivider::of(static_cast<uint32_t>(p.run_rows));
  }
  a.x_stride = p.x_stride;
  a.out_stride = p.out_stride;
  a.residual_stride = p.residual_stride;
  a.residual_out_stride = p.residual_out_stride;
  a.rows = p.rows;
  a.cols = p.cols;
  a.eps = p.eps;
  a.weight_offset = p.weight_offset;
  a.weight_after_cast = p.weight_after_cast;
  a.threads_per_row = cfg.threads_per_row;
  a.threads_per_row_log2 = 0;
  while ((1 << a.threads_per_row_log2) < cfg.threads_per_row) ++a.threads_per_row_log2;
  a.items = cfg.items;
  a.rows_per_block = cfg.rows_per_block;
  a.cluster_blocks = cfg.cluster_blocks;
  a.smem_groups = cfg.smem_groups;
  a.trigger_after_writes = cfg.trigger_after_writes ? 1 : 0;
  // Blocks a row: its outputs' parts, or its threads' split (one of the two is 1).
  a.output_parts_log2 = 0;
  while ((1 << a.output_parts_log2) < cfg.output_parts * cfg.split_blocks) ++a.output_parts_log2;
  if (cfg.output_parts > 1 && !shape.outputs_apart) {
    return Status::invalid_argument(
        "norm: output_parts > 1 needs outputs apart from the inputs (not in place)");
  }

  const auto s = static_cast<StreamHandle>(stream);
  const int load = widest_load(p);
  if (p.out_fp8) return launch_norm_fp8(p, a, cfg, load, info, pdl, s);
  if (runs) {
    if (p.add_residual) return Status::runtime_error("norm: rows in runs take no residual");
    return p.kind == NormKind::kRms
               ? launch_norm_runs<NormKind::kRms>(p, a, cfg, load, info, pdl, s)
               : launch_norm_runs<NormKind::kLayer>(p, a, cfg, load, info, pdl, s);
  }
  return dispatch_bool(p.add_residual, [&](auto add_tag) -> Status {
    constexpr bool kAdd = decltype(add_tag)::value;
    return p.kind == NormKind::kRms
               ? launch_norm<NormKind::kRms, kAdd>(p, a, cfg, load, info, pdl, s)
               : launch_norm<NormKind::kLayer, kAdd>(p, a, cfg, load, info, pdl, s);
  });
}

}  // namespace fusekit::gpu

namespace fusekit::detail {

Status run_norm_gpu(const NormProblem& p, Stream stream) {
  return gpu::run_norm_gpu_with(p, stream, gpu::NormLaunchOverrides{});
}

}  // namespace fusekit::detail
