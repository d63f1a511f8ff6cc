// The registers path's kernel (norm_registers_kernel): each row loaded straight into registers
// by its threads (normalize_row_slice), then finished by finish_row (norm_kernel.cuh, whose top
// says why the norm family has several kernels and how a row is split and summed). Device code
// only; norm_launch.cuh picks and launches the kernels.
#pragma once

#include <cstdint>

#include "gpu/common/reduce.cuh"
#include "gpu/norm/norm_group_io.cuh"
#include "gpu/norm/norm_kernel.cuh"
#include "gpu/norm/norm_kernel_args.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

// Loads a row's slice into registers (thread t: groups t, t + tpr, ... from element first_col on,
// `items` of them) and finishes it (finish_row). The registers kernel's row. (The cluster kernel
// loads its slices with load_row_item and weight_group instead; written out here, the loads keep
// ptxas's allocation for these hot kernels: through the helpers, 72 -> 81 registers for the fused
// add, which costs it a block per SM.)
template <class K, RowFit kFit, OutputForm kForm, int kItems, bool kWeightAtOutput,
          bool kHoldAffine, bool kAffineAtOnce, bool kPackedRow, bool kWeightAfterSquares,
          bool kRowOfThreadItems, bool kRowStartApart, bool kPairwiseAdd, class Reduce,
          class ReduceMax, class Moments, class MaxRule>
