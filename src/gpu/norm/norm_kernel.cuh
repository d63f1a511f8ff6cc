// RMSNorm / LayerNorm kernels, with or without the fused residual add: device code only. Here the
// second half every registers-held row shares (finish_row: from the row in registers to its
// outputs); the kernels are norm_registers_kernel.cuh, norm_cluster_kernel.cuh and
// norm_staged_kernel.cuh, and how a single group is loaded and stored is in norm_group_io.cuh.
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
// row (see finish_row), so results do not depend on how many threads share a row; the
// staged path uses the same split with T = 512 and its own order. kLoad, the width of each memory
// access, adapts to alignment without changing what is summed in which order. Results are
// therefore bitwise identical at any alignment and for any number of rows in the launch.
//
// Numerics. Sums in float32; LayerNorm never squares about zero: each group's squares are taken
// about its own mean and merged pairwise up the row's tree (TreeMoments, for rows of a power-of-two
// number of whole groups: one reduction); the other rows with a 16-bit output take theirs about
// the mean of the row's first group, as plain sums beside the sum (ShiftedMoments: one reduction,
// a bounded cancellation), and the rest about the row's mean once a first reduction has it (two).
// With a fused add, h = round_to<TR>(x + r) is both written and normalized.
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
  // One tail with the weight_after_cast flag tested per element (the kernels with bounds, and
  // the cluster kernels but RMSNorm's exact rows: norm_cluster_kernel.cuh says why).
  kFlagPerElement,
  // The flag taken once, a tail for each value (the bounds-free registers kernels, RMSNorm's
  // exact rows on the cluster path).
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
// kPackedRow (16-bit rows without the add; LayerNorm's of two reductions): the row waits packed
// through the reductions, not as the floats that its sum and its squares unpacked; for kernels
// built for more blocks an SM than their floats would leave registers for
// (norm_registers_kernel.cuh).
// kRowOfThreadItems: the row is tpr x kItems groups, tpr a power of two known at compile time
// (the registers kernel's exact rows of a fixed thread count), so its length is a constant.
// kPairwiseAdd: the fused add's h by pairs of 16-bit values (pairwise_sum), where the kernel asks
// for it (norm_registers_kernel.cuh says which do); the same bits either way.
// `after_squares(v)` runs once RMSNorm's squares are summed over the thread's groups (v, the
// thread's value for the reduction), before the reduction (not where kPFirst): where the
// registers kernel issues the weight's loads in its decode kernels (normalize_row_slice says
// why); nothing elsewhere (NothingAfterSquares).
template <class K, RowFit kFit, OutputForm kForm, bool kPFirst, bool kPackedRow,
          bool kRowOfThreadItems, bool kPairwiseAdd, int kItems, class Affine, class Reduce,
          class ReduceMax, class StaticScale, class Moments, class MaxRule, class AfterSquares>
