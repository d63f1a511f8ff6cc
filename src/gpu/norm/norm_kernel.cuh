// RMSNorm / LayerNorm kernels, with or without the fused residual add: device code only. How a
// single group is loaded and stored is in norm_group_io.cuh.
//
// Why several kernels. A normalization needs a whole row before it can write anything, so the row
// must be held somewhere between its reduction and its output. Up to four 16-byte groups per
// thread (N <= 16384 bf16 or 8192 fp32 with 512 threads) it stays in registers, packed in its
// storage type: one read of each input, one write of each output, and nothing but shuffles and
// one barrier in between, which is what small batches (one token, a decode step) need for
// latency. Longer rows, on GPUs with thread-block clusters, are split over the blocks of one
// cluster (norm_cluster_kernel.cuh), each holding its slice in registers the same way, with the
// partial sums exchanged through distributed shared memory: still one read and one write (up to
// 16 blocks x 512 threads x 4 groups: N = 262144 bf16). Elsewhere norm_staged_kernel keeps as
// much of the row as fits in shared memory and re-reads the rest (from L2, where it was just
// read) in the second pass; a whole row of up to ~110K bf16 elements fits on an H100
// (norm_staged_kernel.cuh).
//
// Work split. Work comes in "groups" of 16 bytes of x (8 bf16/fp16 or 4 fp32 elements). In the
// registers path thread t takes groups t, t + T, ... and sums follow one fixed tree over the
// row (see norm_registers_kernel), so results do not depend on how many threads share a row; the
// staged path uses the same split with T = 512 and its own order. kLoad, the width of each memory
// access, adapts to alignment without changing what is summed in which order. Results are
// therefore bitwise identical at any alignment and for any number of rows in the launch.
//
// Numerics. Sums in float32; LayerNorm never squares about zero: each group's squares are taken
// about its own mean and merged pairwise up the row's tree (TreeMoments, for rows of a power-of-two
// number of whole groups: one reduction), or about the row's mean once a first reduction has it
// (other rows: two). With a fused add, h = round_to<TR>(x + r) is both written and normalized.
//
// fp8 output (RMSNorm; NormTraits' Fp8 names the format). The float32 y that would be rounded to
// out's dtype is quantized instead, as core/fp8.h says: by a static scale (read beside the row's
// loads), or by the row's own scale from max|y|, a NaN-propagating max (bits independent of the
// order), taken beside the sum of squares where y stays in registers (MaxBesideSum), else in one
// more reduction. y stays in registers from its max to its codes on the registers path, in place
// of the packed row (finish_row says where not), and on the cluster path; the staged path forms
// it again from the row, a few instructions per element.
#pragma once

#include <cstdint>

#include "core/fp8.h"
#include "gpu/common/reduce.cuh"
#include "gpu/common/vec_io.cuh"
#include "gpu/norm/norm_fp8_output.cuh"
#include "gpu/norm/norm_group_io.cuh"
#include "gpu/norm/norm_kernel_args.cuh"
#include "gpu/norm/norm_moments.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

// How finish_row writes a row's outputs.
enum class OutputForm {
  // One tail with the weight_after_cast flag tested per element (the kernels with bounds).
  kFlagPerElement,
  // The flag taken once, a tail for each value (the bounds-free kernels).
  kSplitTails,
  // The plain form (NormTraits::kPlainBuilt, plain_norm_call): a weight with no offset, no
  // weight_after_cast and no stats outputs, all known at compile time. One tail and no
  // per-element offset, so fewer instructions: the short calls' time is mostly their instruction
  // latency (bench/NOTES.md, "Norm v17").
  kPlain,
};

