// The norm launch heuristic for rows longer than the registers path holds (choose_norm_config
// hands them here): a cluster's blocks a row, else the staged path. N alone decides, so a row's
// result does not depend on the batch. The measurements behind the choices are in bench/NOTES.md.
#include <algorithm>

#include "gpu/common/launch_math.h"
#include "gpu/norm/norm_config.h"

namespace fusekit::gpu {

NormConfig choose_long_row_norm_config(const NormShape& shape) {
  const int64_t groups = ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
  NormConfig c;
  // Four groups per thread, as on the registers path at large batches.
  //
  // Where blocks of 512, 256 or 128 threads cover the row exactly, the widest such (N = 32768
  // bf16: 2 blocks of 512; 24576: 3 of 256; 20480: 5 of 128). Otherwise slices of 512 groups
  // (blocks of kNormClusterMinThreads), wider only where the GPU's clusters cannot hold that
  // many, the last one short (N = 18432 bf16: 4 x 512 + 256 groups). Before, every row took
  // blocks of 512 threads, so a row they did not cover left its last block short by up to
  // 2047 groups (N = 20480: 2048 and 512), and the whole cluster waited on the full one. On an
  // H200 (bench/NOTES.md, "Norm v38"), cold L2 at M = 16384, time against that: rms_norm N =
  // 18432 / 20480 / 24576 bf16 0.70 / 0.76 / 0.91, the fused add 0.72 / 0.68 / 0.77, layer_norm
  // 0.67 / 0.61 / 0.72, float32 N = 12288 0.83; at M = 1 0.66-0.80.
  //
  // RMSNorm's fp8 forms only where the blocks cover the row exactly: their kernels wait on the
  // blocks twice a row (the sum, then max|y|), so a short last block costs them more (N = 20480
  // in blocks of 512 threads ran 1.14-1.28x the staged path's time on an H100, NOTES.md "Norm
  // v29"). Where no block of 128 threads or more does, blocks of 64 or 32 that do (N = 18432:
  // 9 blocks of 64), else the staged path. RMSNorm's fused add takes those narrow exact covers
  // too before slices: its kernels, built for one 512-thread block an SM (128 registers), hold
  // as many threads an SM in blocks of 64 as of 128, and at N = 18432 9 x 64 took 0.86x the
  // time of 5 x 128 at M = 2048 and 16384, 0.87x at M = 256 and 0.98x at M = 1 (graph), where
  // 9 x 64 took 1.5x for rms_norm (NOTES.md "Norm v39"). Against the staged path the fp8 forms'
  // new clusters take 0.65-0.98x the time at M >= 2048 and 0.42-0.52x at M = 1; at M = 256 in
  // graph replay the fused add's lose (1.11-1.23x at N = 18432-24576), as does
  // rms_norm_quant_fp8 at 18432 (1.08x), and the path cannot change with the batch.
  //
  // Exact covers take the plain form where the call is plain (NormShape::plain_form; the same
  // bits): the loop over a cluster's rows is near issue-bound on an H200, and the plain tail is
  // 60-150 instructions a row shorter than the general one (bench/NOTES.md, "Norm v62").
  const int items = kNormClusterMaxItems;
  if (shape.max_cluster_blocks > 1) {
    const bool whole = shape.cols % shape.group_elems == 0;
    auto exact_cluster = [&](int threads) {
      if (!whole || groups % (static_cast<int64_t>(threads) * items) != 0 ||
          !make_norm_config(shape, NormConfig::Path::kCluster, threads, items, &c)) {
        return false;
      }
      c.plain = shape.plain_form && !shape.fp8_output;
      return true;
    };
    for (int threads = kNormClusterThreads; threads >= kNormClusterMinThreads; threads /= 2) {
      if (exact_cluster(threads)) return c;
    }
    const bool narrow_exact = shape.fp8_output || (shape.adds_residual && !shape.layer);
    if (narrow_exact) {
      for (int threads = kNormClusterMinThreads / 2; threads >= shape.warp_size; threads /= 2) {
        if (exact_cluster(threads)) return c;
      }
    }
    int threads = kNormClusterMinThreads;
    while (threads < kNormClusterThreads &&
           ceil_div(groups, static_cast<int64_t>(threads) * items) > shape.max_cluster_blocks) {
      threads *= 2;
    }
    if (!shape.fp8_output &&
        make_norm_config(shape, NormConfig::Path::kCluster, threads, items, &c)) {
      return c;
    }
  }
  make_norm_config(shape, NormConfig::Path::kStaged, kNormStagedThreads, 0, &c);
  return c;
}

}  // namespace fusekit::gpu
