// The norm launch heuristic. See norm_config.h; measurements behind the choices are in
// bench/NOTES.md.
#include "gpu/norm/norm_config.h"

#include <algorithm>
#include <sstream>

namespace fusekit::gpu {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int next_pow2(int64_t v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

// Threads per SM (at one group per thread) above which a batch takes the bandwidth shape: measured
// on an H100, four groups per thread win from M = 256 at N = 4096 and lose at M = 1 (NOTES.md).
constexpr int64_t kFullSmThreads = 128;
// Blocks of at least this many threads for short rows (several rows per block).
constexpr int kMinBlockThreads = 256;
// Registers path: the widest a row may be spread (one group per thread up to here, then more
// groups per thread).
constexpr int kMaxRegisterThreadsPerRow = 512;

}  // namespace

std::string NormConfig::to_string() const {
  std::ostringstream s;
  if (path == Path::kRegisters) {
    s << "registers(tpr=" << threads_per_row << ",items=" << items << ",rows=" << rows_per_block
      << ")";
  } else if (path == Path::kStream) {
    s << "stream(tpr=" << threads_per_row << ",items=" << items << ",stages=" << stages << ")";
  } else {
    s << "staged(threads=" << threads_per_row << ",smem_groups=" << smem_groups << ")";
  }
  return s.str();
}

int64_t norm_stream_smem_bytes(const NormShape& shape, const NormConfig& c) {
  const int64_t per_group = 16;  // bytes per staged word
  const int64_t slots = static_cast<int64_t>(c.items) * c.threads_per_row;
  const int64_t ring = c.stages * slots * per_group * shape.staged_words;
  const int64_t affine = slots * per_group * shape.affine_words;  // weight and bias
  return ring + affine + 2 * static_cast<int64_t>(c.threads_per_row) * sizeof(float);
}

bool make_norm_config(const NormShape& shape, NormConfig::Path path, int threads_per_row,
                      int items, NormConfig* config, int stages) {
  const int64_t groups = ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
  const int warp = shape.warp_size;
  const bool shape_ok = threads_per_row >= 1 && threads_per_row <= kNormMaxThreads &&
                        (threads_per_row & (threads_per_row - 1)) == 0;
  if (!shape_ok) return false;
  NormConfig c;
  c.path = path;
  c.threads_per_row = threads_per_row;
  if (path == NormConfig::Path::kRegisters || path == NormConfig::Path::kStream) {
    const int max_items = kNormMaxItems;
    if (items < 1 || items > max_items || (items & (items - 1)) != 0) return false;
    if (static_cast<int64_t>(threads_per_row) * items < groups) return false;
    c.items = items;
    if (path == NormConfig::Path::kStream) {
      // One row at a time per block, whole warps.
      if (!shape.full_aligned_groups || threads_per_row < warp) return false;
      if (stages < 1 || stages > kNormMaxStages) return false;
      c.stages = stages;
      c.rows_per_block = 1;
      c.block_threads = threads_per_row;
      if (norm_stream_smem_bytes(shape, c) > shape.max_smem_bytes) return false;
    } else {
      c.rows_per_block = std::max(1, kMinBlockThreads / threads_per_row);
      if (threads_per_row < warp) {
        c.rows_per_block = std::max(c.rows_per_block, warp / threads_per_row);
      }
      c.block_threads = threads_per_row * c.rows_per_block;
    }
  } else {
    if (threads_per_row < warp || threads_per_row > kNormStagedThreads) return false;
    c.items = 0;
    c.rows_per_block = 1;
    c.block_threads = threads_per_row;
    const int64_t group_bytes = static_cast<int64_t>(shape.group_elems) * shape.source_elem_bytes;
    c.smem_groups = std::min<int64_t>(groups, shape.max_smem_bytes / group_bytes);
  }
  *config = c;
  return true;
}

NormConfig choose_norm_config(const NormShape& shape) {
  const int64_t groups = ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
  const int max_items = kNormMaxItems;
  NormConfig c;
  if (groups <= static_cast<int64_t>(kMaxRegisterThreadsPerRow) * max_items) {
    // Few rows: one group per thread (or as few as fit 512 threads), for the shortest chain of
    // dependent instructions per thread. Rows enough to fill the GPU: four groups per thread, for
    // more bytes in flight and fewer warps to reduce over. Items stay powers of two.
    int fewest = 1;
    while (static_cast<int64_t>(fewest) * kMaxRegisterThreadsPerRow < groups) fewest *= 2;
    int most = 1;
    while (most < max_items && most < groups) most *= 2;
    const int64_t threads_at_fewest = shape.rows * ceil_div(groups, fewest);
    const bool fills_gpu = threads_at_fewest > static_cast<int64_t>(shape.sm_count) * kFullSmThreads;
    const int items = fills_gpu ? std::max(fewest, most) : fewest;
    // Batches that fill the GPU stream through shared memory when the rows allow and the kind
    // of norm gains from it (NormShape::stream_preferred): as many
    // stages as keep about a third of an SM's shared memory per block (so that several blocks
    // share an SM), at least two.
    if (fills_gpu && shape.full_aligned_groups && shape.stream_preferred) {
      // Short rows: fewer groups per thread rather than idle lanes.
      int stream_items = items;
      while (stream_items > 1 && next_pow2(ceil_div(groups, stream_items)) < shape.warp_size) {
        stream_items /= 2;
      }
      const int stream_threads = std::max(next_pow2(ceil_div(groups, stream_items)), shape.warp_size);
      NormConfig probe;
      probe.items = stream_items;
      probe.threads_per_row = stream_threads;
      probe.stages = 1;
      const int64_t stage_bytes = norm_stream_smem_bytes(shape, probe);
      const int stages = static_cast<int>(std::clamp<int64_t>(
          shape.max_smem_per_sm / 3 / std::max<int64_t>(stage_bytes, 1), 2, kNormMaxStages));
      if (make_norm_config(shape, NormConfig::Path::kStream, stream_threads, stream_items, &c,
                           stages)) {
        return c;
      }
    }
    make_norm_config(shape, NormConfig::Path::kRegisters, next_pow2(ceil_div(groups, items)),
                     items, &c);
  } else {
    make_norm_config(shape, NormConfig::Path::kStaged, kNormStagedThreads, 0, &c);
  }
  return c;
}

}  // namespace fusekit::gpu
