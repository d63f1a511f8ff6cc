// GPU backend entry for the gated activations: pick the widest aligned access and the launch
// configuration (act_config.h), then hand over to the per-activation launchers.
#include <algorithm>
#include <cstdint>
#include <string>

#include "gpu/act/act_gpu.h"
#include "gpu/act/act_launch.cuh"
#include "gpu/common/access.h"
#include "gpu/platform.h"

namespace fusekit::gpu {

// Compiled in act_silu.cu, act_gelu_tanh.cu and act_gelu.cu.
extern template Status launch_act<Activation::kSilu>(const ActLaunch&);
extern template Status launch_act<Activation::kGeluTanh>(const ActLaunch&);
extern template Status launch_act<Activation::kGelu>(const ActLaunch&);

namespace {

ActShape shape_of(int64_t rows, int64_t cols, DType dtype, const DeviceInfo& info) {
  ActShape shape;
  shape.rows = rows;
  shape.cols = cols;
  shape.group_elems = 16 / static_cast<int>(dtype_size(dtype));
  shape.warp_size = info.warp_size;
  shape.sm_count = info.sm_count;
  shape.max_threads_per_sm = info.max_threads_per_sm;
  shape.max_cluster_blocks = info.max_cluster_blocks;
  shape.max_smem_per_block = info.max_smem_per_block;
  return shape;
}

// The heuristic's view of launch l: the shape and device, and for the forward op whether its
// tensors admit the compact kernel.
ActShape launch_shape(const ActLaunch& l, const DeviceInfo& info) {
  ActShape shape = shape_of(l.args.rows, l.args.cols, l.dtype, info);
  shape.compact_layout =
      l.kind == ActKernelKind::kForward &&
      act_layout_admits_compact(l.args.rows, l.args.cols,
                                l.load == 16 / static_cast<int>(dtype_size(l.dtype)),
                                std::max({l.args.gate_stride, l.args.up_stride, l.args.out_stride}));
  return shape;
}

Status run(ActLaunch& l, Activation act, int device,
           const ActLaunchOverrides& overrides = ActLaunchOverrides{}) {
  DeviceGuard guard(device);
  DeviceInfo info;
  const ErrorCode e = query_device_info(device, &info);
  if (e != kSuccess) return status_from("act_and_mul: querying the device", e);
  const ActShape shape = launch_shape(l, info);
  if (l.kind == ActKernelKind::kQuantFp8) {
    l.quant = overrides.quant != nullptr ? *overrides.quant : choose_act_quant_config(shape);
    l.args.cluster_blocks = l.quant.cluster_blocks;
    l.args.prefetch_rows = l.quant.cluster_blocks > 1 ? 0 : l.quant.prefetch_rows;
    const int threads = l.quant.block_threads;
    if (l.quant.cluster_blocks > 1 && (threads < info.warp_size || threads % info.warp_size != 0 ||
                                       threads > kActQuantClusterMaxThreads)) {
      // The cluster kernel's launch bound and its per-warp maxima: whole warps up to that width.
      return Status::runtime_error("act_and_mul: cluster blocks of " + std::to_string(threads) +
                                   " threads; the kernel takes whole warps up to " +
                                   std::to_string(kActQuantClusterMaxThreads));
    }
  } else {
    if (!act_elementwise_row_fits(shape)) {
      return Status::unsupported("act_and_mul: rows of " + std::to_string(shape.cols) +
                                 " elements are longer than the GPU kernels take");
    }
    l.elementwise = overrides.elementwise != nullptr
                        ? *overrides.elementwise
                        : choose_act_elementwise_config(shape, l.kind == ActKernelKind::kBackward);
    l.args.threads_per_row = static_cast<uint32_t>(l.elementwise.threads_per_row);
    l.args.row_of_slot = detail::FastDivider::of(l.args.threads_per_row);
    l.args.active_threads = static_cast<uint32_t>(l.elementwise.active_threads);
    l.args.rows_per_pass = l.elementwise.rows_per_pass;
    l.args.trigger_after_writes = l.elementwise.trigger_after_writes ? 1 : 0;
    l.compact = l.kind == ActKernelKind::kForward && act_forward_is_compact(l.elementwise, shape);
  }
  l.warp_size = info.warp_size;
  l.device = device;
  l.pdl = info.supports_pdl && pdl_enabled_by_default();
  return detail::dispatch_activation(act, [&](auto act_tag) {
    return launch_act<decltype(act_tag)::value>(l);
  });
}

ActLaunch forward_launch(const detail::ActProblem& p, Stream stream) {
  ActLaunch l;
  l.kind = p.quantize ? ActKernelKind::kQuantFp8 : ActKernelKind::kForward;
  l.dtype = p.dtype;
  l.format = p.format;
  l.stream = static_cast<StreamHandle>(stream);
  ActKernelArgs& a = l.args;
  a.gate = p.gate;
  a.up = p.up;
  a.out = p.out;
  a.scale = p.scale;
  a.gate_stride = p.gate_stride;
  a.up_stride = p.up_stride;
  a.out_stride = p.out_stride;
  a.rows = p.rows;
  a.cols = p.cols;
  a.scale_upper_bound = p.scale_upper_bound;
  if (p.quantize) a.fp8 = detail::fp8_spec(p.format);
  const size_t elem = dtype_size(p.dtype);
  const size_t out_elem = p.quantize ? 1 : elem;
  l.load = widest_load(16 / static_cast<int>(elem), p.rows,
                       {{p.gate, p.gate_stride, elem},
                        {p.up, p.up_stride, elem},
                        {p.out, p.out_stride, out_elem}});
  return l;
}

}  // namespace

Status act_shape_of(const detail::ActProblem& p, ActShape* shape) {
  DeviceInfo info;
  const ErrorCode e = query_device_info(p.device.index, &info);
  if (e != kSuccess) return status_from("act_and_mul: querying the device", e);
  *shape = launch_shape(forward_launch(p, nullptr), info);
  return Status();
}

Status run_act_gpu_with(const detail::ActProblem& p, Stream stream,
                        const ActLaunchOverrides& overrides) {
  ActLaunch l = forward_launch(p, stream);
  return run(l, p.act, p.device.index, overrides);
}

}  // namespace fusekit::gpu

