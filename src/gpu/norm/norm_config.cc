// The norm launch heuristic. See norm_config.h; measurements behind the choices are in
// bench/NOTES.md.
#include "gpu/norm/norm_config.h"

#include <algorithm>

#include "gpu/common/launch_math.h"

namespace fusekit::gpu {
namespace {

// 16-byte groups per SM above which a batch takes the bandwidth shape: measured on an H100, four
// groups per thread win from M = 256 at N = 4096 and lose at M = 1 and 32 (NOTES.md).
constexpr int64_t kFullSmGroups = 128;
// Registers path: the widest a row may be spread.
constexpr int kMaxRegisterThreadsPerRow = 512;
// Registers path, batches that do not fill the GPU: threads per row up to which a row is spread
// one group per thread before a thread takes more. Measured on an H100 (NOTES.md, v5): graph
// replay of rms_norm [1, 4096] 1.53 us with 256 threads x 2 groups, 1.75 us with 512 x 1 (the
// cross-warp step of the reduction grows with the warps).
constexpr int kLatencyThreadsPerRow = 256;
// The same for LayerNorm and the fused add (not their fp8 forms) where 512 threads cover the row
// exactly (N a multiple of 4096 bf16): their longer chain per group (two reductions, or the add and
// the store of h) pays more per group than the wider reduction costs. Graph replay at M = 1
// (NOTES.md, v10) of layer_norm N = 4096 / 8192 1.97 / 2.62 us at 256 threads against 1.87 / 2.40
// at 512, fused_add_layer_norm 2.19 / 3.14 against 2.10 / 2.75, fused_add_rms_norm N = 8192 2.13
// against 2.02 (N = 4096 level); rms_norm 1.30 / 1.60 against 1.39 / 1.72. Where they would leave
// slots idle they lose: N = 5120 (640 groups) layer_norm 2.42 -> 2.68, the fused add 1.99 -> 2.24.
constexpr int kLongChainLatencyThreadsPerRow = 512;
// And for RMSNorm alone (no add), whose chain per group is the shortest: four groups per thread
// on 128 threads replayed rms_norm [32, 4096] in 1.35 us against 1.41 at 256 x 2, [1, 4096] 1.27
// against 1.29 (H100, NOTES.md "Norm v13"); at N = 2048 (two groups on 128 threads) [64, 2048]
// 1.29 against 1.32 at 256 x 1, [1, 2048] level. Its fp8 forms likewise since their static scale
// is read beside the row (NOTES.md "Norm v33": rms_norm_quant_fp8 [1, 4096] 1.66 us against
// 1.76 at 256 x 2, [32, 4096] 1.76 against 1.92; the static scale's 1.30 / 1.41 against 1.32 /
// 1.47).
constexpr int kShortChainLatencyThreadsPerRow = 128;
// RMSNorm's fp8 forms share a row's outputs among blocks (NormConfig::output_parts) only as far
// as each part keeps this many groups: rms_norm_quant_fp8 replayed [1, 4096] (512 groups) in 1.66
// us on one block of 128 x 4 against 1.68-1.69 in two or four parts, [16, 8192] in 2.09 us in
// two parts against 2.14 in four, [1, 16384] in 2.60 in four against 2.82 on one block (H100,
// NOTES.md "Norm v33").
constexpr int64_t kFp8MinGroupsPerPart = 512;
// LayerNorm (either form, not its fp8 forms), whose weight and bias are loaded beside the row at
// up to two groups per thread (norm_kernel.cuh): two groups per thread where they cover the row
// exactly in this many threads or more (up to kMaxRegisterThreadsPerRow). Measured on an H100
// (NOTES.md "Norm v14", graph replay) against the shapes above: layer_norm [1, 4096] 1.64 us at
// 256 x 2 against 1.80 at 512 x 1, [32, 4096] 1.77 against 1.95, [1, 2048] 1.42 at 128 x 2
// against 1.50 at 256 x 1, [32, 2048] 1.51 against 1.59; fused_add_layer_norm [1, 4096] 1.95
// against 2.02, [32, 4096] 2.11 against 2.16, N = 2048 level.
constexpr int kLayerPairsMinThreadsPerRow = 128;
// Registers path: 16-byte groups per SM up to which a batch that fills the GPU is still a "mid"
// batch (M = 256 at N = 4096 bf16, 512 at 2048), where two groups per thread beat four for the
// fused add: on an H100 (NOTES.md, "Norm v10"), graph replay of fused_add_rms_norm [256, 2048]
// 1.95 against 2.14 us, [256, 4096] 2.67 against 2.91, [128, 4096] 2.11 against 2.26, and level
// (+-1%) at M = 512 and 1024; rms_norm level either way.
constexpr int64_t kMidSmGroups = 1024;
// The RMSNorm fused add's rows (one 512-thread block per SM by its registers) at batches that fill
// the GPU: spread over at least this many threads where the row has that many groups, a power of
// two (N = 1024 and 2048 bf16), rather than four groups per thread on fewer. Cold L2 on an H100
// (NOTES.md "Norm v22"), fused_add_rms_norm [2048, 2048] 13.06-13.18 us at 128 x 2 against
// 13.55-13.73 at 64 x 4, in three sweeps on two machines. RMSNorm alone's plain rows too, from
// half as many rows as SMs to twice as many (choose_norm_config).
constexpr int kRmsMinThreadsPerRow = 128;
// The RMSNorm fused add's plain calls on rows of 512 threads x four groups (N = 16384 in 16 bits)
// load their weight at the output (NormConfig::weight_at_output, two blocks an SM) up to this
// many rows an SM, and past it take the plain kernel with the weight beside the row (one block an
// SM). Cold L2 on an H200 (NOTES.md "The fused add at N = 16384 past the SMs"): at [16384, 16384]
// the weight at the output 519.7 us, the plain kernel 507.8; at 2048 rows level, at 1024 the
// weight at the output ahead (35.1 against 35.7).
constexpr int64_t kFusedAddWeightAtOutputMaxRowsPerSm = 16;
// LayerNorm's bound (either form), twice the fused add's: cold-L2 times on an H100 (NOTES.md
// "Norm v14") of layer_norm [512, 4096] 7.56 us at 256 x 2 against 8.04 at 128 x 4, [1024, 2048]
// 7.74 at 128 x 2 against 8.06 at 64 x 4 (fused_add_layer_norm 9.82 / 9.52 against 10.09 /
// 9.88); one step further, [1024, 4096] and [2048, 2048], four groups per thread win or tie.
constexpr int64_t kLayerMidSmGroups = 2 * kMidSmGroups;
// LayerNorm's fused add in its kernels of two 512-thread blocks an SM (bf16, every tensor one
// dtype: norm_min_blocks_per_sm) at every batch that fills the GPU, not only its mid batches:
// two groups per thread where they cover the row exactly on 64 to kMaxRegisterThreadsPerRow
// threads (whole groups at 16-byte accesses: N = 1024-8192 bf16). Cold L2 on an H200
// (bench/NOTES.md, "Norm v49"), time at two groups against four: fused_add_layer_norm
// [16384, 1024] 0.94x, [16384, 2048] 0.97x (0.97-0.98x in three sweeps), [16384, 8192] 0.98x,
// [4096, 1024-4096] 0.96-0.98x, [65536, 1024 / 2048] 0.99x, [16384 / 65536, 4096] 0.99 / 1.00x.
// LayerNorm alone keeps four (its two-group rows were not among the best launches at
// M = 16384); the fused add's other dtypes, not measured, keep theirs too.
constexpr int kLayerAddPairsMinThreads = 64;
// LayerNorm's rows of at most this many groups (N = 2048 bf16) keep those pairs where the rows
// are not a power of two in groups (the next rule): there three or four groups a thread measured
// level at M = 512 on an H200 (layer_norm [512, 1536] 6.85 us at 64 x 3 against 6.69 in pairs,
// [512, 1280] 6.85 against 6.75; the fused add 0.97-0.99x), and at N = 896 slower ([256, 896]
// 2.19 at 32 x 4 against 2.11; bench/NOTES.md, "Norm v41").
constexpr int64_t kLayerPairsMaxGroups = 256;
// Of those rows, the ones of more than kLayerPairsAnyBatchMaxGroups whole groups (N = 1032-2040
// bf16) keep the pairs only at batches up to this many groups an SM, and LayerNorm alone's plain
// calls none where three groups a thread on half the pairs' threads cover the row (N = 1032-1536
// bf16). Since three and five groups a thread have plain kernels ("Norm v53", "v57"), on an H200
// (sweeps of every launch in one binary, two rounds; bench/NOTES.md, "Norm v59"): layer_norm
// 64 x 3 against 128 x 2, N = 1152-1536, 0.85-0.86x the graph replay at M = 256, 0.87-0.90x cold
// at 512, 0.84-0.86x at 1024, 0.73-0.75x at 1536; N = 1792 and 2040 at 64 x 4 0.93-0.94x at
// M = 1024, level at 512 and 1.13-1.16x at 256; fused_add_layer_norm 0.88-0.95x at M = 1024,
// 0.84x at 1536 (N = 1152), level at 512 and 1.24x at 256.
constexpr int64_t kLayerPairsMaxSmGroups = kMidSmGroups;
// Shorter rows (N <= 1024 bf16), mostly taken by the one-warp and one-group rules (below) where
// a batch fills the GPU, keep their pairs wherever those rules leave them.
constexpr int64_t kLayerPairsAnyBatchMaxGroups = 128;
// LayerNorm's rows that one warp holds in three or four groups a lane (more than two warps' worth
// of groups, at most four, not a power of two: N = 520-1016 bf16 on 32 lanes) take that one warp a
// row rather than pairs on two to four warps, so that both of the row's reductions stay within
// the warp (shuffles only: no barrier, no shared memory): rows of exactly three groups a lane at
// every batch that fills the GPU, the others from this many rows an SM. Measured on an H200
// (sweeps, one process each; bench/NOTES.md, "Norm v43"): layer_norm [2048, 768] 7.01 us cold at
// 32 x 3 against 7.84 in pairs, [2048, 896] 7.39 at 32 x 4 against 8.10, fused_add_layer_norm
// 8.00 against 9.31 and 8.74 against 9.70; [256, 768] 1.92 us in graphs at 32 x 3 against 2.13
// (the fused add 2.18 against 2.38); but at M = 256 and 512 (two and four rows an SM) the pairs
// or one group a thread still won where the warp's last group is partial (layer_norm [256, 896]
// 2.20 us against 2.12 in pairs and 2.02 at 128 x 1; [512, 896] 6.56 against 6.21 and 6.18).
// On 64-lane waves (AMD CDNA) the same rule covers N = 1032-2040 bf16, not measured there.
constexpr int64_t kLayerOneWarpMinRowsPerSm = 4;
// LayerNorm up to this many rows an SM (the batches measured) takes three groups per thread on
// twice the threads rather than five where both hold the row (below); on rows short of five's
// last slots (five_last_partial: 9 x 2^k groups) also up to this many groups an SM, where both
// have plain kernels ("Norm v57") and the rows on twice the threads still ramp up faster.
constexpr int64_t kLayerThreeOverFiveRowsPerSm = 4;
constexpr int64_t kLayerThreeOverLastFiveSmGroups = 2304;
// Short rows of a power-of-two number of groups under 32 (N = 64 and 128 bf16; a head's q / k
// norm) at batches that fill the GPU: spread over this many threads (one group per thread if
// fewer), rather than four groups per thread on fewer, in blocks of kShortRowBlockGroups groups.
// Cold L2 on an H100 (bench/NOTES.md, "Norm v28", three rounds), N = 64 at M = 131072 and 524288:
// rms_norm 0.88-0.91x the time at 2 x 4, fused_add_rms_norm 0.80-0.87x, layer_norm 0.91-1.04x,
// fused_add_layer_norm 0.81-0.85x, the fused add's fp8 form 0.85-0.88x; N = 128 at 8 x 2 against
// 4 x 4 0.94-0.98x. Not RMSNorm's fp8 forms without the add (1.07-1.28x the time), nor rows of
// other group counts, whose exact three-group kernels led by 1.2-3x (N = 96 bf16 at 4 x 3 against
// 16 x 1); M = 16384 read within +-4% either way.
constexpr int kShortRowMinThreadsPerRow = 8;
// RMSNorm's rows of fewer groups than this at batches that do not fill the GPU take three groups a
// thread (five too in the fp8 forms) where those cover the row exactly (choose_norm_config).
constexpr int64_t kOddShortRowGroups = 128;
// Those short rows' blocks: as many rows as make this many 16-byte groups of x. Blocks of less
// work are launched slower than they finish: rms_norm [131072, 64] at 8 x 1 took 13.5 us in
// blocks of 32 rows (256 groups), 13.9 in blocks of 16, 23.7 in blocks of 8 and 43.4 in blocks
// of 4 (sweep, NOTES.md "Norm v28"). Longer rows' blocks stay as they are: four rows a block at
// N = 778 (98 groups) instead of two measured level to 5% slower.
constexpr int64_t kShortRowBlockGroups = 256;
// Rows of 65-127 whole groups at batches that fill the GPU take one group a thread on 128 threads
// in blocks of their own (one_group_registers_kernel) up to this many rows an SM, and LayerNorm's
// up to the next bound. On an H200 (sweeps in one binary, bf16, with PDL; bench/NOTES.md, "Norm
// v47"), against the launch each took before: at M = 256 (graph replay, N = 896 and 1016)
// rms_norm 1.15-1.18 us against 1.34-1.37, fused_add_rms_norm 1.30-1.35 against 1.66-1.71, the
// fp8 forms 0.87-0.94x; at M = 512 and 1024 RMSNorm's forms 0.96-1.04x (cold L2), and from
// M = 2048 slower, the grid's many small blocks launched slower than they finish (rms_norm
// [16384, 896] 23.9 us against 17.9). LayerNorm (N = 640-1016; its split rows, one warp of three
// or four groups, or pairs before): 0.82-0.86x at M = 256, 0.84-0.95x at M = 512 and 1024, at
// M = 2048 0.96-1.08x. Launches of 128 x 1 at batches that do not fill the GPU take the same
// kernel (row_fit_of): RMSNorm's forms at M = 67-150 (N = 896 and 1016) 0.70-0.78x the graph
// replay time of the kernel they took before ("Norm v48"). On 64-lane waves (AMD CDNA) the same
// rule holds, not measured there.
constexpr int64_t kOneGroupMaxRowsPerSm = 2;
constexpr int64_t kLayerOneGroupMaxRowsPerSm = 8;
// The fused add's LayerNorm on rows of at least this many of those groups (N = 896-1016 bf16)
// keeps one group a thread at every batch, where past the bound above it took four groups on 32
// threads, two rows a block (the one-warp rule, its last slots mostly idle; on 64-lane waves
// pairs first, not measured there). On an H200 (sweeps in one binary, two rounds, cold L2, with
// PDL; bench/NOTES.md, "Norm v60"): N = 896 / 960 / 1016 0.96-0.98x the time at M = 2048 and
// 4096, 0.92-0.93x at 8192, 0.94-0.96x at 16384, 0.97-0.99x at 32768 (fused_add_layer_norm
// [16384, 960] 33.9 us against 35.6). At N = 776 (97 groups) the two measured level (0.96-1.04x
// by batch), and LayerNorm alone's plain one-warp rows led by 1.1-1.4x: those keep the bound.
constexpr int64_t kLayerAddOneGroupAnyBatchMinGroups = 112;

// The registers path's three (or, with allow_five, five) groups a thread on a power-of-two number
// of threads that cover the row's `groups` exactly, in a form with that kernel: into *c, or false
// with *c as it was.
bool exact_odd_items(const NormShape& shape, int64_t groups, bool allow_five, NormConfig* c) {
  for (const int odd : kNormOddItemCounts) {
    if (odd == 5 && !allow_five) continue;
    const int64_t threads = groups / odd;
    if (groups % odd == 0 && next_pow2(threads) == threads && odd_items_built(shape, odd) &&
        make_norm_config(shape, NormConfig::Path::kRegisters, static_cast<int>(threads), odd,
                         c)) {
      return true;
    }
  }
  return false;
}

// Half the threads that hold a row of `groups` in pairs (a power of two).
int layer_plain_three_threads(int64_t groups) {
  return static_cast<int>(next_pow2(ceil_div(groups, 2)) / 2);
}

// A registers config whose trigger is left at the start, one block a row's threads: the launch
// moves the trigger after the writes if the next grid's blocks would crowd this one's
// (NormConfig::trigger_late_where_crowded, next_grid_crowded: from the kernel's own residency).
NormConfig with_trigger_rule(NormConfig c) {
  c.trigger_late_where_crowded = !c.trigger_after_writes && c.split_blocks == 1;
  return c;
}

}  // namespace

// LayerNorm alone's plain calls on rows of more than kLayerPairsAnyBatchMaxGroups whole groups
// that three groups a thread on half the pairs' threads cover (129-192 groups: N = 1032-1536
// bf16, on 64 threads) take those three, one block a row, at every batch: past the pairs' bound
// (kLayerPairsMaxSmGroups) in place of the pairs, below the batches that fill the GPU in place of
// one group on 256 threads, and never split over a cluster's blocks (take_split_rows). On an H200
// (sweeps of every launch in one binary, two rounds, graph replay with PDL; bench/NOTES.md,
// "Norm v60"), against the split rows taken before: layer_norm [1 / 32 / 66, 1152] 1.31 / 1.38 /
// 1.40 us against 1.49 / 1.53 / 1.58 in four blocks, [80 / 120 / 132, 1152] 1.42 / 1.48 / 1.50
// against 1.56 / 1.61 / 1.67 in two; N = 1536 0.86-0.92x alike.
bool layer_plain_three_rows(const NormShape& shape) {
  const int64_t groups = ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
  return shape.layer && !shape.adds_residual && shape.plain_form && shape.whole_groups &&
         groups > kLayerPairsAnyBatchMaxGroups && groups <= kLayerPairsMaxGroups &&
         groups <= 3 * static_cast<int64_t>(layer_plain_three_threads(groups));
}

void widen_short_row_blocks(int64_t groups, NormConfig* c) {
  if (c->path != NormConfig::Path::kRegisters) return;
  int rows = c->rows_per_block;
  while (static_cast<int64_t>(rows) * groups < kShortRowBlockGroups &&
         2 * rows * c->threads_per_row <= kNormMaxThreads) {
    rows *= 2;
  }
  c->rows_per_block = rows;
  c->block_threads = rows * c->threads_per_row;
}

NormConfig norm_config_for_runs(const NormShape& shape, NormConfig c) {
  if (c.path != NormConfig::Path::kRegisters) return c;
  const int64_t groups = ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
  c.split_blocks = 1;
  c.output_parts = 1;
  c.weight_at_output = false;
  c.plain = false;
  c.packed_row = false;
  if (c.items > kNormMaxItems || (c.items & (c.items - 1)) != 0) c.items = kNormMaxItems;
  while (static_cast<int64_t>(c.threads_per_row) * c.items < groups &&
         c.threads_per_row < kNormMaxThreads) {
    c.threads_per_row *= 2;
  }
  c.rows_per_block = std::max(1, std::min(c.rows_per_block, kNormMaxThreads / c.threads_per_row));
  c.block_threads = c.threads_per_row * c.rows_per_block;
  return c;
}

NormConfig choose_norm_config(const NormShape& shape) {
  const int64_t groups = ceil_div(std::max<int64_t>(shape.cols, 1), shape.group_elems);
  const int max_items = kNormMaxItems;
  NormConfig c;
  if (groups <= static_cast<int64_t>(kMaxRegisterThreadsPerRow) * max_items) {
    // Few rows: as few groups per thread as spread the row over at most latency_threads threads
    // (512 for the longest rows), for a short chain of dependent instructions per thread
    // and few warps to reduce over. Rows enough to fill the GPU: four groups per thread, for more
    // bytes in flight per thread. Items stay powers of two.
    const bool long_chain = (shape.layer || shape.adds_residual) && !shape.fp8_output &&
                            groups % kLongChainLatencyThreadsPerRow == 0;
    // Decode-size batches whose outputs lie apart from their inputs: each row's outputs shared by
    // up to four blocks (NormConfig::output_parts), as long as the grid keeps a quarter of the SMs
    // or more per row's part (M = 1-16 take four on an H100, 17-33 two). Measured on an H100
    // (graph replay, NOTES.md "Norm v15"): rms_norm [1, 8192] 1.59 -> 1.36 us, [32, 8192] 1.72 ->
    // 1.64, layer_norm [1, 8192] 2.29 -> 2.10, fused_add_rms_norm out of place [1, 4096] 1.54 ->
    // 1.43; four parts at M = 32 read 0.04-0.07 us slower than two, and none gained at M = 64.
    // (The shared kernels take exact rows of 1, 2 or 4 whole groups per thread: at these batch
    // sizes, rows of a power-of-two number of whole groups.) RMSNorm's fp8 forms too (not the
    // fused add's: NormTraits::kSharedRowsBuilt; each block reduces the whole row, so each knows
    // its scale), with at least kFp8MinGroupsPerPart groups a part.
    const bool fp8_alone = shape.fp8_output && !shape.adds_residual;
    const int64_t max_parts =
        fp8_alone ? std::max<int64_t>(1, groups / kFp8MinGroupsPerPart) : kNormMaxOutputParts;
    int output_parts = 1;
    if (shape.outputs_apart && !(shape.fp8_output && shape.adds_residual) && shape.whole_groups &&
        next_pow2(groups) == groups) {
      while (output_parts < std::min<int64_t>(kNormMaxOutputParts, max_parts) &&
             shape.rows * output_parts * 4 <= static_cast<int64_t>(shape.sm_count)) {
        output_parts *= 2;
      }
    }
    // RMSNorm's short-chain spread is for a row on one block; with its outputs shared, 256 threads
    // measured ahead (rms_norm [1, 4096] 1.21 against 1.25 us at 128 x 4, both in four parts;
    // [32, 4096] 1.38 against 1.42, both in two).
    const bool short_chain = !shape.layer && !shape.adds_residual && output_parts == 1;
    const int64_t pair_threads = groups / 2;
    const bool layer_pairs = shape.layer && !shape.fp8_output && groups % 2 == 0 &&
                             next_pow2(pair_threads) == pair_threads &&
                             pair_threads >= kLayerPairsMinThreadsPerRow &&
                             pair_threads <= kMaxRegisterThreadsPerRow;
    // LayerNorm's shared rows hold their weight and bias beside the row at any group count
    // (kSharedRowsHoldAffine, norm_kernel.cuh), so they take four groups a thread rather than
    // spread past kLatencyThreadsPerRow threads, whose merges of the moments across sixteen warps
    // then lie on the path (bench/NOTES.md, "Norm v31").
    const bool shared_layer = shape.layer && output_parts > 1;
    const int latency_threads = shared_layer && groups > 2 * kLatencyThreadsPerRow
                                    ? kLatencyThreadsPerRow
                                : layer_pairs ? static_cast<int>(pair_threads)
                                : long_chain  ? kLongChainLatencyThreadsPerRow
                                : short_chain ? kShortChainLatencyThreadsPerRow
                                              : kLatencyThreadsPerRow;
    int fewest = 1;
    while (fewest < max_items && static_cast<int64_t>(fewest) * latency_threads < groups) {
      fewest *= 2;
    }
    int most = 1;
    while (most < max_items && most < groups) most *= 2;
    const int64_t batch_groups = shape.rows * groups;
    // A grid of at most half as many rows as SMs is a decode step's: latency, not bytes in
    // flight, sets its time, whatever its groups. The long chains (and LayerNorm's pairs) keep
    // their spread there: layer_norm [32, 8192] replayed in 2.56 us at 512 x 2 against 2.72 at
    // 256 x 4, fused_add_layer_norm 3.00 against 3.29 (H100, NOTES.md "Norm v13").
    const bool small_grid = 2 * shape.rows <= shape.sm_count;
    const bool fills_gpu = batch_groups > static_cast<int64_t>(shape.sm_count) * kFullSmGroups &&
                           !((long_chain || layer_pairs) && small_grid);
    int items = fills_gpu ? std::max(fewest, most) : fewest;
    const bool short_rows = fills_gpu && next_pow2(groups) == groups &&
                            groups < static_cast<int64_t>(kShortRowMinThreadsPerRow) * max_items &&
                            !(shape.fp8_output && !shape.adds_residual);
    if (short_rows) {
      items = static_cast<int>(std::max<int64_t>(1, groups / kShortRowMinThreadsPerRow));
    }
    // The fused add's kernels (one 512-thread block per SM: min_blocks_per_sm) at batches that fill
    // the GPU: two groups per thread where they cover the row in at most kLatencyThreadsPerRow
    // threads at mid batches, or exactly in the widest block (N = 8192 bf16) at any; the latter
    // measured level with four groups at M = 64-2048 and clear of the loss below at M = 256 (4.07
    // against 7.01 us with PDL). Not for fp8 outputs, whose dynamic form lost 10-25% at two groups
    // per thread (NOTES.md, v9). LayerNorm (either form) takes the mid-batch rule too, up to its
    // own bound: layer_norm [128, 4096] replayed in 2.30 us at 256 x 2 against 2.92 at 128 x 4,
    // [256, 4096] 2.79 against 2.96, fused_add_layer_norm 2.64 / 3.33 against 3.06 / 3.63 (H100,
    // NOTES.md "Norm v13"); its fused add's bf16 rows at every batch (kLayerAddPairsMinThreads).
    const bool one_block_per_sm = shape.min_blocks_per_sm == 1 && !shape.fp8_output;
    const bool pairs_cover_row = groups <= 2 * kLatencyThreadsPerRow;
    const int64_t sm_count = shape.sm_count;
    const bool mid_batch = batch_groups <= sm_count * kMidSmGroups && pairs_cover_row;
    const bool layer_mid_batch = batch_groups <= sm_count * kLayerMidSmGroups && pairs_cover_row;
    // The plain form (NormShape::plain_form) from half as many rows as SMs up to twice as many:
    // two groups per thread where they cover the row in at most 512 threads (N <= 8192 bf16),
    // with the next launch triggered after the writes. Measured on an H100 (graph replay,
    // NOTES.md "Norm v17"): rms_norm [256, 4096] 2.05 -> 1.88 us, [128, 4096] 1.54 -> 1.49,
    // [256, 8192] 2.95 -> 2.83; fused_add_rms_norm [256, 4096] 2.36 -> 2.25, [128, 4096] 1.83 ->
    // 1.74, [256, 8192] 3.80 -> 3.50, [128, 8192] 2.71 -> 2.53. Not at M = 32 (rms_norm [32, 8192]
    // 1.45 -> 1.67) nor past the bound (rms_norm [512, 8192] cold 10.14 -> 10.53 us).
    const bool plain_mid = shape.plain_form && !shape.layer && fills_gpu && !small_grid &&
                           shape.rows <= 2 * sm_count &&
                           groups <= 2 * kMaxRegisterThreadsPerRow;
    // The rows take those two groups only where two cover the row exactly (a power-of-two number
    // of groups), or, for LayerNorm, where its rows are not whole groups (no kernel of three) or
    // are at most kLayerPairsMaxGroups. Elsewhere pairs leave slots idle in a kernel that tests
    // every item against the row's end; four groups per thread, or three or five where they cover
    // the row (below), replayed faster at M = 256 on an H200 (bench/NOTES.md, "Norm v25"):
    // fused_add_rms_norm N = 5120 4.56 -> 2.90 us, 6144 4.69 -> 3.14, 7168 4.90 -> 3.80, 3072
    // 2.57 -> 2.23; rms_norm 5120 2.69 -> 2.26, 3072 2.02 -> 1.81, 3584 2.09 -> 2.05. LayerNorm
    // likewise past kLayerPairsMaxGroups (H200, NOTES.md "Norm v41", the best of either PDL
    // placement): layer_norm [512, 2560] 7.65 -> 7.07 us cold at 128 x 3, [512, 3584] 8.22 ->
    // 7.68 at 128 x 4; fused_add_layer_norm 9.15 -> 8.16 and 9.98 -> 9.23.
    const bool pairs_exact = next_pow2(groups) == groups;
    const int64_t warp = shape.warp_size;
    const bool layer_one_warp =
        shape.layer && shape.whole_groups && !pairs_exact && groups > 2 * warp &&
        groups <= kNormMaxItems * warp &&
        (groups == 3 * warp || shape.rows >= kLayerOneWarpMinRowsPerSm * sm_count);
    const bool whole_pairs_kept =
        groups <= kLayerPairsAnyBatchMaxGroups ||
        (groups <= kLayerPairsMaxGroups && batch_groups <= sm_count * kLayerPairsMaxSmGroups &&
         !layer_plain_three_rows(shape));
    const bool layer_pairs_kept =
        shape.layer && !layer_one_warp && (!shape.whole_groups || whole_pairs_kept);
    const bool layer_add_pairs = shape.layer && shape.adds_residual && pairs_exact &&
                                 shape.whole_groups && shape.group_elems == 8 &&
                                 shape.min_blocks_per_sm == 2 &&
                                 pair_threads >= kLayerAddPairsMinThreads &&
                                 pair_threads <= kMaxRegisterThreadsPerRow;
    if (fills_gpu && items > 2 && (pairs_exact || layer_pairs_kept) &&
        ((one_block_per_sm && (mid_batch || groups == 2 * kMaxRegisterThreadsPerRow)) ||
         (shape.layer && layer_mid_batch) || plain_mid || layer_add_pairs)) {
      items = 2;
    }
    // RMSNorm alone's plain rows at those mid batches likewise keep at least 128 threads: rows of
    // 128 groups (N = 1024 bf16) one group a thread rather than pairs on 64, rms_norm [166, 1024]
    // 1.07 us against 1.39 (32 x 4: 1.30), cold [264, 1024] 4.96 against 5.28 (H100, bench/
    // NOTES.md "The triggers set by shape, swept"). A/B against pairs (H100, NOTES.md "Mid-batch
    // launches, measured"): [136 / 166 / 200, 1024] 1.35 / 1.40 / 1.44 -> 1.04 / 1.07 / 1.11 us,
    // cold [264, 1024] 5.95 -> 5.67, level at 100 rows.
    const bool rms_plain_mid = plain_mid && !shape.adds_residual;
    if (fills_gpu && ((shape.adds_residual && !shape.layer && one_block_per_sm) || rms_plain_mid) &&
        next_pow2(groups) == groups && groups >= kRmsMinThreadsPerRow) {
      while (items > 1 && groups / items < kRmsMinThreadsPerRow) items /= 2;
    }
    // Rows of 65-127 whole groups (N = 520-1016 bf16, such as 896 and 960; LayerNorm's 640 and 768
    // too) in the forms with fixed thread counts, at batches that fill the GPU up to
    // kOneGroupMaxRowsPerSm rows an SM (LayerNorm's kLayerOneGroupMaxRowsPerSm): one group a thread
    // on 128 threads, one row a block, in the kernel that tests each thread's only group
    // (one_group_last_partial), whose few registers hold up to sixteen such rows an SM. RMSNorm's
    // rows that three or five groups a thread cover exactly (640: 16 x 5, 768: 32 x 3) keep those.
    NormConfig odd_cover;
    const int64_t one_group_max_rows =
        (shape.layer ? kLayerOneGroupMaxRowsPerSm : kOneGroupMaxRowsPerSm) * sm_count;
    const bool layer_add_one_group_any_batch =
        shape.layer && shape.adds_residual && groups >= kLayerAddOneGroupAnyBatchMinGroups;
    const bool one_group_rows =
        fills_gpu && shape.fixed_threads_built && shape.whole_groups &&
        one_group_last_partial(groups, kNormSplitShortThreads, 1) &&
        (shape.rows <= one_group_max_rows || layer_add_one_group_any_batch) &&
        (shape.layer || !exact_odd_items(shape, groups, true, &odd_cover));
    if (one_group_rows) items = 1;
    make_norm_config(shape, NormConfig::Path::kRegisters,
                     one_group_rows ? kNormSplitShortThreads
                                    : static_cast<int>(next_pow2(ceil_div(groups, items))),
                     items, &c);
    // The plain kernels up to twice as many rows as SMs, and LayerNorm's at every batch: alone
    // (but its one-group rows, not measured so), and fused with the add on rows of 512 threads x
    // four groups. Where the weight and bias come after the reductions group by group (512
    // threads), the general kernel's extra work (the weight offset, the fills of an absent weight
    // or bias, the stats' checks, two tails) lies on each row's path between a group's store and
    // the next group's loads. On an H200 (bench/NOTES.md, "Norm v51", "Norm v52"): LayerNorm
    // alone N = 16384 0.92-0.97x the time at M >= 512, N = 2048 0.96-1.00x, N = 4096 0.98-1.02x,
    // N = 8192 0.99-1.03x by machine; the fused add N = 16384 0.96-1.00x in bf16, 0.97-0.98x in
    // fp16 (its other shapes level to 1.04x slower). RMSNorm measured level to 1.05x slower and
    // keeps the bound. Rows of three or five groups a thread, or short of the last slots, have
    // plain kernels in LayerNorm alone only (layer_plain_registers_kernel; "Norm v53", "v57").
    auto takes_plain = [&](const NormConfig& k) {
      const bool layer_plain_every_batch =
          shape.layer && (shape.adds_residual
                              ? k.threads_per_row == kNormMaxThreads && k.items == kNormMaxItems
                              : !one_group_rows);
      return shape.plain_form && (shape.rows <= 2 * sm_count || layer_plain_every_batch);
    };
    // Rows of 3 x 2^k or 5 x 2^k whole groups at batches that fill the GPU: that many groups per
    // thread, no idle slot; rows of 4 x 2^k to 5 x 2^k: five on 2^k threads (five_last_partial)
    // where five would be taken, else, and up to 6 x 2^k: three on 2^(k+1), the last slot of some
    // idle rather than of all (norm_config.h). LayerNorm at its mid batches (where it took pairs
    // before) and up to kLayerThreeOverFiveRowsPerSm rows an SM takes the three on twice the
    // threads rather than five: layer_norm [256, 2560] 2.53 us at 128 x 3 against 2.87 at 64 x 5,
    // [512, 2560] 7.07 against 8.00 cold, [128 / 256, 5120] 2.58 / 3.06 at 256 x 3 against 2.83 /
    // 3.25 at 128 x 5, [512, 5120] 8.38 against 8.74 (H200, NOTES.md "Norm v41"). On rows of
    // 9 x 2^k groups up to kLayerThreeOverLastFiveSmGroups groups an SM (H200, "Norm v58"):
    // layer_norm [2048, 1152] 7.87-8.03 us at 64 x 3 against 8.80-9.06 at 32 x 5 (fp16 8.22
    // against 8.80), [1024, 2304] 7.84-7.97 at 128 x 3 against 8.61-8.90; past the bound five
    // led: [2048, 2304] 0.98x, [1024, 4608] 0.94x the time of three, [16384, 2304] 0.95x.
    const bool layer_three_over_five =
        shape.layer && (layer_mid_batch || shape.rows <= kLayerThreeOverFiveRowsPerSm * sm_count);
    const bool layer_three_over_last_five =
        shape.layer && batch_groups <= kLayerThreeOverLastFiveSmGroups * sm_count;
    // Plain calls without the add, rows of three groups on 256 or 512 threads (N = 6144 and 12288
    // bf16), take the kernels built for more blocks an SM (NormConfig::packed_row) past twice the
    // rows the SMs hold of the other kernels (min_blocks_per_sm blocks of 512 threads), where
    // fewer waves of blocks pay back the repacking's instructions. Cold L2 on an H200 (bench/
    // NOTES.md, "Norm v54"): layer_norm bf16 N = 12288 0.87-0.95x the time at M = 1024-65536
    // (82.5 -> 94.1% of copy at 16384) but 1.05x at M = 512, N = 6144 0.95-0.96x at M >= 2048 but
    // 1.01x at 1024, 1.02-1.13x at M = 256 (graphs); on 64 and 128 threads, and at five groups,
    // level to 1.03x. rms_norm, where the general kernel ran before ("Norm v55"): 12288 0.88-0.93x
    // at M >= 1024 (89.7 -> 97.6% at 16384), 6144 0.98-0.99x at M >= 2048.
    auto takes_packed_row = [&](const NormConfig& k) {
      return !shape.adds_residual && shape.plain_form && shape.fixed_threads_built &&
             k.rows_per_block == 1 && packed_row_built(k.items, k.threads_per_row) &&
             shape.rows > 2 * sm_count * (shape.min_blocks_per_sm * kNormMaxThreads /
                                          k.threads_per_row);
    };
    if (fills_gpu && items == kNormMaxItems) {
      if (shape.whole_groups && exact_odd_items(shape, groups, !layer_three_over_five, &c)) {
        // A decode step's rows split all the same (M = 32 at N = 5120, 6144 bf16).
        NormConfig split = c;
        split.plain = shape.plain_form;
        c.packed_row = takes_packed_row(c);
        c.plain = takes_plain(c) || c.packed_row;
        return with_trigger_rule(take_split_rows(shape, &split) ? split : c);
      }
      const bool five = !layer_three_over_five && !layer_three_over_last_five &&
                        make_norm_config(shape, NormConfig::Path::kRegisters,
                                         c.threads_per_row / 2, 5, &c);
      if (!five && takes_last_partial(shape.whole_groups, shape.narrow_accesses, groups,
                                      c.threads_per_row, 3)) {
        make_norm_config(shape, NormConfig::Path::kRegisters, c.threads_per_row, 3, &c);
      }
    }
    // RMSNorm's rows of fewer groups than kOddShortRowGroups (either form) at batches that do not
    // fill the GPU, where one group a thread leaves threads idle in the bounds-tested kernel:
    // three groups a thread on 2^k threads where they cover the row exactly, the bounds-free
    // kernel on fewer warps (N = 768 bf16: one warp of 32 x 3 rather than 128 x 1, 32 of its
    // threads idle); five too in the fp8 forms. Graph replay on an H200 at M = 1 / 32 / 128
    // against the best one-group launch (bench/NOTES.md, "Norm v42"): rms_norm N = 768 0.86 /
    // 0.85 / 0.82x (1.19 -> 1.02 us at M = 1), 384 0.98 / 0.84 / 0.83x, 192 1.02 / 0.85 / 0.87x;
    // fused_add_rms_norm 768 0.87 / 0.92 / 0.86x; rms_norm_quant_fp8 768 0.73 / 0.73 / 0.69x, 640
    // (16 x 5) 0.90 / 0.82 / 0.77x. Five groups lost in the other forms (rms_norm [1, 640] 1.12x,
    // the fused add 1.18x), as did three groups for LayerNorm (layer_norm [1, 768] 1.77 us
    // against 1.69), which keep one group a thread.
    if (!fills_gpu && !shape.layer && shape.whole_groups && groups < kOddShortRowGroups) {
      exact_odd_items(shape, groups, shape.fp8_output, &c);
    }
    if (!fills_gpu && layer_plain_three_rows(shape)) {
      make_norm_config(shape, NormConfig::Path::kRegisters, layer_plain_three_threads(groups), 3,
                       &c);
    }
    if (short_rows) widen_short_row_blocks(groups, &c);
    // The fused add's 256-thread rows of four groups keep one row a block at one to two rows an
    // SM too. They took two a block there against the next grid's early blocks ("Norm v13")
    // before the trigger by residency, which now covers that loss: one row a block replayed
    // fused_add_rms_norm [166 / 200, 7168] in 3.09 us against 4.74 / 5.08 in pairs (H100,
    // bench/NOTES.md "The triggers set by shape, swept"). Where the split kernels are built, those
    // rows split over two blocks there instead (take_split_rows).
    // The fused add's four-group rows in 512-thread blocks (N = 16384 bf16) at more rows than
    // SMs: the weight loaded at the output, for two blocks per SM (NormConfig). Where that makes
    // a grid of one to two blocks per SM, the next call's blocks launched early would take the
    // second slots (the v9 anomaly again: in place, [200, 16384] replayed in 10.34 us against
    // 7.68 with the weight beside the row), so there the trigger moves after the writes too.
    // Measured on an H100 (NOTES.md "Norm v14"), graph replay: fused_add_rms_norm [133, 16384]
    // 6.87 -> 5.48 us, [200, 16384] 7.68 -> 6.18, [256, 16384] 8.27 -> 7.47; cold L2:
    // [512, 16384] 24.3 -> 22.5, [2048, 16384] 92.2 -> 90.7; [300, 16384] 17.0 -> 17.5 (the one
    // loss seen).
    // 16-bit x only: there the held weight takes the kernel to 80-104 registers (one block per
    // SM) and the late one to 62-64; fp32 x's kernel holds two blocks either way (64 / 46).
    const bool fused_add_wide_rows = shape.adds_residual && !shape.layer &&
                                     c.path == NormConfig::Path::kRegisters &&
                                     c.items == kNormMaxItems &&
                                     c.block_threads == kNormMaxThreads &&
                                     c.threads_per_row * c.items == groups && shape.whole_groups;
    // Past kFusedAddWeightAtOutputMaxRowsPerSm rows an SM the plain calls of those rows take
    // the plain kernel instead (the weight beside the row).
    const bool fused_add_wide_plain =
        fused_add_wide_rows && shape.plain_form &&
        shape.rows > kFusedAddWeightAtOutputMaxRowsPerSm * sm_count;
    c.weight_at_output = shape.group_elems == 8 && fills_gpu && one_block_per_sm &&
                         fused_add_wide_rows && shape.rows > shape.sm_count &&
                         !fused_add_wide_plain;
    // The fp8 fused add's 256 x 4 rows at one to two rows an SM once took the late trigger by
    // shape ("Norm v23"); the rule by residency sets it from 199 rows now (three blocks an SM),
    // and below that the early one replayed faster: fused_add_rms_norm_quant_fp8 [166, 7168]
    // 3.36 us against 3.46 (H100, bench/NOTES.md "The triggers set by shape, swept"); A/B at
    // 133-198 rows of N = 7168 and 8192 0.97-1.00x, level at 232 ("Mid-batch launches, measured").
    c.trigger_after_writes = (c.weight_at_output && shape.rows <= 2 * sm_count) ||
                             (plain_mid && c.items == 2);
    // Elsewhere the trigger stays at the kernel's start: the late one (trigger_after_writes)
    // measured level at M = 1 in two of three sweeps and +-0.1-0.7 us either way by shape at
    // M = 32-256, with no rule that held across runs (bench/NOTES.md, "Norm v13").
    if (norm_rows_shareable(shape, c)) c.output_parts = output_parts;
    c.plain = takes_plain(c) || fused_add_wide_plain;
    if (!one_group_rows) take_split_rows(shape, &c);
    return with_trigger_rule(c);
  }
  return choose_long_row_norm_config(shape);
}

}  // namespace fusekit::gpu
