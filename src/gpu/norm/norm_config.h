// Launch configuration for the norm kernels, and the heuristic that picks it.
//
// Kept apart from the kernels so that it can be read, tested and tuned on its own (the benchmark's
// --sweep mode times alternatives to it). Plain C++: no GPU header needed.
//
// Paths. Rows up to 2048 groups of 16 bytes (N = 16384 bf16) stay in the registers of one block.
// Longer rows, where the GPU has thread-block clusters, are split over the blocks of a cluster
// (blocks that cover the row exactly where some do, else slices of 512 groups), still in
// registers, their partial sums combined through distributed shared memory (one read and one
// write of the row, as for short rows); RMSNorm's fp8 forms only where the cluster's blocks cover
// the row exactly (cluster_covers_row). Elsewhere (no clusters, rows beyond what a cluster
// holds, the fp8 forms' other rows) the staged path keeps what fits of the row in shared memory
// and re-reads the rest.
//
// Batch invariance. The path and the cluster and staged paths' shapes change the reduction order,
// so they depend only on N, the dtypes and the device. Within the registers path
// every power-of-two `items`, and those of kNormOddItemCounts, sums in the same order
// (norm_kernel.cuh), so there the batch size may choose: one group per thread while the rows do
// not fill the GPU (latency), four (or three or five where that covers the row exactly) when they
// do (bandwidth).
#pragma once

#include <cstdint>
#include <string>

namespace fusekit::gpu {

struct NormConfig {
  enum class Path { kRegisters, kCluster, kStaged };
  Path path = Path::kRegisters;
  int threads_per_row = 32;  // a power of two (cluster path: threads per block)
  int items = 1;             // registers and cluster paths: 16-byte groups per thread
  int rows_per_block = 1;    // registers path
  int block_threads = 32;    // threads_per_row * rows_per_block (staged: threads per row)
  int cluster_blocks = 1;    // cluster path: blocks sharing a row
  int64_t smem_groups = 0;   // staged path: groups of a row kept in shared memory
  // Registers and cluster paths: whether the kernel lets the next grid (programmatic dependent
  // launch) begin launching only after its writes rather than at its start. The heuristic sets
  // it with weight_at_output at one to two blocks per SM, for the plain form's two-group rows at
  // mid batches (norm_config.cc), and on the cluster path for more rows than SMs
  // (make_norm_config, norm_config_make.cc). No effect on results.
  bool trigger_after_writes = false;
  // Registers path, one block a row's threads (split_blocks 1), the trigger at the start: let the
  // launch move it after the writes where the next grid's blocks cannot all be resident beside
  // this grid's (next_grid_crowded, from the kernel's blocks per SM as the runtime reports them).
  // The heuristic sets it on its registers configs; configs built by hand (the benchmark's sweep,
  // tests) keep the trigger they name. No effect on results.
  bool trigger_late_where_crowded = false;
  // Registers path, the fused add (RMSNorm, not fp8) at four groups per thread in 512-thread
  // blocks covering the row exactly: load the weight at the output (from L1, as every row reads
  // it) instead of beside the row, which leaves that kernel 64 registers per thread (80 with the
  // weight held), two such blocks per SM instead of one. The heuristic sets it for 16-bit x where
  // the rows outnumber the SMs (norm_config.cc); one-row-per-SM batches keep the early weight for
  // latency. No effect on results.
  bool weight_at_output = false;
  // Registers path with one row per block: how many blocks share each row (a power of two up to
  // kNormMaxOutputParts). Every one of them loads the whole row and sums it in the same order, so
  // each holds the row's bitwise-same statistics, and then computes and writes only its share of
  // the row's outputs (those of an equal range of the row's threads). A decode-size batch (a row
  // or a few per SM) then spreads each row's output math and stores over that many SMs. Only for
  // rows covered exactly by 1, 2 or 4 whole groups per thread (kernels of their own), where no
  // output overlaps an input (a block may still be reading what another writes: not in place),
  // and never with an fp8 output (a dynamic scale needs every y).
  int output_parts = 1;
  // Registers path with one row per block, on GPUs with clusters: how many blocks of a cluster
  // the row's threads_per_row threads are split over (a power of two up to kNormMaxSplitBlocks;
  // block_threads = threads_per_row / split_blocks, at least a warp). Each block loads, reduces
  // and writes only its own threads' groups, so each SM moves 1 / split_blocks of the row, in
  // place too; every reduction gathers the threads' values into every block through distributed
  // shared memory, and each block folds them as one block of threads_per_row threads would: the
  // same bits (norm_kernel.cuh, norm_registers_kernel). Rows of whole groups on 128, 256 or 512
  // threads that split_rows_cover takes.
  int split_blocks = 1;
  // Registers path: take the plain kernels (OutputForm::kPlain: a weight and nothing else, the
  // same bits as the general ones) where the call is plain and they are built. The heuristic sets
  // it up to twice as many rows as SMs, where a call's time is mostly its instruction latency
  // (at larger batches they measured 2-6% slower: bench/NOTES.md, "Norm v17"), and beyond that
  // for LayerNorm's rows and with packed_row (norm_config.cc says which). Cluster path: the
  // plain cluster kernel, for rows its blocks cover exactly (norm_config_long_rows.cc).
  bool plain = false;
  // Registers path, the plain kernels without the add (LayerNorm's and RMSNorm's; the call must
  // be plain, and the config's `plain` is set with it) of three groups a thread on 256 or 512
  // threads, one row a block (N = 6144 and 12288 bf16): the kernel built for
  // kNormPackedRowSmThreads threads an SM rather than 1024, its row held packed (two 16-bit
  // elements a register) through the reductions instead of as the floats its sums unpacked,
  // which is what fits it in 40 registers unspilled. An SM then holds half as many rows again,
  // the loads of some in flight while others reduce and store; the repacking costs instructions,
  // which only batches of several waves of blocks win back (the heuristic sets it there:
  // norm_config.cc). The same sums, so the same bits.
  bool packed_row = false;

