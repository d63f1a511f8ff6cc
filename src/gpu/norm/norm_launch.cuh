// Host side of the norm kernels: from a validated NormProblem and a NormConfig to a launch.
//
// The kernel set is instantiated in parts, each in its own translation unit, so that they compile
// in parallel: launch_norm<kKind, kAdd> for each kind, without and with the fused residual add
// (norm_rms.cu, norm_rms_add.cu, norm_layer.cu, norm_layer_add.cu), both kinds' kernels of rows
// in runs, without the add (launch_norm_runs, norm_runs.cu), and RMSNorm with an fp8
// output (launch_norm_fp8) per kind of fp8 format and the same two forms (norm_rms_fp8.cu and
// norm_rms_fp8_add.cu: e4m3fn; norm_rms_fp8_format_in_args.cu and its _add: the format in the
// arguments). A part is about half of what a kind's unit was, the fused add's the larger (it
// also has the residual's dtypes), and so the fused add's parts leave their kernels of bf16 x to
// a unit each (norm_*_add_bf16.cu): the longest unit bounds a parallel build. They turn the
// runtime dtypes, the load width and the warp size into template arguments, and launch the
// registers, cluster or staged kernel. Rows beyond what one grid can index go in several
// launches.
#pragma once

#include <algorithm>
#include <atomic>
#include <climits>
#include <string>
#include <type_traits>

#include "core/validate.h"
#include "gpu/common/check.h"
#include "gpu/common/dispatch.h"
#include "gpu/common/fp8_pack.cuh"
#include "gpu/common/kernel_limits.h"
#include "gpu/common/launch_math.h"
#include "gpu/norm/norm_config.h"
#include "gpu/norm/norm_cluster_kernel.cuh"
#include "gpu/norm/norm_kernel.cuh"
#include "gpu/norm/norm_registers_kernel.cuh"
#include "gpu/norm/norm_staged_kernel.cuh"

