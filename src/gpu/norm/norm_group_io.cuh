// The norm kernels' per-group pieces: how one 16-byte group of a row, of the weight and of the bias
// is loaded, turned into floats and stored, for the registers, cluster and staged kernels
// (norm_kernel.cuh, norm_cluster_kernel.cuh, norm_staged_kernel.cuh). RowFit says what a kernel
// knows about how its groups lie in the row, so that a group moves as one vector access where it
// can. Device code only.
#pragma once

#include <cstdint>

#include "gpu/common/reduce.cuh"
#include "gpu/common/vec_io.cuh"
#include "gpu/norm/norm_fp8_output.cuh"
#include "gpu/norm/norm_kernel_args.cuh"
#include "gpu/platform.h"

namespace fusekit::gpu {

// h for one group: x (plus residual, rounded to TR, and written to residual_out when kAdd).
// Loads for all inputs are issued before any store so that they overlap.
template <class K>
FUSEKIT_DEVICE void load_source(const NormKernelArgs& a, int64_t row, int64_t col,
                                float (&h)[K::kGroup]) {
  using TX = typename K::TX;
  using TR = typename K::TR;
  const int64_t n = a.cols;
  load_group<TX, K::kGroup, K::kLoad>(
      static_cast<const TX*>(a.x) + row_offset<K, RowTensor::kX>(a, row), col, n, h);
  if constexpr (K::kAdd) {
    float r[K::kGroup];
    load_group<TR, K::kGroup, K::kLoad>(
        static_cast<const TR*>(a.residual) +
            row_offset<K, RowTensor::kResidual>(a, row), col, n, r);
#pragma unroll
    for (int e = 0; e < K::kGroup; ++e) h[e] = round_to<TR>(h[e] + r[e]);
    store_group<TR, K::kGroup, K::kLoad>(
        static_cast<TR*>(a.residual_out) +
            row_offset<K, RowTensor::kResidualOut>(a, row), col, n, h);
  }
}

// Weight (with offset) and bias for one group; 1 and 0 where absent.
template <class K>
FUSEKIT_DEVICE void load_affine(const NormKernelArgs& a, int64_t col, float (&w)[K::kGroup],
                                float (&b)[K::kGroup]) {
  using TW = typename K::TW;
  if (a.weight != nullptr) {
    load_group<TW, K::kGroup, K::kLoad>(static_cast<const TW*>(a.weight), col, a.cols, w);
#pragma unroll
    for (int e = 0; e < K::kGroup; ++e) w[e] += a.weight_offset;
  } else {
#pragma unroll
    for (int e = 0; e < K::kGroup; ++e) w[e] = 1.0f;
  }
  if (K::kLayer && a.bias != nullptr) {
    load_group<TW, K::kGroup, K::kLoad>(static_cast<const TW*>(a.bias), col, a.cols, b);
  } else {
#pragma unroll
    for (int e = 0; e < K::kGroup; ++e) b[e] = 0.0f;
  }
}

// A bool known at compile time, for code that takes either a runtime or a constant flag.
template <bool kValue>
struct ConstantFlag {
  FUSEKIT_DEVICE constexpr operator bool() const { return kValue; }
};

// y for one group: LayerNorm ((h - mean) * rstd [rounded to TX when cast_first]) * w + b;
// RMSNorm (h * w) * rstd, or (h * rstd rounded to TX) * w when cast_first. RMSNorm weighs h
// before it scales it so that max|y| = max|h * w| * rstd exactly (rounding is monotone and
// rstd > 0): an fp8 output's dynamic scale then comes from the same reduction as the sum of
// squares (finish_row, norm_kernel.cuh). Hot callers pass a constant, having branched on
// a.weight_after_cast once: tested per element, the flag costs two issued instructions per
// element even when false.
template <class K>
FUSEKIT_DEVICE void output_values(bool cast_first, const float (&h)[K::kGroup],
                                  const float (&w)[K::kGroup], const float (&b)[K::kGroup],
                                  float mean, float rstd, float (&y)[K::kGroup]) {
#pragma unroll
  for (int e = 0; e < K::kGroup; ++e) {
    if constexpr (K::kLayer) {
      float v = (h[e] - mean) * rstd;
      if (cast_first) v = round_to<typename K::TX>(v);
      y[e] = v * w[e] + b[e];
    } else if (cast_first) {
      y[e] = round_to<typename K::TX>(h[e] * rstd) * w[e];
    } else {
      y[e] = (h[e] * w[e]) * rstd;
    }
  }
}

// y stored to out (inverse_scale: fp8 output only).
template <class K, typename Index>
FUSEKIT_DEVICE void write_output(const NormKernelArgs& a, int64_t row, Index col,
                                 const float (&h)[K::kGroup], const float (&w)[K::kGroup],
                                 const float (&b)[K::kGroup], float mean, float rstd,
                                 float inverse_scale) {
  using TO = typename K::TO;
  float y[K::kGroup];
  output_values<K>(!without_cast_first_outputs<K>() && a.weight_after_cast, h, w, b, mean, rstd,
                   y);
  TO* out = static_cast<TO*>(a.out) + row_offset<K, RowTensor::kOut>(a, row);
  if constexpr (K::kFp8Out) {
    store_packed<TO, K::kGroup, K::kLoad>(out, col, static_cast<Index>(a.cols),
                                          quantize_output<K>(a, y, inverse_scale));
  } else {
    store_group<TO, K::kGroup, K::kLoad>(out, col, static_cast<Index>(a.cols), y);
  }
}

// How a thread's groups lie in the row, known at compile time. The more a kernel knows, the fewer
// bounds checks and predicates it carries, and the sooner a row's loads are in flight (one-row
// calls 0.2-0.7 us faster, rms_norm [2048, 4096] 5%: bench/NOTES.md, "Norm v8").
enum class RowFit {
  // A partial last group, or accesses narrower than a group: bounds per element.
  kAny,
  // Every group of the row whole and every row 16-byte aligned (N a multiple of the group,
  // kLoad == kGroup): a group moves as one vector access. A thread's later groups may lie past
  // the row's end, or past `items`.
  kWhole,
  // Every thread holds exactly kItems slots of which the first kItems - 1 lie in the row, whole:
  // threads x (kItems - 1) < groups <= threads x kItems (registers path, kItems three or four:
  // norm_config.h's items_last_partial; N = 3584 and 7168 bf16 at four, 2304 and 4608 at three).
  // Only the last slot is tested, so the kernel keeps the exact one's straight-line loads for the
  // rest (bench/NOTES.md, "Norm v26"). With accesses narrower than a group (kLoad < kGroup: N off
  // the group, or rows at addresses or strides that rule out 16-byte accesses) the row's last
  // group may be partial, in each thread's last slot (bench/NOTES.md, "Norm v44"); with
  // full-width ones every group is whole.
  kLastPartial,
  // Whole, and the row (or a cluster block's slice) is exactly threads x kItems groups: every
  // group a thread holds lies in the row, so there are no bounds at all.
  kExact,
};
constexpr int kRowFitCount = 4;

// Whether slot i of a thread's kItems (`items` of them in use), whose group starts at element col
// of a row of n, lies in the row (kAny: starts in it; the group may still end past it): what the
// kernel knows by kFit, tested for the rest.
template <RowFit kFit, int kItems>
FUSEKIT_DEVICE bool item_in_row(int i, int items, int col, int n) {
  if constexpr (kFit == RowFit::kExact) return true;
  if constexpr (kFit == RowFit::kLastPartial) return i < kItems - 1 || col < n;
  return i < items && col < n;
}

// Whether slot i's group, where it lies in the row, is whole: known by kFit (a constant once the
// slot loop is unrolled), else its elements are tested.
template <class K, RowFit kFit, int kItems>
FUSEKIT_DEVICE bool item_whole(int i) {
  if constexpr (kFit == RowFit::kLastPartial && K::kLoad != K::kGroup) return i < kItems - 1;
  return kFit != RowFit::kAny;
}

// Whether slot i's group moves as one vector access: whole, with accesses of full width.
template <class K, RowFit kFit, int kItems>
FUSEKIT_DEVICE bool item_vector(int i) {
  return K::kLoad == K::kGroup && item_whole<K, kFit, kItems>(i);
}

// Whether every group moves as one vector access (kExact and kWhole rows: the cluster kernels'
// fits, whose helpers below know no slot).
template <class K, RowFit kFit>
constexpr bool kEveryItemVector =
    K::kLoad == K::kGroup && (kFit == RowFit::kExact || kFit == RowFit::kWhole);

// One 16-byte group of a row in its storage type: one vector access where `vector` (item_vector),
// else load_group/store_group handle a partial last group and narrower accesses.
template <class K, typename T>
FUSEKIT_DEVICE Packed<T, K::kGroup> load_item(const T* row, int col, int n, bool vector) {
  if (vector) {
    Packed<T, K::kGroup> p;
    p.load(row + col);
    return p;
  }
  return load_group<T, K::kGroup, K::kLoad>(row, col, n);
}

template <class K, typename T>
FUSEKIT_DEVICE void store_item(T* row, int col, int n, const Packed<T, K::kGroup>& p,
                               bool vector) {
  if (vector) {
    p.store(row + col);
  } else {
    store_packed<T, K::kGroup, K::kLoad>(row, col, n, p);
  }
}

template <class K, typename T>
FUSEKIT_DEVICE void store_item(T* row, int col, int n, const float (&v)[K::kGroup], bool vector) {
  if (vector) {
    Packed<T, K::kGroup> p;
#pragma unroll
    for (int e = 0; e < K::kGroup; ++e) p.elems[e] = from_float<T>(v[e]);
    p.store(row + col);
  } else {
    store_group<T, K::kGroup, K::kLoad>(row, col, n, v);
  }
}

// A group of `value` in T's storage.
template <typename T, int G>
FUSEKIT_DEVICE Packed<T, G> filled_group(float value) {
  Packed<T, G> p;
#pragma unroll
  for (int e = 0; e < G; ++e) p.elems[e] = from_float<T>(value);
  return p;
}

// Item `col` of a row in registers, packed in its storage type: x (from the row at x_row), and
// the residual (r_row) in h when adding; zeros where `present` is false.
template <class K, RowFit kFit>
FUSEKIT_DEVICE void load_row_item(const typename K::TX* x_row, const typename K::TR* r_row,
                                  int col, int n, bool present,
                                  Packed<typename K::TX, K::kGroup>& x,
                                  Packed<typename K::TR, K::kGroup>& h) {
  if (present) {
    x = load_item<K>(x_row, col, n, kEveryItemVector<K, kFit>);
    if constexpr (K::kAdd) h = load_item<K>(r_row, col, n, kEveryItemVector<K, kFit>);
  } else {
    x = filled_group<typename K::TX, K::kGroup>(0.0f);
    h = filled_group<typename K::TR, K::kGroup>(0.0f);
  }
}

// A row's first group: one vector access where the kernel's rows are aligned, else element by
// element (not load_unaligned_group, whose paths cost the kernels of unaligned rows registers).
template <class K, typename T>
FUSEKIT_DEVICE Packed<T, K::kGroup> first_group(const T* row, int n) {
  if constexpr (K::kLoad == K::kGroup) return load_group<T, K::kGroup, K::kLoad>(row, 0, n);
  return load_group_elements<T, K::kGroup>(row, 0, n);
}

// ShiftedMoments' shift (norm_moments.cuh): the mean of the row's first min(G, n) values of h =
// x, or round_to<TR>(x + residual) when adding (finish_row's h, bit for bit), which every thread
// of the row forms the same way (the same bits in each, whatever the access width). Where kFit
// says every group is whole and moves as one access, the row holds at least one group: one vector
// load of each tensor with no test of n, and a product by 1 / G (a power of two, so the
// quotient's bits) in place of the division and its slow-path check. The in-place fused add
// writes residual_out over the residual read here, so finish_row stores the row's first group of
// residual_out only once the reduction has every thread's shift behind it.
template <class K, RowFit kFit>
FUSEKIT_DEVICE float row_shift(const typename K::TX* x_row, const typename K::TR* r_row, int n) {
  using TR = typename K::TR;
  constexpr int G = K::kGroup;
  static_assert((G & (G - 1)) == 0, "a group of a power-of-two size");
  constexpr bool kWholeVector = kFit != RowFit::kAny && K::kLoad == G;
  float v[G];
  if constexpr (kWholeVector) {
    Packed<typename K::TX, G> first;
    first.load(x_row);
    to_floats(first, v);
  } else {
    to_floats(first_group<K>(x_row, n), v);
  }
  if constexpr (K::kAdd) {
    Packed<TR, G> r;
    if constexpr (kWholeVector) {
      r.load(r_row);
    } else {
      r = first_group<K>(r_row, n);
    }
#pragma unroll
    for (int e = 0; e < G; ++e) v[e] = round_to<TR>(v[e] + element_float(r, e));
  }
  if constexpr (kWholeVector) {
    return tree_sum(v) * (1.0f / G);
  } else {
    return tree_sum(v) / static_cast<float>(n < G ? n : G);
  }
}

// The group at `col` of the weight, packed, or ones where there is none (exact in every float
// dtype, with no offset: weight_offset_of), so that the outputs take one path whatever is present:
// the branch is around the loads, not around each element's arithmetic. LayerNorm's bias likewise,
// with zeros (RMSNorm: always zeros).
template <class K, RowFit kFit>
FUSEKIT_DEVICE Packed<typename K::TW, K::kGroup> weight_group(const typename K::TW* weight, int col,
                                                             int n) {
  return weight != nullptr ? load_item<K>(weight, col, n, kEveryItemVector<K, kFit>)
                           : filled_group<typename K::TW, K::kGroup>(1.0f);
}

template <class K, RowFit kFit>
FUSEKIT_DEVICE Packed<typename K::TW, K::kGroup> bias_group(const typename K::TW* bias, int col,
                                                           int n) {
  return K::kLayer && bias != nullptr ? load_item<K>(bias, col, n, kEveryItemVector<K, kFit>)
                                      : filled_group<typename K::TW, K::kGroup>(0.0f);
}

FUSEKIT_DEVICE float weight_offset_of(const NormKernelArgs& a) {
  return a.weight != nullptr ? a.weight_offset : 0.0f;
}

// Weight and bias as floats from their packed groups (RMSNorm: bias zeros); the plain form's
// (OutputForm::kPlain: no offset).
template <class K>
FUSEKIT_DEVICE void affine_values(const Packed<typename K::TW, K::kGroup>& w,
                                  const Packed<typename K::TW, K::kGroup>& b,
                                  float (&wv)[K::kGroup], float (&bv)[K::kGroup]) {
  to_floats(w, wv);
  if constexpr (K::kLayer) {
    to_floats(b, bv);
  } else {
#pragma unroll
    for (int e = 0; e < K::kGroup; ++e) bv[e] = 0.0f;
  }
}

// The same with the weight's offset added.
template <class K>
FUSEKIT_DEVICE void affine_values(const Packed<typename K::TW, K::kGroup>& w,
                                  const Packed<typename K::TW, K::kGroup>& b, float weight_offset,
                                  float (&wv)[K::kGroup], float (&bv)[K::kGroup]) {
  affine_values<K>(w, b, wv, bv);
#pragma unroll
  for (int e = 0; e < K::kGroup; ++e) wv[e] += weight_offset;
}

}  // namespace fusekit::gpu
