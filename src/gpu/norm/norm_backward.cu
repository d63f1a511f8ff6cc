// GPU launcher of the normalization backward passes: choose the launch shape from N (never from M,
// except the partial split, which norm_backward_partials fixes), the widest access every pointer
// and stride allows, then dispatch dtypes, access width and warp size to the kernels of
// norm_backward_kernel.cuh. Launches go to the caller's stream; nothing is allocated or awaited.
#include <algorithm>
#include <cstdint>

#include "gpu/common/access.h"
#include "gpu/common/check.h"
#include "gpu/common/dispatch.h"
#include "gpu/common/launch_math.h"
#include "gpu/norm/norm_backward_kernel.cuh"
#include "gpu/platform.h"
#include "norm/norm_backward_problem.h"

namespace fusekit::gpu {
namespace {

using detail::NormBackwardProblem;

// Blocks hold at least this many threads (several short rows at once when N is small).
constexpr int kMinBlock = 128;
// Static shared memory of the rows kernel (its two reduction buffers), out of the block's budget.
constexpr int kStaticSmem = 2 * kBackwardMaxBlock * static_cast<int>(sizeof(float));
// Shared memory (static + dynamic) above this needs the kernel's limit raised first (CUDA's
// default).
constexpr int kDefaultDynamicSmem = 48 * 1024;

struct BackwardLaunch {
  int threads_per_row = 1;
  int slots = 1;
  int block = kMinBlock;  // whole warps
  bool sums_in_smem = false;
  size_t smem = 0;  // dynamic shared memory, bytes
};

int group_elems(const NormBackwardProblem& p) {
  return 16 / static_cast<int>(dtype_size(p.grad_out_dtype));
}

BackwardLaunch choose_launch(const NormBackwardProblem& p, const DeviceInfo& info) {
  BackwardLaunch l;
  const int64_t groups = (p.cols + group_elems(p) - 1) / group_elems(p);
  // About two groups per thread: enough independent loads per thread, few idle threads.
  l.threads_per_row =
      static_cast<int>(std::min<int64_t>(kBackwardMaxBlock, next_pow2((groups + 1) / 2)));
  l.block = std::max({l.threads_per_row, kMinBlock, info.warp_size});
  l.slots = l.block / l.threads_per_row;
  if (p.param_grads()) {
    // As many slots as have room for their sums in shared memory; with none, one row at a time,
    // summed straight into the block's workspace row.
    const int64_t budget = static_cast<int64_t>(info.max_smem_per_block) - kStaticSmem;
    const int64_t row_bytes = p.workspace_row() * static_cast<int64_t>(sizeof(float));
    const int64_t fit = budget / row_bytes;
    l.sums_in_smem = fit >= 1;
    l.slots = static_cast<int>(std::min<int64_t>(l.slots, std::max<int64_t>(fit, 1)));
    l.smem = l.sums_in_smem ? static_cast<size_t>(l.slots * row_bytes) : 0;
  }
  // Whole warps (threads past slots * threads_per_row idle through the row sums).
  const int used = l.slots * l.threads_per_row;
  l.block = (used + info.warp_size - 1) / info.warp_size * info.warp_size;
  return l;
}

// kGroup when every tensor's base and row stride allow whole-group accesses, else 1.
int widest_load(const NormBackwardProblem& p) {
  const int group = group_elems(p);
  const size_t x_bytes = dtype_size(p.x_dtype);
  const int load = gpu::widest_load(group, p.rows,
                                    {{p.grad_out, p.grad_out_stride, dtype_size(p.grad_out_dtype)},
                                     {p.x, p.x_stride, x_bytes},
                                     {p.grad_extra, p.grad_extra_stride, x_bytes},
                                     {p.grad_x, p.grad_x_stride, x_bytes},
                                     {p.weight, 0, dtype_size(p.weight_dtype)}});
  return load == group ? group : 1;
}

template <typename TG, typename TH, typename TW, int kGroup, int kLoad, int kWarp>
Status launch_rows(const NormBackwardArgs& a, const BackwardLaunch& l, StreamHandle stream) {
  auto kernel = norm_backward_rows_kernel<TG, TH, TW, kGroup, kLoad, kWarp>;
  // The default limit covers static and dynamic shared memory together.
  if (l.smem + kStaticSmem > static_cast<size_t>(kDefaultDynamicSmem)) {
    const ErrorCode e = set_max_dynamic_smem(kernel, static_cast<int>(l.smem));
    if (e != kSuccess) return status_from("norm backward: raising the shared-memory limit", e);
  }
  return status_from("norm backward: launching the rows kernel",
                     launch(kernel, dim3(static_cast<unsigned>(a.partials)),
                            dim3(static_cast<unsigned>(l.block)), l.smem, stream, false, a));
}

template <typename TP>
Status launch_param_sums(const NormBackwardProblem& p, int64_t at, void* out,
                         StreamHandle stream) {
  const int64_t blocks = (p.cols + kParamColumns - 1) / kParamColumns;
  return status_from(
      "norm backward: launching the parameter-sum kernel",
      launch(norm_backward_param_kernel<TP>, dim3(static_cast<unsigned>(blocks)),
             dim3(kParamColumns * kParamLanes), 0, stream, false, p.workspace, p.partials,
             p.workspace_row(), at, p.cols, static_cast<TP*>(out)));
}

}  // namespace

Status run_norm_backward(const NormBackwardProblem& p, Stream stream) {
  DeviceGuard guard(p.device.index);
  DeviceInfo info;
  const ErrorCode e = query_device_info(p.device.index, &info);
  if (e != kSuccess) return status_from("norm backward: querying the device", e);
  const auto s = static_cast<StreamHandle>(stream);

  if (p.rows > 0) {
    const BackwardLaunch l = choose_launch(p, info);
    NormBackwardArgs a{};
    a.grad_out = p.grad_out;
    a.x = p.x;
    a.grad_extra = p.grad_extra;
    a.grad_x = p.grad_x;
    a.rstd = p.rstd;
    a.mean = p.mean;
    a.weight = p.weight;
    a.workspace = p.workspace;
    a.grad_out_stride = p.grad_out_stride;
    a.x_stride = p.x_stride;
    a.grad_extra_stride = p.grad_extra_stride;
    a.grad_x_stride = p.grad_x_stride;
    a.rows = p.rows;
    a.cols = p.cols;
    a.partials = p.partials;
    a.ws_row = p.workspace_row();
    a.weight_sum_at = p.grad_weight != nullptr ? p.weight_offset_in_row() : -1;
    a.bias_sum_at = p.grad_bias != nullptr ? p.bias_offset_in_row() : -1;
    a.weight_offset = p.weight_offset;
    a.threads_per_row = l.threads_per_row;
    a.slots = l.slots;
    a.layer = p.kind == detail::NormKind::kLayer;
    a.sums_in_smem = l.sums_in_smem;
    const int load = widest_load(p);
    const Status launched = dispatch_float_dtype(p.grad_out_dtype, [&](auto g_tag) {
      using TG = typename decltype(g_tag)::type;
      constexpr int kGroup = 16 / static_cast<int>(sizeof(TG));
      return dispatch_x_or_float<TG>(p.x_dtype, [&](auto h_tag) {
        using TH = typename decltype(h_tag)::type;
        return dispatch_x_or_float<TG>(p.weight_dtype, [&](auto w_tag) {
          using TW = typename decltype(w_tag)::type;
          return dispatch_int<kGroup, 1>(load, [&](auto load_c) {
            return dispatch_warp(info.warp_size, [&](auto warp_c) {
              return launch_rows<TG, TH, TW, kGroup, decltype(load_c)::value,
                                 decltype(warp_c)::value>(a, l, s);
            });
          });
        });
      });
    });
    if (!launched.ok()) return launched;
  }

  void* outs[2] = {p.grad_weight, p.grad_bias};
  const int64_t offsets[2] = {p.weight_offset_in_row(), p.bias_offset_in_row()};
  for (int i = 0; i < 2; ++i) {
    if (outs[i] == nullptr) continue;
    const Status launched = dispatch_float_dtype(p.param_grad_dtype, [&](auto p_tag) {
      return launch_param_sums<typename decltype(p_tag)::type>(p, offsets[i], outs[i], s);
    });
    if (!launched.ok()) return launched;
  }
  return Status();
}

}  // namespace fusekit::gpu

namespace fusekit::detail {

Status run_norm_backward_gpu(const NormBackwardProblem& p, Stream stream) {
  return gpu::run_norm_backward(p, stream);
}

}  // namespace fusekit::detail