namespace fusekit::gpu {

// What the kernel may assume about how the row lies (RowFit): exact coverage where N is the
// launch's threads x items whole, aligned groups; only each thread's last group tested where the
// registers path's threads hold more than items - 1 groups each and items has that kernel
// (takes_last_partial: whole groups, or narrow accesses at any N; split rows:
// split_rows_last_partial, whole groups only; one block a row of one group a thread:
// one_group_last_partial, in the forms with fixed thread counts); whole groups where N is a
// multiple of the group and accesses are full width; nothing otherwise. The exact cluster kernel
// takes every one of its kMaxItems slots as part of the row, so a cluster launch of fewer groups
// per thread is never exact.
template <class K>
RowFit row_fit_of(const NormKernelArgs& a, const NormConfig& cfg, int cluster_blocks) {
  constexpr bool kNarrow = K::kLoad != K::kGroup;
  const bool whole = !kNarrow && a.cols % K::kGroup == 0;
  const int64_t groups = (a.cols + K::kGroup - 1) / K::kGroup;
  const int64_t slots = static_cast<int64_t>(cluster_blocks) * cfg.threads_per_row * cfg.items;
  const bool exact_kernel =
      cfg.path != NormConfig::Path::kCluster || cfg.items == kNormClusterMaxItems;
  if (whole && groups == slots && exact_kernel) return RowFit::kExact;
  const bool split = cfg.split_blocks > 1;
  const bool one_group_block = K::kFixedRowThreads && whole && cfg.rows_per_block == 1 &&
                               one_group_last_partial(groups, cfg.threads_per_row, cfg.items);
  const bool last_partial =
      cfg.path == NormConfig::Path::kRegisters &&
      (split ? whole && split_rows_last_partial(groups, cfg.threads_per_row, cfg.items)
             : cfg.output_parts == 1 &&
                   (one_group_block ||
                    takes_last_partial(whole, kNarrow, groups, cfg.threads_per_row, cfg.items)));
  if (last_partial) return RowFit::kLastPartial;
  return whole ? RowFit::kWhole : RowFit::kAny;
}

// Whether a call takes the plain form (OutputForm::kPlain) where K has it (norm_plain_call; a
// zero offset comes as -0 from norm_api, which adds nothing in the general form either).
inline bool plain_norm_call(const NormKernelArgs& a) {
  return norm_plain_call(a.weight != nullptr, a.weight_offset, a.weight_after_cast,
                         a.rstd != nullptr || a.mean != nullptr);
}

// `make(std::integral_constant<int, T>{})`, the kernel of a row of T threads fixed at compile
// time, for `threads` = T among 64 (where kWith64), 128, 256 and 512; `general` for other counts.
template <bool kWith64, class Make, class Kernel>
Kernel fixed_row_threads_kernel(int threads, const Make& make, Kernel general) {
  switch (threads) {
    case 64:
      if constexpr (kWith64) return make(std::integral_constant<int, 64>{});
      break;
    case 128:
      return make(std::integral_constant<int, 128>{});
    case 256:
      return make(std::integral_constant<int, 256>{});
    case 512:
      return make(std::integral_constant<int, 512>{});
    default:
      break;
  }
  return general;
}

// The exact registers kernel of kItems groups per thread: with the row's thread count fixed at
// compile time where the block holds one row of 128, 256 or 512 threads (LayerNorm's also of 64,
// its large batches' shape at N = 2048 bf16, where the merges of its moments then unroll with
// their counts known: 1.6% of that call) and K has those kernels, and in the plain form where
// `plain` (plain_norm_call) and K has it (NormTraits::kPlainBuilt).
template <class K, int kItems, bool kWeightAtOutput = false, bool kSharedRows = false>
auto exact_registers_kernel(const NormConfig& cfg, bool plain) {
  const auto general = norm_registers_kernel<K, RowFit::kExact, kItems, kWeightAtOutput,
                                             kSharedRows>;
  if constexpr (K::kFixedRowThreads && !kWeightAtOutput) {
    if (cfg.rows_per_block == 1 && cfg.block_threads == cfg.threads_per_row) {
      auto fixed = [&](auto threads_tag) {
        constexpr int kThreads = decltype(threads_tag)::value;
        if constexpr (K::kPlainBuilt) {
          if (plain) {
            return norm_registers_kernel<K, RowFit::kExact, kItems, false, kSharedRows, kThreads,
                                         true>;
          }
        }
        return norm_registers_kernel<K, RowFit::kExact, kItems, false, kSharedRows, kThreads>;
      };
      return fixed_row_threads_kernel<K::kLayer>(cfg.threads_per_row, fixed, general);
    }
  }
  return general;
}

// The registers kernel of an odd group count (kNormOddItemCounts) or of each thread's last group
// tested (kFit, RowFit::kExact or kLastPartial): LayerNorm alone's also in the plain form with the
// row's thread count fixed, where a block holds one row of 64-512 threads. Exact: its rows of
// 3 x 2^k and 5 x 2^k groups at every batch (N = 1536-12288 bf16, such as 3072, 5120 and 6144).
// Its general kernels' outputs add the weight offset and fill an absent weight and bias group by
// group, about a third of the output loop's instructions (bench/NOTES.md, "Norm v51"), which
// LayerNorm at large batches, near issue-bound, pays in time: the plain ones took 0.92-0.98x the
// time at M >= 2048 on an H200 ("Norm v53"). kLastPartial: three, four or five groups on rows
// that leave some of the last slots idle (N = 3584, 4608 and 7168 bf16; "Norm v57"). The other
// forms, whose plain kernels measured level or slower past the small batches, keep the general
// kernel: fewer kernels to build. Three exact groups on 256 and 512 threads come twice in the
// plain form, the second built for more blocks an SM (NormConfig::packed_row); RMSNorm alone has
// that second one too, its only plain kernel of an odd group count.
template <class K, int kItems, RowFit kFit = RowFit::kExact>
auto layer_plain_registers_kernel(const NormConfig& cfg, bool plain) {
  static_assert(kFit == RowFit::kExact || kFit == RowFit::kLastPartial, "exact or last partial");
  const auto general = norm_registers_kernel<K, kFit, kItems>;
  if constexpr (!K::kAdd && K::kPlainBuilt) {
    if (plain && cfg.rows_per_block == 1 && cfg.block_threads == cfg.threads_per_row) {
      auto fixed_plain = [&](auto threads_tag) {
        constexpr int kThreads = decltype(threads_tag)::value;
        if constexpr (packed_row_built(kItems, kThreads) && kFit == RowFit::kExact) {
          if (cfg.packed_row) {
            return norm_registers_kernel<K, kFit, kItems, false, false, kThreads, true, false,
                                         false, true>;
          }
        }
        if constexpr (K::kLayer) {
          return norm_registers_kernel<K, kFit, kItems, false, false, kThreads, true>;
        } else {
          return general;  // RMSNorm: its packed rows only
        }
      };
      return fixed_row_threads_kernel<true>(cfg.threads_per_row, fixed_plain, general);
    }
  }
  return general;
}

// The registers kernel of kItems groups per thread (kFit: exact, or each thread's last group
// partly past the row) with its row's threads split over a cluster's blocks (NormConfig::
// split_blocks): the row's thread count fixed at 128, 256 or 512, in the plain form where `plain`
// and K has it (launch_norm_kernel checks the rest: split_rows_cover).
template <class K, int kItems, RowFit kFit = RowFit::kExact>
auto split_registers_kernel(const NormConfig& cfg, bool plain) {
  auto fixed = [&](auto threads_tag) {
    constexpr int kThreads = decltype(threads_tag)::value;
    if constexpr (K::kPlainBuilt) {
      if (plain) {
        return norm_registers_kernel<K, kFit, kItems, false, false, kThreads, true, false, true>;
      }
    }
    return norm_registers_kernel<K, kFit, kItems, false, false, kThreads, false, false, true>;
  };
  if constexpr (kItems <= 2 && kFit == RowFit::kLastPartial) {
    return fixed(std::integral_constant<int, kNormSplitShortThreads>{});  // the one built
  } else {
    if (cfg.threads_per_row == 128) return fixed(std::integral_constant<int, 128>{});
    if (cfg.threads_per_row == 256) return fixed(std::integral_constant<int, 256>{});
    return fixed(std::integral_constant<int, 512>{});
  }
}

// One group a thread on a block of kNormSplitShortThreads threads that holds one row, the thread's
// only group tested (rows of 65-127 whole groups: one_group_last_partial), in the plain form where
// `plain` and K has it. Its few registers (31 for the fused add, bf16) let sixteen such blocks
// share an SM, so that a batch of up to sixteen rows an SM is one wave of short chains, each row
// on as many threads as it has groups; the kernels of four groups a thread hold 72 registers.
template <class K>
auto one_group_registers_kernel(bool plain) {
  constexpr int kThreads = kNormSplitShortThreads;
  if constexpr (K::kPlainBuilt) {
    if (plain) {
      return norm_registers_kernel<K, RowFit::kLastPartial, 1, false, false, kThreads, true>;
    }
  }
  return norm_registers_kernel<K, RowFit::kLastPartial, 1, false, false, kThreads>;
}

// Whether a cluster launch of RowFit `fit` takes the plain form of the cluster kernel: rows its
// blocks cover exactly, a plain call (`plain`: the config's and the call's, plain_norm_call), and
// K's plain kernels built (16-bit tensors of one dtype, no fp8 output). The loop over a cluster's
// rows is near issue-bound on an H200, and the plain form's tail is 60-150 instructions a row
// shorter (bench/NOTES.md, "Norm v62").
template <class K>
constexpr bool cluster_takes_plain(RowFit fit, bool plain) {
  return K::kPlainBuilt && fit == RowFit::kExact && plain;
}

// The registers or cluster kernel for a RowFit. The exact registers kernels exist for items 1, 2,
// 4, 3 and 5 (kNormOddItemCounts; what the heuristic takes; five where odd_items_built), those of
// 1, 2 and 4 also with rows shared among blocks (NormConfig::output_parts) and with the row's
// thread count fixed (exact_registers_kernel), those of 3 and 5 so in LayerNorm alone's plain form
// (layer_plain_registers_kernel), and the fused add's four-group one also with its weight at the
// output (NormConfig::weight_at_output; other kernels ignore the flag); the exact cluster kernel
// for its kMaxItems, also in the plain form (cluster_takes_plain). The registers kernels of three
// and four (kMaxItems) groups per thread come for RowFit::kLastPartial too
// (last_partial_items_built), at either access width (K::kLoad), the only fit besides kAny for
// rows of narrower accesses; so do, at full width only, the one of five where odd_items_built
// (five_last_partial), the one of one group per thread on a one-row block of 128 threads in the
// fixed-thread forms (one_group_registers_kernel), and LayerNorm alone's plain ones of three,
// four and five (layer_plain_registers_kernel). LayerNorm's other registers kernels, the narrow
// accesses' four-group one of RowFit::kLastPartial among them, come twice: for rows of a
// power-of-two number of whole groups (`power_of_two_rows`: their moments in one reduction, as
// the exact kernels of one, two and four groups take them) and for the rest. A row's bits so
// follow neither its alignment nor its batch.
//
// The kernels of rows in runs (K::kRuns) are fewer, on a config of the same reduction order
// (norm_config_for_runs): the exact registers kernels of one, two and four groups per thread,
// which cover per-head rows (D = 64, 128, 256 bf16: 8, 16, 32 groups), and those that take any
// row: the registers and cluster kernels of RowFit::kAny (LayerNorm's registers one twice, as
// above) and the staged one (launch_norm_kernel).
template <class K>
auto pick_norm_kernel(RowFit fit, const NormConfig& cfg, bool plain, bool power_of_two_rows) {
  if constexpr (K::kRuns) {
    if (cfg.path == NormConfig::Path::kCluster) return norm_cluster_kernel<K, RowFit::kAny>;
    if constexpr (K::kLoad == K::kGroup) {
      if (fit == RowFit::kExact && cfg.items == 1) {
        return norm_registers_kernel<K, RowFit::kExact, 1>;
      }
      if (fit == RowFit::kExact && cfg.items == 2) {
        return norm_registers_kernel<K, RowFit::kExact, 2>;
      }
      if (fit == RowFit::kExact && cfg.items == 4) {
        return norm_registers_kernel<K, RowFit::kExact, 4>;
      }
    }
    if constexpr (K::kLayer) {
      if (power_of_two_rows) {
        return norm_registers_kernel<K, RowFit::kAny, K::kMaxItems, false, false, 0, false, true>;
      }
    }
    return norm_registers_kernel<K, RowFit::kAny>;
  }
  constexpr bool kFull = K::kLoad == K::kGroup;  // else RowFit::kLastPartial or kAny only
  if (cfg.path == NormConfig::Path::kCluster) {
    static_assert(kNormClusterMaxItems == K::kMaxItems, "cluster kernel: kMaxItems groups");
    if constexpr (kFull) {
      if (fit == RowFit::kExact) {
        if constexpr (K::kPlainBuilt) {
          if (cluster_takes_plain<K>(fit, plain)) {
            return norm_cluster_kernel<K, RowFit::kExact, true>;
          }
        }
        return norm_cluster_kernel<K, RowFit::kExact>;
      }
      if (fit == RowFit::kWhole) return norm_cluster_kernel<K, RowFit::kWhole>;
    }
    return norm_cluster_kernel<K, RowFit::kAny>;
  }
  if constexpr (kFull && K::kSplitRowsBuilt) {
    if (cfg.split_blocks > 1) {
      if (fit == RowFit::kLastPartial) {
        if (cfg.items == 1) return split_registers_kernel<K, 1, RowFit::kLastPartial>(cfg, plain);
        if (cfg.items == 2) return split_registers_kernel<K, 2, RowFit::kLastPartial>(cfg, plain);
        if (cfg.items == 3) return split_registers_kernel<K, 3, RowFit::kLastPartial>(cfg, plain);
        return split_registers_kernel<K, 4, RowFit::kLastPartial>(cfg, plain);
      }
      if (cfg.items == 1) return split_registers_kernel<K, 1>(cfg, plain);
      if (cfg.items == 2) return split_registers_kernel<K, 2>(cfg, plain);
      if (cfg.items == 3) return split_registers_kernel<K, 3>(cfg, plain);
      return split_registers_kernel<K, 4>(cfg, plain);
    }
  }
  if constexpr (kFull && K::kSharedRowsBuilt) {
    // Rows shared among blocks (NormConfig::output_parts): exact rows of one, two or four groups
    // per thread (launch_norm_kernel checks).
    if (cfg.output_parts > 1) {
      if (cfg.items == 1) return exact_registers_kernel<K, 1, false, true>(cfg, plain);
      if (cfg.items == 2) return exact_registers_kernel<K, 2, false, true>(cfg, plain);
      return exact_registers_kernel<K, 4, false, true>(cfg, plain);
    }
  }
  if (fit == RowFit::kLastPartial) {
    static_assert(last_partial_items_built(K::kMaxItems), "one kernel per built count");
    if constexpr (K::kFixedRowThreads && kFull) {
      if (cfg.items == 1) return one_group_registers_kernel<K>(plain);
    }
    if constexpr (kFull) {
      constexpr RowFit kLast = RowFit::kLastPartial;
      if (cfg.items == 3) return layer_plain_registers_kernel<K, 3, kLast>(cfg, plain);
      if constexpr (odd_items_built(K::kLayer, K::kAdd, 5)) {
        if (cfg.items == 5) return layer_plain_registers_kernel<K, 5, kLast>(cfg, plain);
      }
      return layer_plain_registers_kernel<K, K::kMaxItems, kLast>(cfg, plain);
    } else {
      if (cfg.items == 3) return norm_registers_kernel<K, RowFit::kLastPartial, 3>;
      if constexpr (K::kLayer) {
        // Narrow accesses to a row of exactly four groups a thread (2^k groups: N = 16384 bf16
        // on 512 threads), whose aligned launch is exact and takes the moments in one reduction.
        if (power_of_two_rows) {
          return norm_registers_kernel<K, RowFit::kLastPartial, K::kMaxItems, false, false, 0,
                                       false, true>;
        }
      }
      return norm_registers_kernel<K, RowFit::kLastPartial>;
    }
  }
  if constexpr (kFull) {
    if (fit == RowFit::kExact && cfg.items == 1) return exact_registers_kernel<K, 1>(cfg, plain);
    if (fit == RowFit::kExact && cfg.items == 2) return exact_registers_kernel<K, 2>(cfg, plain);
    if (fit == RowFit::kExact && cfg.items == 4) {
      // The weight at the output: built for the fused add (not fp8), the one form it is for.
      if constexpr (K::kAdd && !K::kLayer && !K::kFp8Out) {
        if (cfg.weight_at_output) return norm_registers_kernel<K, RowFit::kExact, 4, true>;
      }
      return exact_registers_kernel<K, 4>(cfg, plain);
    }
    if (fit == RowFit::kExact && cfg.items == 3) {
      return layer_plain_registers_kernel<K, 3>(cfg, plain);
    }
    if constexpr (odd_items_built(K::kLayer, K::kAdd, 5)) {
      if (fit == RowFit::kExact && cfg.items == 5) {
        return layer_plain_registers_kernel<K, 5>(cfg, plain);
      }
    }
    if (fit != RowFit::kAny) {
      if constexpr (K::kLayer) {
        if (power_of_two_rows) {
          return norm_registers_kernel<K, RowFit::kWhole, K::kMaxItems, false, false, 0, false,
                                       true>;
        }
      }
      return norm_registers_kernel<K, RowFit::kWhole>;
    }
  } else if constexpr (K::kLayer) {
    // Rows of a power-of-two number of whole groups (kPowerOfTwoRows) at narrow accesses; at
    // full width such rows are RowFit::kWhole.
    if (power_of_two_rows) {
      return norm_registers_kernel<K, RowFit::kAny, K::kMaxItems, false, false, 0, false, true>;
    }
  }
  return norm_registers_kernel<K, RowFit::kAny>;
}

template <class K>
Status launch_norm_kernel(NormKernelArgs a, const NormConfig& cfg, const DeviceInfo& info,
                          bool pdl, StreamHandle stream) {
  using Path = NormConfig::Path;
  static std::atomic<int> allowed_staged[kMaxDevicesTracked];
  constexpr int64_t kMaxBlocksPerLaunch = INT_MAX;
  size_t smem = 0;
  const bool cluster = cfg.path == Path::kCluster;
  const int cluster_blocks = cluster ? cfg.cluster_blocks : 1;
  const RowFit fit = row_fit_of<K>(a, cfg, cluster_blocks);
  if (cfg.path == Path::kRegisters && (cfg.items > K::kMaxItems || norm_odd_items(cfg.items)) &&
      (!odd_items_built(K::kLayer, K::kAdd, cfg.items) ||
       (fit != RowFit::kExact && fit != RowFit::kLastPartial))) {
    return Status::runtime_error(
        "norm: " + std::to_string(cfg.items) +
        " groups per thread need rows of whole, 16-byte aligned groups that the launch covers "
        "exactly (three: also where only each thread's last group may lie past the row, at "
        "narrower accesses for any N), and a form built for them (five: not LayerNorm with the "
        "add)");
  }
  if (cfg.output_parts != 1 &&
      (cfg.path != Path::kRegisters || cfg.rows_per_block != 1 || !K::kSharedRowsBuilt ||
       fit != RowFit::kExact || (cfg.items != 1 && cfg.items != 2 && cfg.items != 4) ||
       cfg.weight_at_output || cfg.output_parts > kNormMaxOutputParts ||
       (cfg.output_parts & (cfg.output_parts - 1)) != 0)) {
    return Status::runtime_error(
        "norm: output_parts " + std::to_string(cfg.output_parts) +
        " needs the registers path with one row per block covered exactly by 1, 2 or 4 whole "
        "groups per thread, not the fused add's fp8 forms, the weight beside the row, and a "
        "power of two up to " +
        std::to_string(kNormMaxOutputParts));
  }
  const int split = cfg.split_blocks;
  // Whole aligned groups that a split kernel covers.
  const bool split_covered = K::kLoad == K::kGroup && a.cols % K::kGroup == 0 &&
                             (fit == RowFit::kExact || fit == RowFit::kLastPartial) &&
                             split_rows_cover(a.cols / K::kGroup, cfg.threads_per_row, cfg.items);
  if (split != 1 &&
      (!K::kSplitRowsBuilt || cfg.path != Path::kRegisters || cfg.rows_per_block != 1 ||
       !split_covered || cfg.weight_at_output || cfg.output_parts != 1 ||
       split > kNormMaxSplitBlocks || (split & (split - 1)) != 0 ||
       split > info.max_cluster_blocks || cfg.block_threads * split != cfg.threads_per_row ||
       cfg.block_threads < info.warp_size)) {
    return Status::runtime_error(
        "norm: split_blocks " + std::to_string(split) +
        " needs 16-bit tensors of one dtype (fp8 codes in a format the GPU converts), a GPU "
        "with clusters that large, and the registers "
        "path with one row of 128, 256 or 512 threads holding whole aligned groups, 1, 2, 3 or 4 "
        "per thread that cover the row exactly, or 3 or 4 (1 or 2 on 128 threads) with only "
        "each thread's last group partly past it, split into blocks of at least a warp, with the "
        "weight beside the row and no output parts, up to " +
        std::to_string(kNormMaxSplitBlocks) + " blocks");
  }
  const int parts = cfg.output_parts * split;
  const int64_t groups = a.cols / K::kGroup;
  const bool power_of_two_rows =
      a.cols % K::kGroup == 0 && groups > 0 && (groups & (groups - 1)) == 0;
  const bool plain = cfg.plain && plain_norm_call(a);
  auto kernel = pick_norm_kernel<K>(fit, cfg, plain, power_of_two_rows);
  // The cluster kernel taken: one a RowFit, and the exact rows' plain form beside it.
  const int cluster_kernel =
      static_cast<int>(fit) + (cluster && cluster_takes_plain<K>(fit, plain) ? kRowFitCount : 0);
  if (cluster_blocks > 8) {
    static std::atomic<bool> allowed[2 * kRowFitCount][kMaxDevicesTracked];
    std::atomic<bool>& done = allowed[cluster_kernel][info.index % kMaxDevicesTracked];
    if (!done.load()) {
      const ErrorCode e = allow_large_clusters(kernel);
      if (e != kSuccess) return status_from("norm: allowing 16-block clusters", e);
      done.store(true);
    }
  }
  // The cluster kernel loops over rows in as many clusters as the GPU holds at once.
  int64_t resident_clusters = 0;
  if (cluster) {
    // Per kernel (cluster_kernel) and cluster size (up to kMaxClusterBlocks), for the block size
    // last asked about (a row's blocks are fixed by N): count << 4 | log2(block size); 0: not yet
    // asked.
    static std::atomic<int> resident[2 * kRowFitCount][kMaxClusterBlocks + 1]
                                    [kMaxDevicesTracked];
    std::atomic<int>& known =
        resident[cluster_kernel][std::min(cluster_blocks, kMaxClusterBlocks)]
                [info.index % kMaxDevicesTracked];
    const int threads_log2 = log2_floor(cfg.block_threads);
    const int cached = known.load();
    int count = cached >> 4;
    if (cached == 0 || (cached & 15) != threads_log2) {
      const ErrorCode e =
          max_resident_clusters(kernel, cfg.block_threads, 0, cluster_blocks, &count);
      if (e != kSuccess) return status_from("norm: resident clusters", e);
      if (count < 1) return Status::runtime_error("norm: no cluster of this shape fits the GPU");
      known.store(count << 4 | threads_log2);
    }
    resident_clusters = count;
  }
  if (cfg.path == Path::kStaged) {
    kernel = norm_staged_kernel<K>;
    smem = static_cast<size_t>(cfg.smem_groups) * K::kGroup * sizeof(typename K::TR);
    FUSEKIT_RETURN_IF_ERROR(allow_smem(kernel, smem, info.index, allowed_staged, "norm"));
  }
  const int64_t rows_per_block = cfg.path == Path::kRegisters ? cfg.rows_per_block : 1;
  // One row (or rows_per_block) per block, in several launches when the rows exceed what one grid
  // can index; the cluster kernel's grid covers any number of rows.
  const int64_t rows_per_launch =
      cluster ? a.rows : kMaxBlocksPerLaunch / (cluster_blocks * parts) * rows_per_block;
  // Rows in runs number fewer than 2^31 (core/validate.h, common_run_rows): one launch, whose
  // row indices are the call's (the kernels find each run from them).
  if (K::kRuns && a.rows > rows_per_launch) {
    return Status::runtime_error("norm: rows in runs need one launch");
  }
  const int64_t total_rows = a.rows;
  for (int64_t first = 0; first < total_rows; first += rows_per_launch) {
    NormKernelArgs part = a;
    const int64_t rows = std::min(total_rows - first, rows_per_launch);
    part.rows = rows;
    auto shift = [&](auto* p, int64_t stride, int64_t elem) {
      using P = std::remove_pointer_t<decltype(p)>;
      using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
      return p == nullptr ? p : reinterpret_cast<decltype(p)>(reinterpret_cast<Byte*>(p) +
                                                              first * stride * elem);
    };
    part.x = shift(a.x, a.x_stride, sizeof(typename K::TX));
    part.out = shift(a.out, a.out_stride, sizeof(typename K::TO));
    part.residual = shift(a.residual, a.residual_stride, sizeof(typename K::TR));
    part.residual_out = shift(a.residual_out, a.residual_out_stride, sizeof(typename K::TR));
    part.rstd = shift(a.rstd, 1, sizeof(float));
    part.mean = shift(a.mean, 1, sizeof(float));
    part.dynamic_scale = shift(a.dynamic_scale, 1, sizeof(float));
    const int64_t blocks =
        cluster ? std::min(rows, resident_clusters) * cluster_blocks
                : (rows + rows_per_block - 1) / rows_per_block * parts;
    // The trigger after the writes where the next grid's early blocks would crowd this grid
    // (NormConfig::trigger_late_where_crowded): only past one block an SM, where it can.
    if (pdl && cfg.trigger_late_where_crowded && cfg.path == Path::kRegisters && split == 1 &&
        !part.trigger_after_writes && blocks > info.sm_count) {
      int resident = 0;
      const ErrorCode re =
          resident_blocks_per_sm(kernel, cfg.block_threads, smem, info.index, &resident);
      if (re != kSuccess) return status_from("norm: blocks an SM holds", re);
      if (next_grid_crowded(blocks, info.sm_count, resident)) part.trigger_after_writes = 1;
    }
    const dim3 grid(static_cast<unsigned>(blocks));
    const dim3 block(static_cast<unsigned>(cfg.block_threads));
    const ErrorCode e = launch_clustered(kernel, grid, block, smem, stream, pdl,
                                         cluster ? cluster_blocks : split, part);
    if (e != kSuccess) return status_from("norm: kernel launch", e);
  }
  return Status();
}

// Every dtype combination of kind kKind whose x is TX, with the fused residual add (kAdd) or
// without, with output Fp8 (void: x's dtype; else an fp8 format tag: gpu/common/fp8_pack.cuh).
// None for e4m3fn codes where the platform has no hardware conversion to them (HIP):
// dispatch_codes_format never asks for them there, so no unit builds them in vain.
template <NormKind kKind, bool kAdd, class Fp8, bool kRuns, class TX>
Status launch_norm_x_dtype(const detail::NormProblem& p, const NormKernelArgs& args,
                           const NormConfig& cfg, int load_width, const DeviceInfo& info, bool pdl,
                           StreamHandle stream) {
  if constexpr (std::is_same_v<Fp8, detail::Fp8E4M3FN> && !platform_has_hardware_e4m3fn()) {
    return Status::runtime_error("norm: no e4m3fn kernels are built for this platform");
  } else {
    return dispatch_x_or_float<TX>(p.weight_dtype, [&](auto w_tag) -> Status {
      using TW = typename decltype(w_tag)::type;
      return dispatch_x_or_float<TX>(p.source_dtype(), [&](auto r_tag) -> Status {
        using TR = typename decltype(r_tag)::type;
        if constexpr (!kAdd && !std::is_same_v<TR, TX>) {
          return Status::runtime_error("norm: internal dtype dispatch error");
        } else {
          auto with_load = [&](auto load_tag) -> Status {
            return dispatch_warp(info.warp_size, [&](auto warp_tag) -> Status {
              using K = NormTraits<kKind, kAdd, TX, TW, TR, decltype(load_tag)::value,
                                   decltype(warp_tag)::value, Fp8, kRuns>;
              return launch_norm_kernel<K>(args, cfg, info, pdl, stream);
            });
          };
          return dispatch_load_width<16 / static_cast<int>(sizeof(TX))>(load_width, with_load);
        }
      });
    });
  }
}

// The parts that take longest to compile leave their kernels of bf16 x to units of their own
// (norm_*_bf16.cu), so that a parallel build, which waits on its longest unit, takes about half
// as long for them. The fused add's four parts: of their nine dtype combinations fp32 x has one
// and fp16 and bf16 x four each, so each splits into units of five and four. The plain parts of
// LayerNorm and of RMSNorm's e4m3fn output: of five (fp32 x one, fp16 and bf16 x two each),
// three and two.
#define FUSEKIT_NORM_BF16_X_PART(kind, add, fp8)                                             \
  template Status launch_norm_x_dtype<kind, add, fp8, false, BFloat16>(                     \
      const detail::NormProblem&, const NormKernelArgs&, const NormConfig&, int,           \
      const DeviceInfo&, bool, StreamHandle)
extern FUSEKIT_NORM_BF16_X_PART(NormKind::kRms, true, void);
extern FUSEKIT_NORM_BF16_X_PART(NormKind::kLayer, true, void);
extern FUSEKIT_NORM_BF16_X_PART(NormKind::kRms, true, detail::Fp8E4M3FN);
extern FUSEKIT_NORM_BF16_X_PART(NormKind::kRms, true, Fp8FormatInArgs);
extern FUSEKIT_NORM_BF16_X_PART(NormKind::kLayer, false, void);
extern FUSEKIT_NORM_BF16_X_PART(NormKind::kRms, false, detail::Fp8E4M3FN);

// Every dtype combination of kind kKind (launch_norm_x_dtype for x's).
template <NormKind kKind, bool kAdd, class Fp8, bool kRuns = false>
Status launch_norm_dtypes(const detail::NormProblem& p, const NormKernelArgs& args,
                          const NormConfig& cfg, int load_width, const DeviceInfo& info, bool pdl,
                          StreamHandle stream) {
  if (p.add_residual != kAdd) return Status::runtime_error("norm: internal add dispatch error");
  return dispatch_float_dtype(p.x_dtype, [&](auto x_tag) -> Status {
    using TX = typename decltype(x_tag)::type;
    return launch_norm_x_dtype<kKind, kAdd, Fp8, kRuns, TX>(p, args, cfg, load_width, info, pdl,
                                                           stream);
  });
}

template <NormKind kKind, bool kAdd>
Status launch_norm(const detail::NormProblem& p, const NormKernelArgs& args, const NormConfig& cfg,
                   int load_width, const DeviceInfo& info, bool pdl, StreamHandle stream) {
  return launch_norm_dtypes<kKind, kAdd, void>(p, args, cfg, load_width, info, pdl, stream);
}

// The kernels of rows in runs (NormTraits::kRuns): rms_norm and layer_norm (norm_runs.cu).
template <NormKind kKind>
Status launch_norm_runs(const detail::NormProblem& p, const NormKernelArgs& args,
                        const NormConfig& cfg, int load_width, const DeviceInfo& info, bool pdl,
                        StreamHandle stream) {
  return launch_norm_dtypes<kKind, false, void, true>(p, args, cfg, load_width, info, pdl, stream);
}

}  // namespace fusekit::gpu