// The second half of the registers and cluster kernels: from a row's x (and residual, in h)
// packed in registers to the row's outputs. Thread t of the row's T = tpr threads (in a cluster:
// of each block's, whose slice of the row starts at element first_col) holds groups t, t + T, ...,
// t + (items - 1) T of the slice; slots past `items` or past the row hold zeros. Sums first add
// the elements of each group, then combine groups by their index from the highest bit down:
// across the thread's groups (tree_sum over kItems slots), then across warps and lanes, then
// across a cluster's blocks: `reduce(v, k)` gives the row's total of the threads' values v, with
// scratch buffer k (LayerNorm's second reduction uses 1 while the first may still be read from 0).
// On the registers path that order depends on neither T nor `items`, so the launch shape can
// follow the batch size while each row's result stays bitwise the same. Every thread of the block
// calls this (reduce has barriers); `active` is false for threads past the last row.
// `affine(i, col, w, b)` gives item i's weight (offset added) and bias as floats: 1 and 0 where
// absent. The thread with `writes_stats` stores rstd and mean (and a dynamic fp8 scale; a static
// one's 1 / scale comes from `static_scale.inverse()`: StaticScaleAtCodes and the others), and
// `reduce_max(v)` gives the row's NanMax of v (fp8 output with a dynamic scale only, unless
// `max_rule` takes it beside the sum: MaxBesideSum). A thread without `writes_outputs` (another
// block writes its groups: NormConfig::output_parts) takes part in the reductions and stores
// nothing. kForm: OutputForm.
// kPFirst (finish_row's choice): kept_y holds p = h * w from before the reduction, whose max
// travels beside the sum (MaxBesideSum, a dynamic scale), and y = p * rstd after it.
template <class K, RowFit kFit, OutputForm kForm, bool kPFirst, int kItems, class Affine,
          class Reduce, class ReduceMax, class StaticScale, class Moments, class MaxRule>