FUSEKIT_DEVICE void finish_row_impl(const NormKernelArgs& a, int64_t row, bool active, int t,
                                    int tpr, int first_col, int items,
                                    Packed<typename K::TX, K::kGroup> (&x)[kItems],
                                    Packed<typename K::TR, K::kGroup> (&h)[kItems],
                                    const Affine& affine, const Reduce& reduce,
                                    const ReduceMax& reduce_max, bool writes_stats,
                                    const StaticScale& static_scale, const Moments& moments,
                                    bool writes_outputs, const MaxRule& max_rule,
                                    const AfterSquares& after_squares) {
  using TX = typename K::TX;
  using TR = typename K::TR;
  constexpr int G = K::kGroup;
  const int n = static_cast<int>(a.cols);  // <= 262144 on these paths
  static_assert(!kPackedRow || (!K::kAdd && !K::kFp8Out && sizeof(TR) == 2 &&
                                (!K::kLayer || (!Moments::kUsed && !Moments::kTree))),
                "a packed row: 16-bit, no add, no fp8 output, LayerNorm's in two reductions");
  // Makes h's words opaque to the compiler (opaque_register), so that what follows unpacks them
  // again and nothing unpacked before stays live.
  auto repack = [&] {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
#pragma unroll
      for (int w = 0; w < G * 2 / 4; ++w) opaque_register(h[i].words[w]);
    }
  };
  // Whether item i of this thread lies in the row (and element e of it, for partial groups).
  auto in_row = [&](int i, int col, int e) {
    if constexpr (kFit == RowFit::kAny) return i < items && col + e < n;
    return item_whole<K, kFit, kItems>(i) ? item_in_row<kFit, kItems>(i, items, col, n)
                                          : col + e < n;
  };
  auto vector_item = [](int i) { return item_vector<K, kFit, kItems>(i); };
  // v / n. Where the row is tpr x kItems groups (kRowOfThreadItems) and kItems x G is a power of
  // two, so is n, and v * 2^-log2(n) rounds the same real number as v / n: the same bits, one
  // multiply by a constant in place of the IEEE division's instructions and slow-path branch on
  // the path from the reduction to the outputs (bench/NOTES.md, "Norm v69").
  auto over_n = [&](float v) {
    constexpr int kThreadElems = kItems * G;
    if constexpr (kRowOfThreadItems && (kThreadElems & (kThreadElems - 1)) == 0) {
      return v * exp2_int(-(floor_log2(tpr) + log2_of_power_of_two(kThreadElems)));
    } else {
      return v / static_cast<float>(n);
    }
  };
  // h = x + residual, rounded to the residual's dtype, is written back out (residual_out) before
  // the reductions, so that the stores are under way while the row is reduced. Where kPairwiseAdd
  // asks for it and x and the residual are one 16-bit type, by pairs, packed (pairwise_sum: the
  // same bits). Under ShiftedMoments every thread of the row has read the row's first group of x
  // and the residual for its shift (row_shift), and residual_out may be the residual (the in-place
  // form): that group is stored once the reduction, which needs every thread's shifted sums, is
  // done (holds_first_group).
  constexpr bool kPairwiseSum = kPairwiseAdd && std::is_same_v<TX, TR> && sizeof(TR) == 2;
  [[maybe_unused]] const bool holds_first_group = first_col + t * G == 0;
  auto first_group_deferred = [&](int i) {
    return Moments::kShifted && i == 0 && holds_first_group;
  };
  if constexpr (K::kAdd) {
    TR* r_out = static_cast<TR*>(a.residual_out) +
                 row_offset<K, RowTensor::kResidualOut>(a, row);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if constexpr (kPairwiseSum) {
        h[i] = pairwise_sum(x[i], h[i]);
        const int col = first_col + (t + i * tpr) * G;
        if (active && writes_outputs && in_row(i, col, 0) && !first_group_deferred(i)) {
          store_item<K, TR>(r_out, col, n, h[i], vector_item(i));
        }
      } else {
        float v[G];
#pragma unroll
        for (int e = 0; e < G; ++e) v[e] = element_float(x[i], e) + element_float(h[i], e);
        h[i] = pack_floats<TR>(v);
        to_floats(h[i], v);
        const int col = first_col + (t + i * tpr) * G;
        if (active && writes_outputs && in_row(i, col, 0) && !first_group_deferred(i)) {
          store_item<K, TR>(r_out, col, n, v, vector_item(i));
        }
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
  float total = 0.0f;
  [[maybe_unused]] float shifted_variance = 0.0f;  // Moments::kShifted's variance
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
    } else if constexpr (Moments::kShifted) {
      const float shift = moments.shift;  // 0 where inactive
      float shifted[kItems], squares[kItems];
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const int col = first_col + (t + i * tpr) * G;
        float d[G], d2[G];
#pragma unroll
        for (int e = 0; e < G; ++e) {
          d[e] = in_row(i, col, e) ? element_float(h[i], e) - shift : 0.0f;
          d2[e] = mul_unfused(d[e], d[e]);  // unfused: as squares_about says
        }
        shifted[i] = tree_sum(d);
        squares[i] = tree_sum(d2);
      }
      if constexpr (kPackedRow) repack();
      const SumPair sums = moments.reduce(tree_sum(shifted), tree_sum(squares));
      if constexpr (K::kAdd) {  // every shift of the row is formed by now
        if (active && writes_outputs && holds_first_group) {
          TR* r_out = static_cast<TR*>(a.residual_out) +
                       row_offset<K, RowTensor::kResidualOut>(a, row);
          store_item<K, TR>(r_out, 0, n, h[0], vector_item(0));
        }
      }
      const float shifted_mean = over_n(sums.a);
      mean = shift + shifted_mean + 0.0f;  // + 0.0f: as the default's
      shifted_variance = fmaxf(over_n(sums.b) - mul_unfused(shifted_mean, shifted_mean), 0.0f);
    } else {
      if constexpr (kPackedRow) repack();
      // + 0.0f turns a -0 sum into +0, so that the sign of a zero mean (an all -0 row) does not
      // depend on how many zero slots the tree held.
      mean = over_n(reduce(tree_sum(part), 0)) + 0.0f;
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
      const float thread_squares = tree_sum(part);  // (tree_sum folds part in place)
      after_squares(thread_squares);
      total = reduce(thread_squares, 0);
    }
  }
  const float variance = Moments::kShifted ? shifted_variance : over_n(total);
  const float rstd = rsqrtf(variance + a.eps);
  // RMSNorm: a 16-bit row waits for its outputs packed, as loaded, rather than as the floats its
  // sum of squares unpacked (twice the registers: rms_norm bf16 spilled on the registers and
  // cluster paths); so does LayerNorm at more than four groups per thread (five: 24
  // bytes spilled otherwise). LayerNorm at up to four, the fused add and the plain form (whose
  // single tail has registers to spare: no spill, and 0.02-0.09 us faster) do better left to the
  // compiler (ptxas), unless kPackedRow.
  // (Not where kPFirst: the row is spent, kept_y holds what the outputs need.)
  if constexpr (kPackedRow || (sizeof(TR) == 2 && (!K::kLayer || kItems > 4) && !K::kAdd &&
                               kForm != OutputForm::kPlain && !kPFirst)) {
    repack();
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
    TO* out_row = static_cast<TO*>(a.out) + row_offset<K, RowTensor::kOut>(a, row);
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

// finish_row's hook after RMSNorm's squares where a kernel has nothing to do there.
struct NothingAfterSquares {
  FUSEKIT_DEVICE void operator()(float) const {}
};

// The second half of the registers and cluster kernels (finish_row_impl says what it does). An
// fp8 output whose y stays in registers takes its max beside the sum where `max_rule` is
// MaxBesideSum: the registers kernel passes it for a dynamic scale only, from a path of its own
// (norm_registers_kernel.cuh says why).
template <class K, RowFit kFit, OutputForm kForm, bool kPackedRow = false,
          bool kRowOfThreadItems = false, bool kPairwiseAdd = false, int kItems,
          class Affine, class Reduce, class ReduceMax, class StaticScale,
          class Moments = NoSliceMoments, class MaxRule = MaxAfterSum,
          class AfterSquares = NothingAfterSquares>
FUSEKIT_DEVICE void finish_row(const NormKernelArgs& a, int64_t row, bool active, int t, int tpr,
                               int first_col, int items,
                               Packed<typename K::TX, K::kGroup> (&x)[kItems],
                               Packed<typename K::TR, K::kGroup> (&h)[kItems],
                               const Affine& affine, const Reduce& reduce,
                               const ReduceMax& reduce_max, bool writes_stats,
                               const StaticScale& static_scale, const Moments& moments = {},
                               bool writes_outputs = true, const MaxRule& max_rule = {},
                               const AfterSquares& after_squares = {}) {
  constexpr bool kPFirst = kFp8KeepsY<K, kItems> && MaxRule::kUsed;
  finish_row_impl<K, kFit, kForm, kPFirst, kPackedRow, kRowOfThreadItems, kPairwiseAdd>(
      a, row, active, t, tpr, first_col, items, x, h, affine, reduce, reduce_max, writes_stats,
      static_scale, moments, writes_outputs, max_rule, after_squares);
}

}  // namespace fusekit::gpu