  std::string to_string() const;
};

// Registers and cluster paths: how many 512-thread blocks per SM the kernels' register budget is
// built for (__launch_bounds__): two (at most 64 registers per thread) where what a thread holds
// fits in that without spilling, per ptxas: no fused add, and for RMSNorm (which holds the weight
// in registers) a weight of x's size; LayerNorm with the add when all its tensors have one dtype,
// bf16 or fp32 (fp16's conversions take the registers that LayerNorm's cluster kernel then
// spills). Elsewhere one (up to 128 registers), where a floor of two spills.
constexpr int norm_min_blocks_per_sm(bool add, bool layer, bool weight_size_is_x,
                                     bool one_dtype, bool x_is_fp16) {
  return (!add && (layer || weight_size_is_x)) || (add && layer && one_dtype && !x_is_fp16) ? 2
                                                                                           : 1;
}

// Whether the next call's blocks, launched early (programmatic dependent launch with the trigger
// at the kernel's start), crowd a grid of `blocks` blocks on `sm_count` SMs that each hold
// `resident_per_sm` of the kernel's blocks: a grid of more blocks than SMs that is resident at
// once (one wave) and leaves some slots free, but too few for the next grid's blocks beside it.
// The early blocks then take the free slots of some SMs and leave the work spread unevenly. A
// grid that fills every slot leaves none to take (its next grid launched early only starts
// sooner). Measured on an H100, graph replay, with the late trigger where this holds (bench/
// NOTES.md, "The trigger by residency"): the two-block 512-thread rows at 136-232 rows 0.66-0.92x
// the time in place (fused_add_layer_norm [200, 12288] 7.74 -> 5.16 us), at 256 rows 0.92-1.02x;
// before it, the fused add's 256 x 4 rows at two blocks an SM ([256, 8192] 7.04 us early, 4.03
// late) and its fp8 form at three (5.73 against 4.73). At 264 rows, every slot filled, the late
// trigger read 0.99-1.02x cold.
constexpr bool next_grid_crowded(int64_t blocks, int sm_count, int resident_per_sm) {
  const int64_t slots = static_cast<int64_t>(sm_count) * resident_per_sm;
  return blocks > sm_count && blocks < slots && 2 * blocks > slots;
}

// Inputs of the heuristic.
struct NormShape {
  int64_t rows = 1;          // M: only chooses items on the registers path
  int64_t cols = 0;          // N
  int group_elems = 8;       // elements per 16-byte group of x: 8 for 16-bit x, 4 for fp32
  int source_elem_bytes = 2;  // bytes per element of h (residual's dtype when adding, else x's)
  int warp_size = 32;
  int max_smem_bytes = 48 * 1024;  // per block, opt-in limit
  int sm_count = 132;
  int max_cluster_blocks = 1;  // largest thread-block cluster (1: none)
  int min_blocks_per_sm = 2;   // the kernels' register budget: norm_min_blocks_per_sm
  bool fp8_output = false;     // out holds fp8 codes (RMSNorm)
  bool layer = false;          // LayerNorm (else RMSNorm)
  bool adds_residual = false;  // the fused add
  // Every row's groups are whole and 16-byte aligned (N a multiple of the group, full-width
  // accesses on every tensor): a row that a launch's threads x items cover exactly then takes the
  // bounds-free kernel, the only one built for kNormOddItemCounts.
  bool whole_groups = false;
  // Some tensor's address or row stride rules out 16-byte accesses (the kernels' kLoad < kGroup):
  // such rows of any N take the kernels of RowFit::kLastPartial (takes_last_partial). Rows of
  // 16-byte accesses whose N is off the group (padded views, lone rows) are neither narrow nor
  // whole.
  bool narrow_accesses = false;
  // No output overlaps an input (out is not x; residual_out is not residual): what
  // NormConfig::output_parts needs.
  bool outputs_apart = false;
  // The call takes the plain kernels where the launch fixes the row's thread count: 16-bit x in
  // one dtype, no fp8 output, and norm_plain_call.
  bool plain_form = false;
  // The kernels of split rows (NormConfig::split_blocks) are built for the call's dtypes: 16-bit
  // x, weight and residual of one dtype, fp8 codes only in the format the platform converts in
  // hardware (NormTraits::kSplitRowsBuilt).
  bool split_rows_built = false;
  // The kernels of fixed thread counts are built for the call's dtypes: 16-bit x, weight and
  // residual of one dtype, fp8 codes only in the format the platform converts in hardware
  // (NormTraits::kFixedRowThreads), among them one_group_registers_kernel.
  bool fixed_threads_built = false;
};

// Whether a call's options are the plain form's (the kernels' OutputForm::kPlain): a weight with
// no offset, no weight_after_cast, no rstd or mean output.
constexpr bool norm_plain_call(bool has_weight, float weight_offset, bool weight_after_cast,
                               bool has_stats) {
  return has_weight && weight_offset == 0.0f && !weight_after_cast && !has_stats;
}

// Registers path: up to this many 16-byte groups per thread (a power of two), or exactly one of
// kNormOddItemCounts where that covers the row with no idle slot (below).
constexpr int kNormMaxItems = 4;
// Registers path, batches that fill the GPU, rows of 3 x 2^k or 5 x 2^k whole groups: that many
// groups per thread on 2^k threads, with no idle slot. Among hidden sizes (bf16): 1536, 3072,
// 6144 and 12288 (three groups per thread), 2560, 5120 and 10240 (five). Four per thread would
// leave a quarter of the slots idle (three) or take twice the threads with three slots in eight
// idle (five), in kernels that test every item against the row's end. The sum over a thread's
// slots is a tree padded with zeros to the next power of two (reduce.cuh's tree_sum), the same
// order as every power-of-two layout, so a row's bits do not depend on the batch.
constexpr int kNormOddItemCounts[] = {3, 5};
// The packed rows' kernels built (plain form, without the add, exact rows of one row a block):
// three groups a thread on 256 or 512 threads (N = 6144 and 12288 bf16).
constexpr bool packed_row_built(int items, int threads_per_row) {
  return items == 3 && (threads_per_row == 256 || threads_per_row == 512);
}

// NormConfig::packed_row's kernels: threads an SM they are built for.
constexpr int kNormPackedRowSmThreads = 1536;
constexpr bool norm_odd_items(int items) {
  for (const int odd : kNormOddItemCounts) {
    if (items == odd) return true;
  }
  return false;
}
// The forms with a kernel for `items` of kNormOddItemCounts: three in every form; five in all but
// LayerNorm with the add, whose kernel spills there (ptxas: 20 bytes) and measured slower on an
// H100 ([16384, 5120]: 238.8 us against 224.8 at four groups on 256 threads).
constexpr bool odd_items_built(bool layer, bool adds_residual, int items) {
  return items == 3 || (items == 5 && !(layer && adds_residual));
}
// Registers path, whole groups: the item counts with a kernel that knows each thread's first
// items - 1 groups lie in the row and tests only the last (the kernels' RowFit::kLastPartial),
// for rows of threads x (items - 1) < groups < threads x items. Four: rows of 7 x 2^k groups
// (N = 896, 3584, 7168 bf16) at batches that fill the GPU; three (with 2^k threads, the one odd
// count taken where it does not cover the row exactly): rows between 2 x 2^k and 3 x 2^k groups
// (N = 1152, 2304, 4608 bf16), where four per thread would leave the last slot of every thread
// idle. The sum order is that of the power-of-two layouts (above), so bits do not change.
// Rows of narrow accesses (NormShape::narrow_accesses: a tensor's address or stride rules out
// 16-byte accesses, as N off the group does in a contiguous batch) take these kernels at any N,
// the last slot holding the row's last group partly or not at all, and also where the launch
// covers them exactly (no exact kernel is built for them): threads x (items - 1) < groups <=
// threads x items. Rows of 16-byte accesses whose N is off the group (padded views, lone rows)
// keep the kernels that test every group (takes_last_partial).
constexpr bool last_partial_items_built(int items) { return items == 3 || items == kNormMaxItems; }
constexpr bool items_last_partial(int64_t groups, int threads_per_row, int items,
                                  bool narrow_accesses = false) {
  return last_partial_items_built(items) &&
         static_cast<int64_t>(threads_per_row) * (items - 1) < groups &&
         (groups < static_cast<int64_t>(threads_per_row) * items ||
          (narrow_accesses && groups == static_cast<int64_t>(threads_per_row) * items));
}
// Whether a row of `groups` on threads_per_row x items takes a kernel of RowFit::kLastPartial:
// whole groups, or narrow accesses at any N (above).
// Five groups a thread with only the last tested, for rows of whole groups at full width
// between 4 x 2^k and 5 x 2^k groups (9 x 2^k: N = 1152, 2304, 4608, 9216 bf16), in the forms
// with a five-group kernel (odd_items_built): on half the threads of three, so an SM holds twice
// the rows, with a tenth of the slots idle rather than a quarter.
constexpr bool five_last_partial(int64_t groups, int threads_per_row, int items) {
  return items == 5 && static_cast<int64_t>(threads_per_row) * 4 < groups &&
         groups < static_cast<int64_t>(threads_per_row) * 5;
}
constexpr bool takes_last_partial(bool whole_groups, bool narrow_accesses, int64_t groups,
                                  int threads_per_row, int items) {
  return ((whole_groups || narrow_accesses) &&
          items_last_partial(groups, threads_per_row, items, narrow_accesses)) ||
         (whole_groups && !narrow_accesses && five_last_partial(groups, threads_per_row, items));
}
// Registers path, rows split over a cluster's blocks (NormConfig::split_blocks): the thread
// counts and the coverings of a row of `groups` whole groups with a kernel of their own. 1, 2, 3
// or 4 groups per thread covering it exactly (rows of 2^k and 3 x 2^k groups), or, with each
// thread's last group partly past the row, three or four (items_last_partial: the other rows of
// more than 2 x 2^k and fewer than 4 x 2^k groups, such as N = 2560, 3584, 4608 and 7168 bf16),
// and on 128 threads two (129-255 groups: N = 1032-2040 bf16, such as 1152 and 1536) or one
// (65-127 groups: N = 520-1016 bf16, such as 640, 768, 896 and 960; the last threads, up to a
// block of them, hold no group).
constexpr int kNormSplitShortThreads = 128;
// One group a thread on kNormSplitShortThreads threads, the only group of each thread tested: the
// rows of 65-127 whole groups (above). Besides split rows, rows of one block take it too, in a
// kernel of few registers (NormTraits::kFixedRowThreads forms; one-block rows' row_fit_of).
constexpr bool one_group_last_partial(int64_t groups, int threads_per_row, int items) {
  constexpr int64_t kThreads = kNormSplitShortThreads;
  return threads_per_row == kNormSplitShortThreads && items == 1 && kThreads / 2 < groups &&
         groups < kThreads;
}
constexpr bool split_rows_last_partial(int64_t groups, int threads_per_row, int items) {
  constexpr int64_t kThreads = kNormSplitShortThreads;
  const bool short_row = (threads_per_row == kNormSplitShortThreads && items == 2 &&
                          kThreads < groups && groups < 2 * kThreads) ||
                         one_group_last_partial(groups, threads_per_row, items);
  return items_last_partial(groups, threads_per_row, items) || short_row;
}
constexpr bool split_rows_cover(int64_t groups, int threads_per_row, int items) {
  const bool threads_built =
      threads_per_row == 128 || threads_per_row == 256 || threads_per_row == 512;
  const bool exact = items >= 1 && items <= kNormMaxItems &&
                     static_cast<int64_t>(threads_per_row) * items == groups;
  return threads_built && (exact || split_rows_last_partial(groups, threads_per_row, items));
}
constexpr int kNormMaxThreads = 512;  // registers path: threads per block
constexpr int kNormMaxOutputParts = 4;  // registers path: NormConfig::output_parts
constexpr int kNormMaxSplitBlocks = 8;   // registers path: NormConfig::split_blocks (portable)
// Staged path: threads per row (the kernel's launch bound; 128 registers per thread).
constexpr int kNormStagedThreads = 512;
// Cluster path: threads per block (the fewest the heuristic takes for a row that no block of
// 128-512 threads covers exactly, and the most), and 16-byte groups per thread (the row's slice
// in registers).
constexpr int kNormClusterMinThreads = 128;
constexpr int kNormClusterThreads = 512;
constexpr int kNormClusterMaxItems = 4;

inline bool odd_items_built(const NormShape& shape, int items) {
  return odd_items_built(shape.layer, shape.adds_residual, items);
}

NormConfig choose_norm_config(const NormShape& shape);
// Its choice for rows longer than the registers path holds (more than 512 threads x
// kNormMaxItems groups): the cluster path, else the staged one (norm_config_long_rows.cc).
NormConfig choose_long_row_norm_config(const NormShape& shape);

// The config of a call whose rows come in runs (rms_norm and layer_norm on per-head views of a
// fused projection's output), from `config`, the one the same rows of one stride would take.
// Fewer kernels are built for runs (norm_launch.cuh, pick_norm_kernel), so it keeps what sets a
// row's reduction order (the path; the cluster and staged paths' shapes) and hence its bits, and
// on the registers path drops what those kernels lack: the split and shared rows, the weight at
// the output, the plain form and the packed rows go, and three or five groups per thread become
// four (on twice the threads for five, fewer rows a block), which sums in the same order.
NormConfig norm_config_for_runs(const NormShape& shape, NormConfig config);

// Whether a cluster-path config's blocks x threads x items groups are exactly the row's groups
// (N a multiple of the group; by N alone, not the tensors' alignment, so that a row's path does
// not depend on where it lies). RMSNorm's fp8 forms take the cluster path only then.
bool cluster_covers_row(const NormShape& shape, const NormConfig& config);

// Registers path: as many rows per block (a power of two, within kNormMaxThreads threads) as hold
// 256 groups of rows of `groups` groups, where that is more than `config` has. The heuristic's
// blocks of short rows (fewer than 32 groups) at batches that fill the GPU (norm_config.cc);
// also for the tests.
void widen_short_row_blocks(int64_t groups, NormConfig* config);

// Whether `config` may share each row among blocks (NormConfig::output_parts > 1) for `shape`: a
// registers-path row of its own block (not split over several), covered exactly by 1, 2 or 4
// whole groups per thread, the weight beside the row, outputs apart from the inputs, not the
// fused add with an fp8 output.
bool norm_rows_shareable(const NormShape& shape, const NormConfig& config);

// `config` with its row's threads split over `blocks` blocks of a cluster (NormConfig::
// split_blocks), where the GPU has clusters that large and `config` is a registers-path row of its
// own block that split_rows_cover takes, with the weight beside the row and its outputs not shared
// (output_parts 1); blocks of at least a warp. Returns false otherwise.
bool split_norm_rows(const NormShape& shape, int blocks, NormConfig* config);
// (The kernels exist where shape.split_rows_built; the shape then also needs whole groups.)

// The heuristic's last step on the registers path (choose_norm_config): where a decode-size batch
// (at most half as many rows as SMs) has split kernels for its row, `config` becomes the row
// split over 4 or 8 blocks of a cluster, keeping its `plain`; LayerNorm's rows that are not 2^k
// groups, up to twice as many rows as SMs, over 2; rows of 1024 groups or more at mid batches
// (about one to two rows an SM, by form) over blocks of 128 threads, the trigger after the
// writes. Returns whether it did. norm_config_decode.cc says which rows and why.
bool take_split_rows(const NormShape& shape, NormConfig* config);
// Whether the shape's rows are LayerNorm alone's plain rows that three groups a thread hold on one
// block at every batch (N = 1032-1536 bf16; norm_config.cc says which and why).
bool layer_plain_three_rows(const NormShape& shape);

// A registers-path config with `threads_per_row` x `items` groups (items a power of two up to
// kNormMaxItems, or one of kNormOddItemCounts covering whole groups exactly where
// shape.whole_groups and odd_items_built, or three with only each thread's last group tested,
// takes_last_partial), a cluster-path config with blocks of `threads_per_row`
// threads x `items` groups (as many blocks per row as cover it, any count), or the staged
// path with `threads_per_row` threads; used by the heuristic, the benchmark's sweep and the tests.
// Returns false when the combination cannot cover the row or breaks a constraint.
bool make_norm_config(const NormShape& shape, NormConfig::Path path, int threads_per_row,
                      int items, NormConfig* config);

}  // namespace fusekit::gpu