FUSEKIT_DEVICE void normalize_row_slice(const NormKernelArgs& a, int64_t row, bool active, int t,
                                        int tpr, int first_col, int items, const Reduce& reduce,
                                        const ReduceMax& reduce_max, const Moments& moments,
                                        const MaxRule& max_rule, bool writes_stats,
                                        bool writes_outputs, int weight_shift) {
  using TX = typename K::TX;
  using TW = typename K::TW;
  using TR = typename K::TR;
  constexpr int G = K::kGroup;
  const int n = static_cast<int>(a.cols);

  // The row stays packed in its storage type until used: h in TR (x's type, or residual's when
  // adding, which is exactly what gets normalized), weight (and bias) in TW. RMSNorm issues the
  // weight's loads beside the row's so that their latencies overlap, unless kWeightAtOutput
  // (NormConfig::weight_at_output: registers for occupancy); so does LayerNorm where its weight
  // and bias take at most 16 registers per thread (one or two groups per thread: the decode and
  // mid-batch shapes, whose time is latency), or at any count where kHoldAffine (the kernels of
  // shared rows, built for one block per SM: see norm_registers_kernel). Else LayerNorm loads
  // them after its reductions (affine), keeping the registers for occupancy (bf16 x with fp32
  // affine at two groups spills otherwise): group by group, or where kAffineAtOnce (LayerNorm
  // alone, fixed thread counts: norm_registers_kernel) every group's at the first group's outputs.
  // Or where kWeightAfterSquares (RMSNorm's plain kernels of one row a block: the decode batches'),
  // RMSNorm issues them once the row's squares are summed, before the reduction (weight_loads):
  // beside the row's, they delay the row's own data, which the squares wait for, while past the
  // squares their latency still hides behind the reduction (bench/NOTES.md, "Norm v68").
  static_assert(!kWeightAfterSquares || (!K::kLayer && !kWeightAtOutput),
                "the weight after the squares: RMSNorm's early weight only");
  constexpr bool kEarlyWeight =
      K::kLayer ? kItems * 2 * G * static_cast<int>(sizeof(TW)) <= 16 * 4 || kHoldAffine
                : !kWeightAtOutput && !kWeightAfterSquares;
  const TW* bias = K::kLayer ? static_cast<const TW*>(a.bias) : nullptr;
  Packed<TX, G> x[kItems];
  Packed<TR, G> h[kItems];
  Packed<TW, G> w[kItems];
  constexpr bool kLateAtOnce = kAffineAtOnce && !kEarlyWeight;
  [[maybe_unused]] Packed<TW, G> b[K::kLayer && (kEarlyWeight || kLateAtOnce) ? kItems : 1];
  const TX* x_row = static_cast<const TX*>(a.x) + row_offset<K, RowTensor::kX>(a, row);
  const TR* r_row = static_cast<const TR*>(a.residual) +
                      row_offset<K, RowTensor::kResidual>(a, row);
  // kRowStartApart (the block holds one row, or a part of its outputs): the rows' starts formed
  // apart from the threads' columns (block_shared_pointer), so that no constant load is on the
  // way to the first load. The residual's only where added: the move stays even where its result
  // goes unused.
  if constexpr (kRowStartApart) {
    x_row = block_shared_pointer(x_row);
    if constexpr (K::kAdd) r_row = block_shared_pointer(r_row);
  }
  const TW* weight = static_cast<const TW*>(a.weight);
  constexpr bool kPlain = kForm == OutputForm::kPlain;
  const bool has_weight = kPlain || weight != nullptr;
  // A missing weight is a group of ones (exact in every float dtype) with no offset, and a missing
  // bias a group of zeros, so that the outputs take one path whatever is present: the branch is
  // around the loads, not around each element's arithmetic.
  const float weight_offset = has_weight ? a.weight_offset : 0.0f;
  auto vector_item = [](int i) { return item_vector<K, kFit, kItems>(i); };
  auto weight_item = [&](int i, int col) {
    return has_weight ? load_item<K>(weight, col, n, vector_item(i))
                      : filled_group<TW, G>(1.0f);
  };
  auto bias_item = [&](int i, int col) {
    return bias != nullptr ? load_item<K>(bias, col, n, vector_item(i))
                           : filled_group<TW, G>(0.0f);
  };
  // ShiftedMoments' shift, its load issued ahead of the row's: every sum waits on it, and behind
  // the loads of a row whose last slot is partial (a branch) it came last (bench/NOTES.md).
  auto this_row_moments = moments;
  if constexpr (Moments::kShifted) {
    this_row_moments.shift = active ? row_shift<K, kFit>(x_row, r_row, n) : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int col = first_col + (t + i * tpr) * G;
    const bool in_row = item_in_row<kFit, kItems>(i, items, col, n);
    if (active && in_row) {
      x[i] = load_item<K>(x_row, col, n, vector_item(i));
      if constexpr (K::kAdd) h[i] = load_item<K>(r_row, col, n, vector_item(i));
    } else {
      x[i] = filled_group<TX, G>(0.0f);
      h[i] = filled_group<TR, G>(0.0f);
    }
    if constexpr (kEarlyWeight) {
      // Every thread, writing or not: a condition here made ptxas branch around each item's
      // loads, x's too, where it predicates them otherwise (one-row calls 0.1-0.4 us slower).
      // A thread that writes no outputs (shared rows) loads the weight and bias of a thread that
      // does, weight_shift threads away, whose groups lie in the row wherever its own do (exact
      // rows): the block then reads only its own part's weight and bias from L2, the rest
      // hitting in L1. weight_shift is 0 elsewhere.
      if (in_row) {
        const int weight_col = col + weight_shift * G;
        w[i] = weight_item(i, weight_col);
        if constexpr (K::kLayer) b[i] = bias_item(i, weight_col);
      }
    }
  }
  // kWeightAfterSquares: finish_row's hook after the squares, given their sum. The loads are
  // guarded by that sum (known_once), else ptxas hoists them up beside the row's; the warp
  // barrier after them (issue_memory_accesses_here) keeps them before the reduction's first store
  // to shared memory, so that they are in flight while the row is summed.
  auto weight_loads = [&](float thread_squares) {
    if constexpr (kWeightAfterSquares) {
      const bool squares_known = known_once(thread_squares);
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const int col = first_col + (t + i * tpr) * G;
        if (squares_known && item_in_row<kFit, kItems>(i, items, col, n)) {
          w[i] = weight_item(i, col);
        }
      }
      issue_memory_accesses_here();
    }
  };
  auto affine = [&](int i, int col, float (&wv)[G], float (&bv)[G]) {
    // Late (LayerNorm at four groups, the fused add with kWeightAtOutput): from cache, as every
    // row reads them, with registers kept for occupancy while the row stays in registers across
    // its reductions.
    if constexpr (kLateAtOnce) {
      // Every group's weight and bias before any output is stored. Group by group, each group's
      // loads wait for the previous group's store (out may alias them, as far as ptxas knows):
      // kItems round trips to cache on a row's path.
      if (i == 0) {
#pragma unroll
        for (int j = 0; j < kItems; ++j) {
          const int col_j = first_col + (t + j * tpr) * G;
          if (item_in_row<kFit, kItems>(j, items, col_j, n)) {
            w[j] = weight_item(j, col_j);
            b[j] = bias_item(j, col_j);
          }
        }
      }
    } else if constexpr (!kEarlyWeight && !kWeightAfterSquares) {
      w[i] = weight_item(i, col);
    }
    to_floats(w[i], wv);
    if constexpr (!kPlain) {
#pragma unroll
      for (int e = 0; e < G; ++e) wv[e] += weight_offset;
    }
    if constexpr (K::kLayer) {
      if constexpr (kEarlyWeight || kLateAtOnce) {
        to_floats(b[i], bv);
      } else {
        to_floats(bias_item(i, col), bv);
      }
    } else {
#pragma unroll
      for (int e = 0; e < G; ++e) bv[e] = 0.0f;
    }
  };
  // A static fp8 scale (kRegistersScaleRead), staged now that the row's loads are issued.
  const auto static_scale = static_scale_reader<K, kRegistersScaleRead<K, MaxRule>>(a, tpr);
  stage_static_scale(a, static_scale);
  // Exact rows are tpr x kItems groups (RowFit::kExact), which finish_row's division uses where
  // tpr is a constant (kRowOfThreadItems: the plain kernels' fixed thread counts; the rule, with
  // why it leaves some out, is at its definition below). Without fp8 output: without the
  // division's call, which had fenced them, ptxas moved loads in RMSNorm's fp8 kernels of four
  // groups (8-32 bytes spilled).
  finish_row<K, kFit, kForm, kPackedRow, kRowOfThreadItems, kPairwiseAdd>(
      a, row, active, t, tpr, first_col, items, x, h, affine, reduce, reduce_max, writes_stats,
      static_scale, this_row_moments, writes_outputs, max_rule, weight_loads);
}