FUSEKIT_DEVICE void finish_row_impl(const NormKernelArgs& a, int64_t row, bool active, int t,
                                    int tpr, int first_col, int items,
                                    Packed<typename K::TX, K::kGroup> (&x)[kItems],
                                    Packed<typename K::TR, K::kGroup> (&h)[kItems],
                                    const Affine& affine, const Reduce& reduce,
                                    const ReduceMax& reduce_max, bool writes_stats,
                                    const StaticScale& static_scale, const Moments& moments,
                                    bool writes_outputs, const MaxRule& max_rule) {
  using TX = typename K::TX;
  using TR = typename K::TR;
  constexpr int G = K::kGroup;
  const int n = static_cast<int>(a.cols);  // <= 262144 on these paths
  // Whether item i of this thread lies in the row (and element e of it, for partial groups).
  auto in_row = [&](int i, int col, int e) {
    if constexpr (kFit == RowFit::kAny) return i < items && col + e < n;
    return item_whole<K, kFit, kItems>(i) ? item_in_row<kFit, kItems>(i, items, col, n)
                                          : col + e < n;
  };
  auto vector_item = [](int i) { return item_vector<K, kFit, kItems>(i); };
  // h = x + residual, rounded to the residual's dtype, is written back out (residual_out) before
  // the reductions, so that the stores are under way while the row is reduced.
  if constexpr (K::kAdd) {
    TR* r_out = static_cast<TR*>(a.residual_out) + row * a.residual_out_stride;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      float v[G];
#pragma unroll
      for (int e = 0; e < G; ++e) v[e] = element_float(x[i], e) + element_float(h[i], e);
      h[i] = pack_floats<TR>(v);
      to_floats(h[i], v);
      const int col = first_col + (t + i * tpr) * G;
      if (active && writes_outputs && in_row(i, col, 0)) {
        store_item<K, TR>(r_out, col, n, v, vector_item(i));
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < kItems; ++i) h[i] = x[i];  // TR is TX
  }

  // max|y| over item i's elements in the row (fp8 outputs).
  [[maybe_unused]] auto item_max_abs = [&](int i, float m, const float (&y)[G], int col) {
    return item_whole<K, kFit, kItems>(i) ? group_max_abs<K, true>(m, y, col, n)
                                          : group_max_abs<K, false>(m, y, col, n);
  };
  constexpr bool kKeepY = kFp8KeepsY<K, kItems>;
  [[maybe_unused]] float kept_y[kKeepY ? kItems : 1][G];
  static_assert(!kPFirst || (kKeepY && MaxRule::kUsed), "p first: y kept, max beside the sum");
  [[maybe_unused]] float max_p = 0.0f;  // the row's max|h * w| (kPFirst)

  // Per group, then across the thread's groups, as trees (absent groups are zeros).
  float part[kItems];
  float mean = 0.0f;
  float total;
  if constexpr (K::kLayer) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      float v[G];
      to_floats(h[i], v);
      part[i] = tree_sum(v);
    }
    auto squares_about = [&](float centre) {
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const int col = first_col + (t + i * tpr) * G;
        float v[G];
#pragma unroll
        for (int e = 0; e < G; ++e) {
          const float d = element_float(h[i], e) - centre;
          // Unfused: where in_row is constant the compiler would fuse d * d into the tree's adds,
          // and not where it selects per element, so the kernels would differ in the last bits.
          v[e] = in_row(i, col, e) ? mul_unfused(d, d) : 0.0f;
        }
        part[i] = tree_sum(v);
      }
      return tree_sum(part);
    };
    if constexpr (Moments::kUsed) {
      const float slice_sum = moments.slice_total(tree_sum(part), 0);
      const float slice_squares =
          moments.slice_total(squares_about(slice_centre(slice_sum, moments.slice_elems)), 1);
      moments.combine(slice_sum, slice_squares, &mean, &total);
    } else if constexpr (Moments::kTree) {
      // Whole groups only (slots past the row hold zeros, which the tree leaves out).
      SumM2 group[kItems];
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const float centre = part[i] * (1.0f / static_cast<float>(G));  // exact
        float v[G];
#pragma unroll
        for (int e = 0; e < G; ++e) {
          const float d = element_float(h[i], e) - centre;
          v[e] = mul_unfused(d, d);
        }
        group[i] = {part[i], tree_sum(v)};
      }
      const int row_log2 = log2_of_power_of_two(G) + floor_log2(moments.groups);
      const float inv_n = exp2_int(-row_log2);  // 1 / n, exact
      fold_moments_high_first<kItems / 2, Moments::kEmptyNodes>(group, tpr, moments.tpr_log2,
                                                                moments.groups, inv_n);
      const SumM2 row_moments = moments.reduce(group[0], moments.groups, inv_n);
      mean = row_moments.sum * inv_n + 0.0f;  // the default's sum / n, bit for bit
      total = row_moments.m2;
    } else {
      // + 0.0f turns a -0 sum into +0, so that the sign of a zero mean (an all -0 row) does not
      // depend on how many zero slots the tree held.
      mean = reduce(tree_sum(part), 0) / static_cast<float>(n) + 0.0f;
      total = reduce(squares_about(mean), 1);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      float v[G];
#pragma unroll
      for (int e = 0; e < G; ++e) {
        const float f = element_float(h[i], e);
        v[e] = f * f;
      }
      part[i] = tree_sum(v);
    }
    if constexpr (kPFirst) {
      float m = 0.0f;
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const int col = first_col + (t + i * tpr) * G;
        if (in_row(i, col, 0)) {
          float hv[G], wv[G], bv[G];
          to_floats(h[i], hv);
          affine(i, col, wv, bv);
#pragma unroll
          for (int e = 0; e < G; ++e) kept_y[i][e] = hv[e] * wv[e];  // output_values' product
          if (active) m = item_max_abs(i, m, kept_y[i], col);
        }
      }
      const SumMax row_values = max_rule.reduce(tree_sum(part), m);
      total = row_values.sum;
      max_p = row_values.max;
    } else {
      total = reduce(tree_sum(part), 0);
    }
  }
  const float rstd = rsqrtf(total / static_cast<float>(n) + a.eps);
  // RMSNorm: a 16-bit row waits for its outputs packed, as loaded, rather than as the floats its
  // sum of squares unpacked (twice the registers: rms_norm bf16 spilled on the registers and
  // cluster paths); so does LayerNorm at more than four groups per thread (five: 24
  // bytes spilled otherwise). LayerNorm at up to four, the fused add and the plain form (whose
  // single tail has registers to spare: no spill, and 0.02-0.09 us faster) do better left to the
  // compiler (ptxas).
  // (Not where kPFirst: the row is spent, kept_y holds what the outputs need.)
  if constexpr (sizeof(TR) == 2 && (!K::kLayer || kItems > 4) && !K::kAdd &&
                kForm != OutputForm::kPlain && !kPFirst) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
