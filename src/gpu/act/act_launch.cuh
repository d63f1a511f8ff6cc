// Host side of the gated-activation kernels: from a launch description to a kernel launch.
//
// launch_act<kAct> is instantiated once per activation in its own translation unit
// (act_silu.cu, act_gelu_tanh.cu, act_gelu.cu) so the three kernel sets compile in parallel. It
// turns the dtype, the access width, the fp8 format (e4m3fn, or the format in the kernel's
// arguments: gpu/common/fp8_pack.cuh), the path and (for the block reduction) the warp size into
// template arguments.
#pragma once

#include <atomic>

#include "act/act_problem.h"
#include "gpu/act/act_config.h"
#include "gpu/act/act_kernel.cuh"
#include "gpu/act/act_quant_kernel.cuh"
#include "gpu/common/check.h"
#include "gpu/common/dispatch.h"
#include "gpu/common/kernel_limits.h"

namespace fusekit::gpu {

enum class ActKernelKind { kForward, kQuantFp8, kBackward };

struct ActLaunch {
  ActKernelKind kind = ActKernelKind::kForward;
  DType dtype = DType::kFloat32;
  Fp8Format format = Fp8Format::kE4M3FN;
  ActKernelArgs args{};
  int load = 1;  // elements per access
  bool compact = false;  // forward: act_forward_compact_kernel (act_forward_is_compact)
  ActElementwiseConfig elementwise;
  ActQuantConfig quant;
  int warp_size = 32;
  int device = 0;
  bool pdl = false;
  StreamHandle stream = nullptr;
};

// The traits of K's narrow-group kernel (kActNarrowGroupBytes per group, accesses no wider).
// A namespace-scope alias: nvcc's host stubs cannot name a kernel argument declared in a function.
template <class K>
using NarrowActTraits = ActTraits<K::kAct, typename K::T, std::min(K::kLoad, K::kGroup / 2),
                                  kActNarrowGroupBytes>;

template <class K>
Status launch_act_kernel(const ActLaunch& l) {
  ErrorCode e = kSuccess;
  if (l.kind == ActKernelKind::kQuantFp8) {
    e = dispatch_codes_format(l.format, [&](auto format_tag) {
      using F = decltype(format_tag);
      return dispatch_warp(l.warp_size, [&](auto warp_tag) {
        constexpr int kWarp = decltype(warp_tag)::value;
        if (l.quant.cluster_blocks > 1) {
          const int blocks = l.quant.cluster_blocks;
          const dim3 grid(static_cast<unsigned>(l.args.rows * blocks));
          const dim3 block(static_cast<unsigned>(l.quant.block_threads));
          return dispatch_int<1, 2, 4>(l.quant.items, [&](auto items_tag) {
            constexpr int kItems = decltype(items_tag)::value;
            return launch_clustered(act_quant_cluster_kernel<K, F, kWarp, kItems>, grid, block, 0,
                                    l.stream, l.pdl, blocks, l.args);
          });
        }
        const dim3 grid(static_cast<unsigned>(l.quant.grid));
        const dim3 block(static_cast<unsigned>(l.quant.block_threads));
        const size_t smem = static_cast<size_t>(l.quant.smem_bytes);
        auto launch_with_staging = [&](auto kernel,
                                       std::atomic<int> (&allowed)[kMaxDevicesTracked]) {
          const ErrorCode raised = raise_smem_limit(kernel, smem, l.device, allowed);
          if (raised != kSuccess) return raised;
          return launch(kernel, grid, block, smem, l.stream, l.pdl, l.args);
        };
        constexpr int kQuantItems = act_quant_items(K::kGroup);
        if (l.quant.items == 0) {
          return launch(act_quant_kernel<K, F, kWarp, 0, kActMaxBlockThreads>, grid, block, 0,
                        l.stream, l.pdl, l.args);
        }
        if (l.quant.block_threads <= kActQuantCompactThreads) {
          static std::atomic<int> allowed[kMaxDevicesTracked];
          return launch_with_staging(
              act_quant_kernel<K, F, kWarp, kQuantItems, kActQuantCompactThreads>, allowed);
        }
        static std::atomic<int> allowed[kMaxDevicesTracked];
        return launch_with_staging(
            act_quant_kernel<K, F, kWarp, kQuantItems, kActMaxBlockThreads>, allowed);
      });
    });
  } else {
    const ActElementwiseConfig& c = l.elementwise;
    const dim3 grid(static_cast<unsigned>(c.grid));
    const dim3 block(static_cast<unsigned>(c.block_threads));
    e = dispatch_bool(l.kind == ActKernelKind::kBackward, [&](auto backward_tag) {
      constexpr bool kBackward = decltype(backward_tag)::value;
      if constexpr (!kBackward && K::kLoad == K::kGroup) {
        if (l.compact) {
          if constexpr (sizeof(typename K::T) == 2) {
            if (c.group_elems == NarrowActTraits<K>::kGroup) {
              return launch(act_forward_compact_kernel<NarrowActTraits<K>>, grid, block, 0,
                            l.stream, l.pdl, l.args);
            }
          }
          return launch(act_forward_compact_kernel<K>, grid, block, 0, l.stream, l.pdl, l.args);
        }
      }
      if constexpr (!kBackward && sizeof(typename K::T) == 2) {
        // Narrow groups (small batches of 16-bit types): half the elements per thread.
        if (c.group_elems == NarrowActTraits<K>::kGroup) {
          return launch(act_elementwise_kernel<NarrowActTraits<K>, 1, false>, grid, block, 0,
                        l.stream, l.pdl, l.args);
        }
      }
      auto kernel = c.unroll == kActElementwiseMaxUnroll
                        ? act_elementwise_kernel<K, kActElementwiseMaxUnroll, kBackward>
                        : act_elementwise_kernel<K, 1, kBackward>;
      return launch(kernel, grid, block, 0, l.stream, l.pdl, l.args);
    });
  }
  return status_from("act_and_mul: kernel launch", e);
}

template <Activation kAct>
Status launch_act(const ActLaunch& l) {
  return dispatch_float_dtype(l.dtype, [&](auto dtype_tag) -> Status {
    using T = typename decltype(dtype_tag)::type;
    auto with_load = [&](auto load_tag) -> Status {
      return launch_act_kernel<ActTraits<kAct, T, decltype(load_tag)::value>>(l);
    };
    return dispatch_load_width<16 / static_cast<int>(sizeof(T))>(l.load, with_load);
  });
}

}  // namespace fusekit::gpu