// LayerNorm's kernels of shared and split rows (NormConfig::output_parts, split_blocks) hold the
// weight and bias beside the row at every group count, built for one block per SM for the
// registers: their grids hold
// at most a quarter of a block per SM (the heuristic's rule), so occupancy costs them nothing,
// while loading the affine after the reductions puts an L2 round trip on a one-row call's path.
template <class K, bool kSharedRows>
inline constexpr bool kSharedRowsHoldAffine = K::kLayer && kSharedRows;

// The registers kernel's launch bound (__launch_bounds__): up to 512 threads a block, on as many
// blocks an SM as K's register budget says (K::kMinBlocksPerSm), or one where a block holds the
// affine beside its share of a row (kSharedRowsHoldAffine; kSpreadRows: shared or split rows).
// kLayerAddThreeGroups: LayerNorm's fused add in its other dtypes (fp16, or a float32 weight or
// residual; budget one) still fits two at up to three groups a thread in the kernels of a run-time
// row width: ptxas takes 55-64 registers there unspilled, where free of the bound it took 66-80
// (the shifted moments' shift and pair). On an H100 (graph replay, a float32 residual) [256, 6144]
// took 8.78 us free of the bound and 5.48 with it, [256, 12288] 10.22 and 10.97 (bench/NOTES.md,
// "Two blocks an SM for the other dtypes, measured"): kept for the worst case.
// kPackedRow (NormConfig::packed_row): the plain kernels without the add (LayerNorm's, RMSNorm's)
// of three groups a thread on 256 or 512 threads, one row a block, built for 1536 threads an SM
// (40 registers) rather than 1024, which the row held packed through the reductions (finish_row's
// kPackedRow) lets them fit unspilled; RMSNorm's weight, loaded beside the row, waits packed too.
template <class K, RowFit kFit, int kItems, int kThreadsPerRow, bool kPlain, bool kSpreadRows,
          bool kPackedRow>
struct RegistersKernelBound {
  static_assert(!kPackedRow || (!K::kAdd && kPlain && kItems == 3 &&
                                kFit == RowFit::kExact && !kSpreadRows &&
                                (kThreadsPerRow == 256 || kThreadsPerRow == 512)),
                "a packed row: plain kernels without the add, 256 or 512 threads x 3 groups");
  static constexpr int kThreads = kPackedRow ? kThreadsPerRow : K::kMaxThreads;
  static constexpr bool kLayerAddThreeGroups =
      K::kLayer && K::kAdd && kItems <= 3 && kThreadsPerRow == 0;
  static constexpr int kMinBlocks =
      kPackedRow ? kNormPackedRowSmThreads / kThreads
                 : (kSharedRowsHoldAffine<K, kSpreadRows> ? 1
                    : kLayerAddThreeGroups             ? 2
                                                       : K::kMinBlocksPerSm);
};