namespace fusekit::detail {

Status run_act_gpu(const ActProblem& p, Stream stream) {
  gpu::ActLaunch l = gpu::forward_launch(p, stream);
  return gpu::run(l, p.act, p.device.index);
}

Status run_act_backward_gpu(const ActBackwardProblem& p, Stream stream) {
  gpu::ActLaunch l;
  l.kind = gpu::ActKernelKind::kBackward;
  l.dtype = p.dtype;
  l.stream = static_cast<gpu::StreamHandle>(stream);
  gpu::ActKernelArgs& a = l.args;
  a.gate = p.gate;
  a.up = p.up;
  a.grad_out = p.grad_out;
  a.out = p.grad_gate;
  a.grad_up = p.grad_up;
  a.gate_stride = p.gate_stride;
  a.up_stride = p.up_stride;
  a.grad_out_stride = p.grad_out_stride;
  a.out_stride = p.grad_gate_stride;
  a.grad_up_stride = p.grad_up_stride;
  a.rows = p.rows;
  a.cols = p.cols;
  const size_t elem = dtype_size(p.dtype);
  l.load = gpu::widest_load(16 / static_cast<int>(elem), p.rows,
                            {{p.gate, p.gate_stride, elem},
                             {p.up, p.up_stride, elem},
                             {p.grad_out, p.grad_out_stride, elem},
                             {p.grad_gate, p.grad_gate_stride, elem},
                             {p.grad_up, p.grad_up_stride, elem}});
  return gpu::run(l, p.act, p.device.index);
}

}  // namespace fusekit::detail
