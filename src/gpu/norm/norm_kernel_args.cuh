// What every norm kernel is given: NormKernelArgs (the runtime arguments, one struct passed by
// value) and NormTraits (the compile-time ones: kind, add, dtypes, access width, warp size, fp8
// output format, and the register budgets that follow from them). norm_kernel.cuh says why the
// kernels are shaped as they are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/fast_divide.h"
#include "core/fp8.h"
#include "gpu/common/convert.cuh"
#include "gpu/norm/norm_config.h"
#include "gpu/platform.h"
#include "norm/norm_problem.h"

namespace fusekit::gpu {

using detail::NormKind;

// Rows in runs (NormProblem), for the kernels built for them (NormTraits::kRuns): row r of x
// starts r * x_stride + (r / rows) * x_skip elements on, and likewise out's (row_offset below).
// 32-bit fields (core/validate.h, common_run_rows, bounds them), so that they fit where the fp8
// forms keep their format's spec (NormKernelArgs).
struct NormRowRuns {
  int32_t rows;  // rows per run
  int32_t x_skip;
  int32_t out_skip;
  detail::FastDivider divider;  // by `rows`
};

// Everything a norm kernel reads besides its template parameters. Passed by value.
//
// Its size counts: kernels whose code differed only in the size of this block replayed 1.17-1.34x
// slower at decode batches with 576 bytes than with 184 (bench/NOTES.md, "LayerNorm's moments in
// one reduction"). So the runs share their bytes with the fp8 output's format spec: the kernels
// of rows in runs have no fp8 output, and the others never read the runs (216 bytes).
//
// Its order counts too. A kernel reads its arguments from the constant bank (CUDA: from 0x210),
// and each 64-byte line it touches first misses in the SM's constant cache; a miss between a
// call's start and its first load is on the path of every decode call. The library's 512-thread
// RMSNorm kernel stalled 2.5-3x as long on constant misses as a lean kernel of the same path whose
// arguments lie in one line, and took 0.3 us longer alone (bench/NOTES.md, "rms_norm [256,
// 8192]: the library's kernel and the lean rungs under a profiler"). So the fields come in the
// order the kernels' paths read them: first (with the driver's memory descriptor at 0x208, one
// line) what every registers kernel reads before its loads and at its end; then what the fused
// add, LayerNorm and the kernels of runtime shapes add; the rest after.
struct NormKernelArgs {
  // Every kernel's path (the first 48 bytes).
  const void* x;
  void* out;
  const void* weight;  // may be null (layer norm): 1
  int64_t x_stride;
  int64_t out_stride;
  float eps;
  uint8_t trigger_after_writes;  // registers path: NormConfig::trigger_after_writes
  // registers path: log2 of NormConfig::output_parts (or split_blocks), and of threads_per_row
  uint8_t output_parts_log2;
  uint8_t threads_per_row_log2;
  bool weight_after_cast;
  // The fused add's and LayerNorm's, and the kernels of a runtime row shape (the next line).
  const void* residual;
  void* residual_out;
  int64_t residual_stride;
  int64_t residual_out_stride;
  const void* bias;  // may be null: 0
  int64_t rows;
  int64_t cols;
  float weight_offset;
  int items;  // registers and cluster paths: groups per thread
  // The rest: the other paths' shape, the statistics, the fp8 output.
  int rows_per_block;   // registers path
  int threads_per_row;  // a power of two
  int cluster_blocks;   // cluster path: blocks per row (one cluster)
  float scale_upper_bound;
  int64_t smem_groups;  // staged path: groups of the row kept in shared memory
  float* rstd;          // may be null
  float* mean;          // may be null
  const float* static_scale;  // fp8 output: [1], or null when dynamic_scale is set
  float* dynamic_scale;       // fp8 output: [rows], written
  union {
    detail::Fp8Spec fp8{};  // fp8 output: its format (read by Fp8FormatInArgs kernels)
    NormRowRuns runs;       // rows in runs (NormTraits::kRuns kernels)
  };
};

// The first line's fields (above), and what the order keeps apart.
static_assert(offsetof(NormKernelArgs, weight_after_cast) < 48 &&
                  offsetof(NormKernelArgs, residual) == 48 && offsetof(NormKernelArgs, items) < 112,
              "NormKernelArgs: the fields every kernel's path reads lie in its first 48 bytes, the "
              "fused add's, LayerNorm's and the runtime shapes' in the next 64");

static_assert(sizeof(NormRowRuns) <= sizeof(detail::Fp8Spec) &&
                  alignof(NormRowRuns) <= alignof(detail::Fp8Spec),
              "the runs must fit where the fp8 spec is, adding no bytes to the arguments");

// The row tensors of a norm call.
enum class RowTensor { kX, kOut, kResidual, kResidualOut };

// Elements from a row tensor's base to the start of row `row`: row * its stride, and in the
// kernels of rows in runs (K::kRuns, which have no residual) NormProblem::row_offset, the division
// by the run length a multiply-high (rows < 2^31). The other kernels' code is what it would be
// without runs: those are built apart because a run term, even behind a branch every thread takes
// alike, cost the usual decode call 1-16% (bench/NOTES.md, "Rows in runs").
template <class K, RowTensor kTensor>
FUSEKIT_DEVICE int64_t row_offset(const NormKernelArgs& a, int64_t row) {
  constexpr bool kX = kTensor == RowTensor::kX, kOut = kTensor == RowTensor::kOut;
  constexpr bool kResidual = kTensor == RowTensor::kResidual;
  const int64_t stride = kX ? a.x_stride
                         : kOut ? a.out_stride
                         : kResidual ? a.residual_stride : a.residual_out_stride;
  if constexpr (K::kRuns && (kX || kOut)) {
    const int32_t skip = kX ? a.runs.x_skip : a.runs.out_skip;
    return row * stride +
           static_cast<int64_t>(a.runs.divider.divide(static_cast<uint32_t>(row))) * skip;
  } else {
    return row * stride;
  }
}

template <NormKind kKind_, bool kAdd_, typename TX_, typename TW_, typename TR_, int kLoad_,
          int kWarp_, class Fp8_ = void, bool kRuns_ = false>
struct NormTraits {
  static constexpr NormKind kKind = kKind_;
  static constexpr bool kAdd = kAdd_;
  static constexpr bool kLayer = kKind_ == NormKind::kLayer;
  using TX = TX_;  // x and out
  using TW = TW_;  // weight and bias
  using TR = TR_;  // residual and residual_out; the normalized values h (TX when !kAdd)
  // void: out is TX; else out holds fp8 codes, of the format Fp8E4M3FN or of the one the
  // arguments name (Fp8FormatInArgs, gpu/common/fp8_pack.cuh).
  using Fp8 = Fp8_;
  static constexpr bool kFp8Out = !std::is_void_v<Fp8_>;
  // An fp8 output in the format NVIDIA's GPUs use, e4m3fn, which the platform's kernels take as
  // a constant (CUDA; gpu/common/fp8_pack.cuh).
  static constexpr bool kHardwareFp8 =
      std::is_same_v<Fp8_, detail::Fp8E4M3FN> && platform_has_hardware_e4m3fn();
  // out in x's dtype, or e4m3fn codes on CUDA: the outputs the latency kernels (fixed thread
  // counts, split rows) are built for.
  static constexpr bool kOutputInHardware = !kFp8Out || kHardwareFp8;
  using TO = std::conditional_t<kFp8Out, uint8_t, TX_>;  // out
  static_assert(!kFp8Out || kKind_ == NormKind::kRms, "fp8 output is an RMSNorm form");
  // Rows in runs (NormRowRuns, row_offset): the kernels of rms_norm and layer_norm (no fused add,
  // no fp8 output) built for them apart from the rest, fewer of them (pick_norm_kernel).
  static constexpr bool kRuns = kRuns_;
  static_assert(!kRuns || (!kAdd_ && !kFp8Out), "rows in runs: rms_norm and layer_norm only");
  static constexpr int kLoad = kLoad_;
  static constexpr int kWarp = kWarp_;
  static constexpr int kGroup = 16 / static_cast<int>(sizeof(TX));
  static constexpr int kMaxItems = 4;  // registers path: groups per thread (32 bf16 / 16 fp32)
  // Staged path: groups in flight per thread in pass 1 (two inputs each when adding).
  static constexpr int kBatch = kAdd ? 2 : 4;
  static constexpr int kOutBatch = kLayer ? 1 : 2;  // and pass 2 (which also holds weight, bias)
  static constexpr int kMaxThreads = 512;       // registers path
  // Registers and cluster paths: 512-thread blocks per SM that the register budget is built for
  // (norm_config.h says which; the launch heuristic reads the same rule).
  static constexpr bool kSameDtypes = std::is_same_v<TW_, TX_> && std::is_same_v<TR_, TX_>;
  static constexpr int kMinBlocksPerSm =
      norm_min_blocks_per_sm(kAdd, kLayer, sizeof(TW_) == sizeof(TX_), kSameDtypes,
                             std::is_same_v<TX_, Half>);
  // Exact registers kernels of one row per block with the row's thread count a template argument
  // (128, 256 and 512; norm_registers_kernel): the decode and mid-batch shapes of 16-bit rows,
  // where a call's time is mostly its instruction latency. For the fp8 forms also their large
  // batches, where it is their instruction count (bench/NOTES.md, "Norm v37"), in e4m3fn on
  // CUDA: with the conversion in software (HIP) the count's share of the instructions is
  // smaller, and each fp8 kernel set is already among the longest compiles of the build (these 54
  // more took 27% longer on HIP, per architecture). None for rows in runs (kRuns). These forms
  // also have the one-group kernel of 128 threads for rows of 65-127 groups
  // (one_group_registers_kernel, norm_launch.cuh).
  static constexpr bool kFixedRowThreads =
      kSameDtypes && sizeof(TX_) == 2 && kOutputInHardware && !kRuns;
  // And each of those also in the plain form (OutputForm::kPlain, plain_norm_call): the common
  // call of a decode step, a weight (and LayerNorm's bias) and nothing else. Not the fp8 forms.
  static constexpr bool kPlainBuilt = kFixedRowThreads && !kFp8Out;
  // Exact registers kernels whose rows' outputs are shared among blocks (NormConfig::output_parts):
  // every form but the fused add's fp8 ones, whose usual call updates the residual in place, which
  // no shared row may (each form built is some thirty kernels more). Nor rows in runs.
  static constexpr bool kSharedRowsBuilt = !(kFp8Out && kAdd) && !kRuns;
  // Registers kernels whose rows' threads are split over a cluster's blocks (NormConfig::
  // split_blocks): 16-bit rows of one dtype, the decode shapes of the common models (every form,
  // fp8 outputs in e4m3fn too; the coverings of norm_config.h's split_rows_cover, each also in
  // the plain form where K has it: 38 kernels a form, 19 for the fp8 forms), where the platform
  // has clusters. Not e4m3fnuz on CUDA (AMD's format, whose users run on AMD GPUs): as for the
  // fixed-thread kernels, its 76 would lengthen one of the build's longest units for a latency
  // path no NVIDIA deployment takes. Nor rows in runs.
  static constexpr bool kSplitRowsBuilt = platform_has_clusters() && kSameDtypes &&
                                          sizeof(TX_) == 2 && kOutputInHardware && !kRuns;
  static constexpr int kStagedThreads = 512;    // staged path: two blocks per SM (64 registers)
  static constexpr int kScratch = 512;  // one float per thread of the largest block
  static constexpr int kMaxWarpsPerRow = 512 / kWarp;
};

}  // namespace fusekit::gpu
