// Launch configuration for the norm kernels, and the heuristic that picks it.
//
// Kept apart from the kernels so that it can be read, tested and tuned on its own (the benchmark's
// --sweep mode times alternatives to it). The choice depends only on N, the dtypes and the device,
// never on M: configurations change the reduction order, and a row's result must not depend on
// how many rows share the launch. Plain C++: no GPU header needed.
#pragma once

#include <cstdint>
#include <string>

namespace fusekit::gpu {

struct NormConfig {
  enum class Path { kRegisters, kStaged };
  Path path = Path::kRegisters;
  int threads_per_row = 32;  // a power of two <= warp size, or a multiple of it
  int items = 1;             // registers path: 16-byte groups per thread
  int rows_per_block = 1;    // registers path
  int block_threads = 32;    // threads_per_row * rows_per_block (staged: threads per row)
  int64_t smem_groups = 0;   // staged path: groups of a row kept in shared memory

  std::string to_string() const;
};

// Inputs of the heuristic, all independent of M.
struct NormShape {
  int64_t cols = 0;          // N
  int group_elems = 8;       // elements per 16-byte group of x: 8 for 16-bit x, 4 for fp32
  int source_elem_bytes = 2;  // bytes per element of h (residual's dtype when adding, else x's)
  int warp_size = 32;
  int max_smem_bytes = 48 * 1024;  // per block, opt-in limit
};

// Registers path: up to this many elements per thread.
constexpr int kNormRegisterElems = 8;
constexpr int kNormMaxThreads = 1024;
// Staged path: threads per row (the kernel's launch bound; 128 registers per thread).
constexpr int kNormStagedThreads = 512;

NormConfig choose_norm_config(const NormShape& shape);

// A registers-path config with `threads_per_row` x `items` groups, or the staged path with
// `threads_per_row` threads; used by the benchmark's sweep. Returns false when the combination
// cannot cover the row or breaks a constraint.
bool make_norm_config(const NormShape& shape, NormConfig::Path path, int threads_per_row,
                      int items, NormConfig* config);

}  // namespace fusekit::gpu
