// The benchmark's table of op families and ops.
//
// The driver knows nothing about any particular op: it reads a family's section of the shapes
// file, allocates the tensors the family declares (slots), and calls each op through a function
// pointer. So a new op family (act_and_mul, ...) is one more FamilySpec in ops.cc's table, and
// the driver, the shapes file reader and the output need no change. Sections of the shapes file
// naming no known family are skipped with a note.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusekit/fp8.h"
#include "fusekit/status.h"
#include "fusekit/tensor.h"
#include "gpu_timer.h"

namespace fusekit::bench {

constexpr int kMaxSlots = 8;

// One tensor of a family: [M, cols_mult * N] per row, or [cols_mult * N] when !per_row. Its
// storage holds at least min_row_bytes per row (M of them): what a view of another dtype over it
// needs, such as the fp8 forms' float32 scales over a slot of N 16-bit elements a row, N = 1.
struct SlotSpec {
  const char* name;
  bool per_row;
  int cols_mult;
  int min_row_bytes = 0;
};

// The tensors of one benchmark case, allocated by the driver from the family's slots. Slots an op
// does not use are absent (TensorView()).
struct OpArgs {
  TensorView t[kMaxSlots];
  int64_t m = 0;
  int64_t n = 0;
  DType dtype = DType::kBFloat16;
  Fp8Format fp8_format = Fp8Format::kE4M3FN;  // the codes of ops with an fp8 output (--fp8)
};

// An alternative launch of the same op for --sweep, timed like the op itself.
struct SweepVariant {
  std::string label;
  StreamCall call;
};

struct OpSpec;
using DescribeFn = Status (*)(const OpSpec& op, const OpArgs& args, const GpuFacts& gpu,
                              std::string* text);
using SweepFn = Status (*)(const OpSpec& op, const OpArgs& args, const GpuFacts& gpu,
                           std::vector<SweepVariant>* variants);

struct OpSpec {
  const char* name;         // as reported and as --ops selects it
  const char* shapes_name;  // the name the shapes file's "ops" list uses for it
  uint32_t slots;           // bit i: uses slot i
  uint32_t inputs;          // bit i: slot i is read (refilled with random values before timing)
  int variant;              // the family's own tag for the op (passed back to the hooks)
  // Bytes moved by one call: every input read once, every output written once.
  int64_t (*bytes)(int64_t m, int64_t n, int64_t elem_bytes);
  // One call through the public API on `stream` (nullptr on the CPU).
  Status (*call)(const OpSpec& op, const OpArgs& args, Stream stream);
  // GPU only, may be null: the launch configuration the library picks, and sweep alternatives.
  DescribeFn describe;
  SweepFn sweep;
  bool fp8_out = false;  // writes fp8 codes, in OpArgs::fp8_format
};

struct FamilySpec {
  const char* section;  // key of the family's section in the shapes file
  std::vector<SlotSpec> slots;
  std::vector<OpSpec> ops;
};

const std::vector<FamilySpec>& op_families();

}  // namespace fusekit::bench