// The registers path: each row is loaded straight into registers by threads_per_row threads
// (rows_per_block rows per block), then finish_row. kFit: see RowFit. kItems: the groups a thread
// can hold; with RowFit::kExact exactly that many (a.items == kItems), else up to it.
// kWeightAtOutput: NormConfig::weight_at_output (RMSNorm only). kSharedRows (NormConfig::
// output_parts; exact rows of their own blocks, NormTraits::kSharedRowsBuilt): the row's
// 2^output_parts_log2 consecutive blocks each load and reduce all of it, and each writes the
// outputs of one equal range of the row's threads (of the groups they hold): part p the threads
// t with t * parts / tpr == p. A kernel of its own: the share's index and predicate cost 1-3%.
// kThreadsPerRow: 0, or the row's thread count fixed at compile time for blocks of one row
// (pick_norm_kernel: NormTraits::kFixedRowThreads). The same code with tpr a constant: the
// reductions unroll without the branches a runtime count needs, and a thread's groups lie at
// constant offsets, which makes the short calls 2-10% faster (bench/NOTES.md, "Norm v16").
// kPlain: the plain form (OutputForm::kPlain), built with a fixed thread count only, whose grid
// holds exactly one block per row (and part), so that no thread lies past the last row either.
// kPowerOfTwoRows (LayerNorm's kernels other than the exact ones): the rows are a power-of-two
// number of whole groups, whose moments take one reduction (TreeMoments); a kernel of its own, so
// that the others' code stays the default's alone.
// kSplitRows (NormConfig::split_blocks; fixed thread count, rows of whole groups covered exactly
// or but for each thread's last group, as norm_config.h's split_rows_cover says; CUDA sm_90+):
// the row's kThreadsPerRow threads lie in the 2^output_parts_log2 blocks of a cluster, block p
// holding row threads p * blockDim.x + threadIdx.x, so each block loads, reduces and writes only
// its own threads' groups (in place too), and each reduction gathers every thread's value into
// every block (ClusterGather, reduce.cuh): the same tree, so the bits of one block a row.
// kPackedRow: NormConfig::packed_row (RegistersKernelBound); the same sums, so the same bits.
template <class K, RowFit kFit, int kItems = K::kMaxItems, bool kWeightAtOutput = false,
          bool kSharedRows = false, int kThreadsPerRow = 0, bool kPlain = false,
          bool kPowerOfTwoRows = false, bool kSplitRows = false, bool kPackedRow = false>