#pragma unroll
      for (int w = 0; w < G * 2 / 4; ++w) opaque_register(h[i].words[w]);
    }
  }
  // The outputs. The fast paths take the weight_after_cast branch once for the whole tail.
  auto write_outputs = [&](auto cast_first) {
    // Item i's output values.
    auto item_values = [&](int i, int col, float (&y)[G]) {
      float hv[G], wv[G], bv[G];
      to_floats(h[i], hv);
      affine(i, col, wv, bv);
      output_values<K>(static_cast<bool>(cast_first), hv, wv, bv, mean, rstd, y);
    };
    if constexpr (kKeepY) {
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const int col = first_col + (t + i * tpr) * G;
        if (in_row(i, col, 0)) {
          if constexpr (kPFirst) {
#pragma unroll
            for (int e = 0; e < G; ++e) kept_y[i][e] *= rstd;  // as output_values forms y
          } else {
            item_values(i, col, kept_y[i]);
          }
        }
      }
    }
    auto y_of = [&](int i, int col, float (&y)[G]) {
      if constexpr (kKeepY) {
#pragma unroll
        for (int e = 0; e < G; ++e) y[e] = kept_y[i][e];
      } else {
        item_values(i, col, y);
      }
    };
    [[maybe_unused]] float inverse_scale = 1.0f;
    if constexpr (K::kFp8Out) {
      float max_abs = 0.0f;
      if constexpr (kPFirst) {
        max_abs = max_p * rstd;
      } else if (a.dynamic_scale != nullptr) {  // uniform: every thread of the block reduces
#pragma unroll
        for (int i = 0; i < kItems; ++i) {
          const int col = first_col + (t + i * tpr) * G;
          if (active && in_row(i, col, 0)) {
            float y[G];
            y_of(i, col, y);
            max_abs = item_max_abs(i, max_abs, y, col);
          }
        }
        max_abs = reduce_max(max_abs);
      }
      inverse_scale =
          fp8_inverse_for_row<K>(a, row, max_abs, static_scale, active && writes_stats);
    }

    if (!active || !writes_outputs) return;
    using TO = typename K::TO;
    TO* out_row = static_cast<TO*>(a.out) + row * a.out_stride;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int col = first_col + (t + i * tpr) * G;
      if (in_row(i, col, 0)) {
        float y[G];
        y_of(i, col, y);
        if constexpr (K::kFp8Out) {
          store_item<K>(out_row, col, n, quantize_output<K>(a, y, inverse_scale), vector_item(i));
        } else {
          store_item<K, TO>(out_row, col, n, y, vector_item(i));
        }
      }
    }
    if (kForm != OutputForm::kPlain && writes_stats) {
      if (a.rstd != nullptr) a.rstd[row] = rstd;
      if (K::kLayer && a.mean != nullptr) a.mean[row] = mean;
    }
  };
  if constexpr (kForm == OutputForm::kPlain || without_cast_first_outputs<K>()) {
    write_outputs(ConstantFlag<false>{});
  } else if constexpr (kForm == OutputForm::kFlagPerElement) {
    write_outputs(a.weight_after_cast);  // one tail, the flag per element
  } else if (a.weight_after_cast) {
    write_outputs(ConstantFlag<true>{});
  } else {
    write_outputs(ConstantFlag<false>{});
  }
}

