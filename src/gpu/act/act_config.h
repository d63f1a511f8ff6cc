// Launch configuration for the gated-activation kernels, and the heuristic that picks it.
//
// Kept apart from the kernels so it can be read, tested and tuned on its own. Plain C++: no GPU
// header. Nothing here changes what a row computes (the plain and backward ops are elementwise,
// and a row's max for fp8 does not depend on the order it is taken in), so the batch size may
// choose freely: the configuration is about bytes in flight and launch latency only.
#pragma once

#include <cstdint>
#include <string>

namespace fusekit::gpu {

// Elementwise kernels (act_and_mul, backward): a 1D grid of block_threads-thread blocks over a
// flat space of (row, thread of the row) slots. A row has threads_per_row = ceil(groups / unroll)
// threads; thread t of a row handles the 16-byte groups t, t + threads_per_row, ... (`unroll` of
// them). The grid holds rows_per_pass rows' worth of threads (active_threads; the few threads of
// the last block past it exit): every row at once unless that would pass kActMaxActiveThreads,
// beyond which the threads loop over the rows, rows_per_pass apart. A row's threads may span
// blocks and a block may hold parts of several rows, so no thread idles whatever N is.
struct ActElementwiseConfig {
  int block_threads = 256;
  int unroll = 1;  // 1 or 2
  // Elements per group: the shape's 16 bytes of the input dtype, or half that (kActNarrowGroupBytes)
  // for the forward op on 16-bit types at decode-step sizes (act_config.cc): twice the threads,
  // each with half the math, for a shorter chain per thread.
  int group_elems = 8;
  int64_t threads_per_row = 1;
  int64_t rows_per_pass = 1;
  int64_t active_threads = 1;  // rows_per_pass * threads_per_row, < 2^31
  int64_t grid = 1;            // ceil(active_threads / block_threads)
  // Whether the kernel lets the next grid (programmatic dependent launch) begin launching only
  // after its writes rather than at its start: for the forward op's grids of at most half as many
  // blocks as SMs (a row or two of a decode step), where that measured faster (act_config.cc).
  bool trigger_after_writes = false;
  std::string to_string() const;
};

// Quantizing kernels: one row per block, grid-stride over rows. With items > 0 each of the
// block's threads computes `items` groups of y and keeps them in shared memory (smem_bytes)
// between the row's max and its write (one read of the inputs), and the block has just the warps
// the row needs (blocks of at most kActQuantCompactThreads run the compact build, see below);
// items == 0 is the two-pass path for rows too long for that, in threads or in shared memory (the
// inputs are read twice, the second time mostly from L2).
//
// Cluster path (cluster_blocks > 1, on GPUs with thread-block clusters): each row is split over
// cluster_blocks blocks of block_threads threads (a multiple of the warp, at most
// kActQuantClusterMaxThreads), `items` (1, 2 or 4) groups per thread, y in registers; grid =
// rows * cluster_blocks. Taken for fewer rows than SMs, so that a decode step's math runs on
// several SMs, and for rows longer than the compact block takes at any batch (act_config.cc).
struct ActQuantConfig {
  int block_threads = 256;
  // One-block path: act_quant_items (4 for 16-bit inputs, 8 for float32), or 0 (two passes);
  // cluster path: 1, 2 or 4.
  int items = 4;
  int64_t grid = 1;
  int cluster_blocks = 1;
  int64_t smem_bytes = 0;  // one-block path with items > 0: y staged in shared memory
  // One-block path with items > 0: how many rows ahead each block asks L2 for the inputs of, once
  // its own loads are consumed (0: none): half the rows the GPU holds at once
  // (act_quant_resident_rows), so the row fetched is one a block of the next half wave takes;
  // set by the heuristic for batches of more than one such wave.
  int64_t prefetch_rows = 0;
  std::string to_string() const;
};

struct ActShape {
  int64_t rows = 1;
  int64_t cols = 0;       // N
  int group_elems = 8;    // elements per 16-byte group of the input dtype
  int warp_size = 32;
  int sm_count = 132;
  int max_threads_per_sm = 2048;
  int max_cluster_blocks = 1;  // 1: no clusters
  int64_t max_smem_per_block = 48 * 1024;  // bytes, with the opt-in
  // Forward op: whether the call's tensors admit the compact kernel (act_layout_admits_compact),
  // whose launch shapes differ at small batches (act_config.cc).
  bool compact_layout = false;
};

// One-block quantizing kernel: the elements of y each thread computes (staged in shared memory),
// as 16-byte groups of the input dtype (four groups of 16-bit types, eight of float32), and the
// two builds of it: compact blocks (up to kActQuantCompactThreads threads, registers capped so
// that kActQuantCompactBlocksPerSm of them fit an SM) and wide ones (up to kActMaxBlockThreads,
// for longer rows). act_config.cc says why.
constexpr int kActQuantElemsPerThread = 32;
constexpr int act_quant_items(int group_elems) { return kActQuantElemsPerThread / group_elems; }
constexpr int kActQuantCompactThreads = 448;
constexpr int kActQuantCompactBlocksPerSm = 3;
constexpr int kActMaxBlockThreads = 1024;
// The one-block kernel's own static shared memory: a float per warp of its block, at most 1024
// threads of 32-lane warps. The staging of y gets what the block's limit leaves beside it (a
// 64 KB AMD GPU has no opt-in beyond its 64 KB: a 65536-byte staging would not launch there).
constexpr int64_t kActQuantScratchBytes = kActMaxBlockThreads / 32 * 4;
// Cluster path: the most threads per block, and the blocks of that many per SM its registers are
// capped for (56 registers: five blocks of 224 threads, six of 192). Its rows are latency-bound,
// so the bytes an SM holds in flight set the pace (act_config.cc).
constexpr int kActQuantClusterMaxThreads = 224;
constexpr int kActQuantClusterBlocksPerSm = 5;
constexpr int kActQuantClusterMaxItems = 4;    // cluster path: groups per thread (1, 2 or 4)
// The most threads per SM that a batch's rows split over clusters may come to: decode-sized
// batches take more groups per thread past it, mid batches (half as many rows as SMs and more)
// split each row over two blocks only within it, and take a block per row past it
// (act_config.cc).
constexpr int kActQuantSplitThreadsPerSm = 512;
// Elementwise kernels: threads per block; the most groups a thread takes (large batches); and the
// most threads of one launch before the threads loop over the rows (2^27: a grid of 512K blocks,
// hundreds of times what any GPU holds at once, so in practice every row has its own threads).
constexpr int kActElementwiseThreads = 256;
constexpr int kActSmallBatchThreads = 128;  // batches that do not fill the GPU
// Narrow-group batches of at most one such block per SM (a decode step of one or two rows):
// blocks of two warps spread them over the most SMs (act_config.cc).
constexpr int kActTinyBatchThreads = 64;
constexpr int kActNarrowGroupBytes = 8;      // decode-step forward groups, 16-bit types
// Narrow groups while the batch in 16-byte groups would be at most this many small-batch blocks
// per SM (act_config.cc).
constexpr int kActNarrowBlocksPerSm = 4;
// Forward kernels with 16-byte accesses are built with registers capped for this many blocks of
// kActElementwiseThreads per SM (40 registers, 48 resident warps on an H100) rather than the
// compiler's 64 (32 warps): the exact activation math keeps the issue slots busy, so it is the
// number of resident warps that hides the loads (bench/NOTES.md, "silu forward at six blocks").
constexpr int kActForwardBlocksPerSm = 6;
constexpr int kActElementwiseMaxUnroll = 2;
constexpr int64_t kActMaxActiveThreads = int64_t{1} << 27;
constexpr int kActQuantMaxClusterBlocks = 8;  // the portable cluster size
// The elementwise kernels index their threads in 32 bits: a row may have at most this many
// (rows of more than 2 * 8 * 2^31 elements, ~3 * 10^10, are refused with an error).
constexpr int64_t kActMaxThreadsPerRow = (int64_t{1} << 31) - 1024;

// Whether the elementwise kernels can take rows of this shape (see kActMaxThreadsPerRow).
bool act_elementwise_row_fits(const ActShape& shape);

// `backward`: the backward pass (three inputs and two outputs per element) rather than the
// forward op.
ActElementwiseConfig choose_act_elementwise_config(const ActShape& shape, bool backward);
// The elementwise configuration with groups of `group_elems` elements (the shape's 16-byte groups,
// or half that for the forward op on 16-bit types) in blocks of `block_threads`, the rest as the
// heuristic would set it; used by the heuristic and the benchmark's sweep. Returns false when the
// combination is not one the kernels take.
bool make_act_elementwise_config(const ActShape& shape, bool backward, int group_elems,
                                 int block_threads, ActElementwiseConfig* config);
ActQuantConfig choose_act_quant_config(const ActShape& shape);
// The rows of blocks of `block_threads` threads that the GPU holds at once, as the compact build
// is bounded for (kActQuantCompactBlocksPerSm blocks of kActQuantCompactThreads an SM: shorter
// rows' blocks, fewer threads each, as many more): a wave of the one-block path's rows, of which
// ActQuantConfig::prefetch_rows takes half.
int64_t act_quant_resident_rows(const ActShape& shape, int block_threads);
// Whether the tensors of a forward call can be read and written by the compact kernel
// (act_kernel.cuh's act_forward_compact_kernel): 16-byte aligned accesses (`widest_access`) and
// every element within 2^31 - 1 elements of its tensor's base ((rows - 1) * largest_row_stride +
// N), so that its offsets fit 32 bits. The caller stores the answer in ActShape::compact_layout.
bool act_layout_admits_compact(int64_t rows, int64_t cols, bool widest_access,
                               int64_t largest_row_stride);
// Whether the forward op with configuration c takes the compact kernel: a layout that admits it,
// one group per thread, every row in one pass, and whole groups (N a multiple of c.group_elems).
bool act_forward_is_compact(const ActElementwiseConfig& c, const ActShape& shape);
// The heuristic's two kinds of quantizing configuration, also for the benchmark's sweep: rows
// split over a cluster at `items` groups per thread (false where that takes fewer than two
// blocks, more than the cluster limit, or items is not 1, 2 or 4), and one block per row. The
// cluster takes as few blocks as kActQuantClusterMaxThreads-thread blocks would, each of the
// fewest warps that with that count still cover the row (block_threads = 0), or blocks of
// block_threads threads (a multiple of the warp, at most kActQuantClusterMaxThreads; false
// otherwise).
bool make_act_quant_cluster_config(const ActShape& shape, int items, ActQuantConfig* config,
                                   int block_threads = 0);
ActQuantConfig make_act_quant_block_config(const ActShape& shape);

}  // namespace fusekit::gpu