__global__ void __launch_bounds__(
    (RegistersKernelBound<K, kFit, kItems, kThreadsPerRow, kPlain, kSharedRows || kSplitRows,
                          kPackedRow>::kThreads),
    (RegistersKernelBound<K, kFit, kItems, kThreadsPerRow, kPlain, kSharedRows || kSplitRows,
                          kPackedRow>::kMinBlocks)) norm_registers_kernel(NormKernelArgs a) {
  // HIP: the copy for the other warp size (platform.h)
  if constexpr (!warp_size_compiled<K::kWarp>()) return stub_launched();
  if constexpr (kSplitRows && !clusters_compiled()) return stub_launched();
  constexpr bool kFixed = kThreadsPerRow > 0;
  // The reductions' scratch: one float a thread of the row (kThreadsPerRow where fixed, else of
  // the largest block), once for each reduction that can be in flight beside another (LayerNorm's
  // two, the fp8 max beside the sum; RMSNorm's sum alone otherwise). Sized to the kernel, not to
  // the largest: the shared memory blocks hold is taken from the SM's L1, which holds the loads
  // in flight (bench/NOTES.md, "Norm v65": 1-4 KB a block cost a lean decode kernel 0.04-0.09 us,
  // 5 KB 0.15-0.37; this sizing measured level against 4 KB in every kernel).
  constexpr int kScratchArrays = K::kLayer || K::kFp8Out ? 2 : 1;
  // 8-byte aligned: the split rows' shifted moments take both arrays as one of pairs.
  alignas(kSplitRows ? 8 : 4) __shared__ float
      scratch[kScratchArrays][kFixed ? kThreadsPerRow : K::kScratch];
  float* const second_scratch = scratch[kScratchArrays - 1];  // read only where there are two
  __shared__ ClusterMailbox gathers[2];  // kSplitRows: one a reduction (at most two a row)
  constexpr bool kExactOrLastPartial = kFit == RowFit::kExact || kFit == RowFit::kLastPartial;
  static_assert(!kPlain || (kFixed && kExactOrLastPartial),
                "plain: fixed kernels of whole rows only");
  static_assert((kThreadsPerRow & (kThreadsPerRow - 1)) == 0,
                "a row's threads: a power of two (finish_row's division of exact rows)");
  static_assert(!kSplitRows || (kFixed && kExactOrLastPartial && !kSharedRows),
                "split rows: fixed kernels of whole rows only");
  const int tpr = kFixed ? kThreadsPerRow : 1 << a.threads_per_row_log2;
  const int parts_log2 = kSharedRows || kSplitRows ? a.output_parts_log2 : 0;
  const int64_t row = kFixed ? static_cast<int64_t>(blockIdx.x >> parts_log2)
                             : static_cast<int64_t>(blockIdx.x >> parts_log2) * a.rows_per_block +
                                   (static_cast<int>(threadIdx.x) >> a.threads_per_row_log2);
  const int part = static_cast<int>(blockIdx.x) & ((1 << parts_log2) - 1);  // cluster rank
  const int t = kSplitRows ? part * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)
                           : static_cast<int>(threadIdx.x) & (tpr - 1);
  const int share = t << parts_log2;  // its part is share / tpr, uniform per warp
  const bool writes_outputs =
      !kSharedRows || (kFixed ? static_cast<int>(static_cast<unsigned>(share) / kThreadsPerRow)
                              : share >> a.threads_per_row_log2) == part;

  if constexpr (kSplitRows) {  // every block's mailboxes ready before any peer sends
    if (threadIdx.x == 0) {
      mailbox_init(&gathers[0]);
      mailbox_init(&gathers[1]);
      mailbox_publish_init();
    }
    cluster_barrier();
  }
  wait_for_prior_grids();
  // The next grid may launch now, or after this thread's writes (NormConfig::trigger_after_writes).
  if (!a.trigger_after_writes) allow_dependent_grids();
  // How reduction k (scratch[0] or second_scratch; those of two values use 0) publishes its
  // threads' values.
  auto publish = [&](int k) {
    if constexpr (kSplitRows) {
      return ClusterGather{&gathers[k], t, 1 << parts_log2};
    } else {
      return BlockPublish{};
    }
  };
  auto reduce = [&](float v, int k) {
    return row_sum<K::kWarp, K::kMaxWarpsPerRow>(v, tpr, k == 0 ? scratch[0] : second_scratch,
                                                  publish(k));
  };
  // The row's max of magnitudes (fp8 outputs with a dynamic scale): in the fewest instructions
  // where the row's thread count is a launch argument (the large batches' kernels), by shuffles
  // where it is fixed (decode rows; reduce.cuh's RowMaxForm).
  constexpr RowMaxForm kMaxForm = kFixed ? RowMaxForm::kShuffles : RowMaxForm::kCompact;
  // fp8 output only (RMSNorm, whose sum used scratch[0]), where y is formed again for the codes.
  auto reduce_max = [&](float v) {
    return row_magnitude_max<K::kWarp, kMaxForm>(v, tpr, second_scratch, publish(1));
  };
  // fp8 output with a dynamic scale: its sum of squares and max|h * w| in one reduction.
  auto reduce_sum_max = [&](float v, float m) {
    return row_sum_max<K::kWarp, K::kMaxWarpsPerRow, kMaxForm>(v, m, tpr, scratch[0],
                                                               second_scratch, publish(0));
  };
  // LayerNorm's moments in one reduction (TreeMoments) for rows of a power-of-two number of whole
  // groups: the exact kernels' rows unless kItems is odd, and the other kernels' where
  // kPowerOfTwoRows. Exact rows' groups are tpr x kItems, a constant where tpr is: then so is
  // every merge's count, and no test for empty nodes remains.
  auto reduce_moments = [&](SumM2 v, int groups, float inv_n) {
    return row_moments<K::kWarp, K::kMaxWarpsPerRow, kFit != RowFit::kExact>(
        v, tpr, groups, inv_n, scratch[0], second_scratch, publish(0));
  };
  constexpr bool kTreeMoments =
      K::kLayer && (kFit == RowFit::kExact ? (kItems & (kItems - 1)) == 0 : kPowerOfTwoRows);
  // LayerNorm's other rows with a 16-bit output, the fused add's too: one reduction of two plain
  // sums about a shift (ShiftedMoments, norm_moments.cuh); float32 outputs keep the default's two.
  constexpr bool kShiftedMoments = K::kLayer && !kTreeMoments && sizeof(typename K::TX) == 2;
  // The split rows send a thread's two sums to each block in one store, as one array of pairs
  // over both scratch arrays (row_sum_pair): 50-60 fewer instructions on a one-row call's path.
  // The other kernels keep two arrays: with pairs, two of layer_norm's kernels of 64 registers
  // spilled 4 bytes, and others moved registers. (row_moments' (sum, m2) as pairs in the split
  // rows measured slower at N = 16384: bench/NOTES.md.)
  auto reduce_shifted = [&](float s, float q) {
    if constexpr (kSplitRows && kScratchArrays == 2) {  // both arrays as one of pairs
      return row_sum_pair<K::kWarp, K::kMaxWarpsPerRow>(
          s, q, tpr, reinterpret_cast<float2*>(&scratch[0][0]), publish(0));
    } else {
      return row_sum_pair<K::kWarp, K::kMaxWarpsPerRow>(
          s, q, tpr, scratch[0], second_scratch, publish(0));
    }
  };
  const auto moments = [&] {
    if constexpr (kTreeMoments) {
      return TreeMoments<decltype(reduce_moments), kFit != RowFit::kExact>{
          kFit == RowFit::kExact ? tpr * kItems : static_cast<int>(a.cols) / K::kGroup,
          kFixed ? log2_of_power_of_two(kThreadsPerRow) : a.threads_per_row_log2,
          reduce_moments};
    } else if constexpr (kShiftedMoments) {
      return ShiftedMoments<decltype(reduce_shifted)>{reduce_shifted};
    } else {
      return NoSliceMoments{};
    }
  }();
  // The bounds-free kernels take the weight_after_cast branch once (finish_row).
  constexpr OutputForm kForm = kPlain                 ? OutputForm::kPlain
                               : kFit != RowFit::kAny ? OutputForm::kSplitTails
                                                      : OutputForm::kFlagPerElement;
  // The plain kernels drop the row predicate (true for every block of their grids): with it, the
  // fused add measured 0.05-0.2 us slower; without it in the other kernels, RMSNorm's weight
  // loads moved after its squares (bench/NOTES.md, "Norm v17").
  // With shared rows, the thread of the block's own part whose weight groups this one loads: the
  // one at the same place in that part (itself where it writes; see normalize_row_slice). Not for
  // RMSNorm alone, whose one-row calls measured 0.01-0.02 us slower with it (the fused add's and
  // LayerNorm's 0.01-0.06 faster; bench/NOTES.md, "Norm v20").
  int weight_shift = 0;
  if constexpr (kSharedRows && (K::kAdd || K::kLayer)) {
    const int part_threads = tpr >> parts_log2;
    weight_shift = part * part_threads - (t & ~(part_threads - 1));
  }
  // LayerNorm alone in its fixed-thread kernels of up to 256 threads loads a row's late weight
  // and bias at once (normalize_row_slice): 0.93-0.99x the time at N = 2048-8192 (bench/NOTES.md,
  // "Norm v50"). They stay at 64 registers or fewer, unspilled, where the other kernels spilled
  // with it (up to 544 bytes) or, the fused add in fp16, took 91 registers for 68; at 512 threads
  // (N = 16384 bf16, a row's weight and bias 64 KB, all asked for at once) it was 1.02-1.05x.
  // Five groups a thread keep the group-by-group loads: at once, the bf16 kernels spilled 28 bytes.
  // So do four with each thread's last tested on one block a row (N = 1792, 3584, 7168 bf16): at
  // once, bf16 spilled 36 bytes and took 1.13-1.22x the time at M = 16384 ("Norm v57"); three
  // (N = 2816, 5632) take it, 0.93-0.97x at M >= 2048.
  constexpr bool kAffineAtOnce =
      K::kLayer && !K::kAdd && kFixed && kThreadsPerRow <= 256 && kItems <= kNormMaxItems &&
      !kPackedRow && !(kFit == RowFit::kLastPartial && kItems == kNormMaxItems && !kSplitRows);
  // RMSNorm's plain kernels of one row a block on 512 threads (the decode batches' rows of N =
  // 8192 and 16384 bf16; at large batches the fused add's of N = 16384) and the packed rows
  // (N = 6144, 12288 at large batches) load the weight after the row's squares
  // (normalize_row_slice): 0.96-0.98x the time there. On 128 and 256 threads it measured 1.02-1.08x
  // on an H200 and 0.97-1.02x on an H100 (bench/NOTES.md, "Norm v68", "The H100 run at
  // 322ac87"); those, and the shared and split rows of one-row calls, keep it beside the row's
  // loads.
  constexpr bool kWeightAfterSquares = !K::kLayer && kPlain && !kSharedRows && !kSplitRows &&
                                       !kWeightAtOutput && (kThreadsPerRow >= 512 || kPackedRow);
  // The division by N as a product (finish_row) in the plain kernels: in the others (RMSNorm's
  // 128 x 4 rows at large batches) it measured 1.04x the time at [2048, 4096] ("Norm v69").
  // LayerNorm's (its variance; the mean of 2^k rows is a product already) in the shared and split
  // rows of one-row calls only: in its general four-group kernels of 64 and 128 threads ptxas,
  // without the division's call, moved loads and spilled 16-24 bytes ("Norm v69", "Norm v71").
  // The rows' starts formed apart from the threads' columns (normalize_row_slice, kBlockRow) in
  // the fixed kernels of one row a block, or of a row's shared outputs: 0.90-0.98x the time of
  // their decode calls on an H100 (rms_norm [256, 8192] 2.77 -> 2.51 us). Not the split rows,
  // which measured 1.01-1.07x with it (bench/NOTES.md, "Norm v73").
  constexpr bool kRowStartApart = kFixed && !kSplitRows;
  constexpr bool kRowOfThreadItems = !K::kFp8Out && kPlain && kFixed &&
                                     kFit == RowFit::kExact &&
                                     (!K::kLayer || kSharedRows || kSplitRows);
  // The fused add's h by pairs of 16-bit values (finish_row's kPairwiseAdd) in the split rows, the
  // one-row and decode calls' kernels, whose time is their path's instructions: 40 a group down to
  // 12, 0.03-0.09 us off each such call on an H100. In the kernels of one row a block and the
  // large batches' ptxas then scheduled the weight's loads earlier (72 -> 82 registers, a block
  // less an SM) and they measured up to 1.06x (bench/NOTES.md, "The fused add's h by packed adds").
  constexpr bool kPairwiseAdd = kSplitRows;
  auto slice = [&](const auto& max_rule) {
    normalize_row_slice<K, kFit, kForm, kItems, kWeightAtOutput,
                        kSharedRowsHoldAffine<K, kSharedRows || kSplitRows>, kAffineAtOnce,
                        kPackedRow, kWeightAfterSquares, kRowOfThreadItems, kRowStartApart,
                        kPairwiseAdd>(
        a, row, kPlain || row < a.rows, t, tpr, 0, a.items, reduce, reduce_max, moments, max_rule,
        t == 0 && part == 0, writes_outputs, weight_shift);
  };
  // A dynamic fp8 scale takes its max beside the sum (MaxBesideSum) on a path of its own from the
  // loads on (p = h * w held across the reduction, where a static scale holds the packed row):
  // one path choosing at run time spilled 70-140 bytes a thread (bench/NOTES.md, "Norm v32").
  if constexpr (kFp8KeepsY<K, kItems>) {
    if (a.dynamic_scale != nullptr) {  // uniform
      slice(MaxBesideSum<decltype(reduce_sum_max)>{reduce_sum_max});
    } else {
      slice(MaxAfterSum{});
    }
  } else {
    slice(MaxAfterSum{});
  }
  if (a.trigger_after_writes) allow_dependent_grids();
}

}  // namespace fusekit::gpu