// The second half of the registers and cluster kernels (finish_row_impl says what it does). An
// fp8 output whose y stays in registers takes its max beside the sum where `max_rule` is
// MaxBesideSum: the registers kernel passes it for a dynamic scale only, from a path of its own
// (norm_registers_kernel says why).
template <class K, RowFit kFit, OutputForm kForm, int kItems, class Affine, class Reduce,
          class ReduceMax, class StaticScale, class Moments = NoSliceMoments,
          class MaxRule = MaxAfterSum>
FUSEKIT_DEVICE void finish_row(const NormKernelArgs& a, int64_t row, bool active, int t, int tpr,
                               int first_col, int items,
                               Packed<typename K::TX, K::kGroup> (&x)[kItems],
                               Packed<typename K::TR, K::kGroup> (&h)[kItems],
                               const Affine& affine, const Reduce& reduce,
                               const ReduceMax& reduce_max, bool writes_stats,
                               const StaticScale& static_scale, const Moments& moments = {},
                               bool writes_outputs = true, const MaxRule& max_rule = {}) {
  constexpr bool kPFirst = kFp8KeepsY<K, kItems> && MaxRule::kUsed;
  finish_row_impl<K, kFit, kForm, kPFirst>(a, row, active, t, tpr, first_col, items, x, h, affine,
                                           reduce, reduce_max, writes_stats, static_scale,
                                           moments, writes_outputs, max_rule);
}

// Loads a row's slice into registers (thread t: groups t, t + tpr, ... from element first_col on,
// `items` of them) and finishes it (finish_row). The registers kernel's row. (The cluster kernel
// loads its slices with load_row_item and weight_group instead; written out here, the loads keep
// ptxas's allocation for these hot kernels: through the helpers, 72 -> 81 registers for the fused
// add, which costs it a block per SM.)
template <class K, RowFit kFit, OutputForm kForm, int kItems, bool kWeightAtOutput,
          bool kHoldAffine, class Reduce, class ReduceMax, class Moments, class MaxRule>
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
  // affine at two groups spills otherwise).
  constexpr bool kEarlyWeight =
      K::kLayer ? kItems * 2 * G * static_cast<int>(sizeof(TW)) <= 16 * 4 || kHoldAffine
                : !kWeightAtOutput;
  const TW* bias = K::kLayer ? static_cast<const TW*>(a.bias) : nullptr;
  Packed<TX, G> x[kItems];
  Packed<TR, G> h[kItems];
  Packed<TW, G> w[kItems];
  [[maybe_unused]] Packed<TW, G> b[K::kLayer && kEarlyWeight ? kItems : 1];
  const TX* x_row = static_cast<const TX*>(a.x) + row * a.x_stride;
  const TR* r_row = static_cast<const TR*>(a.residual) + row * a.residual_stride;
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
  auto affine = [&](int i, int col, float (&wv)[G], float (&bv)[G]) {
    // Late (LayerNorm at four groups, the fused add with kWeightAtOutput): from cache, as every
    // row reads them, with registers kept for occupancy while the row stays in registers across
    // its reductions.
    if constexpr (!kEarlyWeight) w[i] = weight_item(i, col);
    to_floats(w[i], wv);
    if constexpr (!kPlain) {
#pragma unroll
      for (int e = 0; e < G; ++e) wv[e] += weight_offset;
    }
    if constexpr (K::kLayer) {
      if constexpr (kEarlyWeight) {
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
  finish_row<K, kFit, kForm>(a, row, active, t, tpr, first_col, items, x, h, affine, reduce,
                             reduce_max, writes_stats, static_scale, moments, writes_outputs,
                             max_rule);
}

// LayerNorm's kernels of shared and split rows (NormConfig::output_parts, split_blocks) hold the
// weight and bias beside the row at every group count, built for one block per SM for the
// registers: their grids hold
// at most a quarter of a block per SM (the heuristic's rule), so occupancy costs them nothing,
// while loading the affine after the reductions puts an L2 round trip on a one-row call's path.
template <class K, bool kSharedRows>
inline constexpr bool kSharedRowsHoldAffine = K::kLayer && kSharedRows;

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
template <class K, RowFit kFit, int kItems = K::kMaxItems, bool kWeightAtOutput = false,
          bool kSharedRows = false, int kThreadsPerRow = 0, bool kPlain = false,
          bool kPowerOfTwoRows = false, bool kSplitRows = false>
__global__ void __launch_bounds__(K::kMaxThreads,
                                  (kSharedRowsHoldAffine<K, kSharedRows || kSplitRows>
                                       ? 1
                                       : K::kMinBlocksPerSm))
    norm_registers_kernel(NormKernelArgs a) {
  if constexpr (!warp_size_compiled<K::kWarp>()) return;  // HIP: other warp size (platform.h)
  if constexpr (kSplitRows && !clusters_compiled()) return;
  __shared__ float scratch[2][K::kScratch];
  __shared__ ClusterMailbox gathers[2];  // kSplitRows: one a reduction (at most two a row)
  constexpr bool kFixed = kThreadsPerRow > 0;
  constexpr bool kExactOrLastPartial = kFit == RowFit::kExact || kFit == RowFit::kLastPartial;
  static_assert(!kPlain || (kFixed && kExactOrLastPartial),
                "plain: fixed kernels of whole rows only");
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
  // How reduction k (scratch[k]; those of two values use 0) publishes its threads' values.
  auto publish = [&](int k) {
    if constexpr (kSplitRows) {
      return ClusterGather{&gathers[k], t, 1 << parts_log2};
    } else {
      return BlockPublish{};
    }
  };
  auto reduce = [&](float v, int k) {
    return row_sum<K::kWarp, K::kMaxWarpsPerRow>(v, tpr, scratch[k], publish(k));
  };
  // The row's max of magnitudes (fp8 outputs with a dynamic scale): in the fewest instructions
  // where the row's thread count is a launch argument (the large batches' kernels), by shuffles
  // where it is fixed (decode rows; reduce.cuh's RowMaxForm).
  constexpr RowMaxForm kMaxForm = kFixed ? RowMaxForm::kShuffles : RowMaxForm::kCompact;
  // fp8 output only (RMSNorm, whose sum used scratch[0]), where y is formed again for the codes.
  auto reduce_max = [&](float v) {
    return row_magnitude_max<K::kWarp, kMaxForm>(v, tpr, scratch[1], publish(1));
  };
  // fp8 output with a dynamic scale: its sum of squares and max|h * w| in one reduction.
  auto reduce_sum_max = [&](float v, float m) {
    return row_sum_max<K::kWarp, K::kMaxWarpsPerRow, kMaxForm>(v, m, tpr, scratch[0],
                                                               scratch[1], publish(0));
  };
  // LayerNorm's moments in one reduction (TreeMoments) for rows of a power-of-two number of whole
  // groups: the exact kernels' rows unless kItems is odd, and the other kernels' where
  // kPowerOfTwoRows. Exact rows' groups are tpr x kItems, a constant where tpr is: then so is
  // every merge's count, and no test for empty nodes remains.
  auto reduce_moments = [&](SumM2 v, int groups, float inv_n) {
    return row_moments<K::kWarp, K::kMaxWarpsPerRow, kFit != RowFit::kExact>(
        v, tpr, groups, inv_n, scratch[0], scratch[1], publish(0));
  };
  constexpr bool kTreeMoments =
      K::kLayer && (kFit == RowFit::kExact ? (kItems & (kItems - 1)) == 0 : kPowerOfTwoRows);
  const auto moments = [&] {
    if constexpr (kTreeMoments) {
      return TreeMoments<decltype(reduce_moments), kFit != RowFit::kExact>{
          kFit == RowFit::kExact ? tpr * kItems : static_cast<int>(a.cols) / K::kGroup,
          kFixed ? log2_of_power_of_two(kThreadsPerRow) : a.threads_per_row_log2,
          reduce_moments};
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
  auto slice = [&](const auto& max_rule) {
    normalize_row_slice<K, kFit, kForm, kItems, kWeightAtOutput,
                        kSharedRowsHoldAffine<K, kSharedRows || kSplitRows>>(
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
