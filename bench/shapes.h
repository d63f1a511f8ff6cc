// Which cases to run: the shapes file (default bench/shapes.json) and the command-line filters,
// turned into a flat list of (op, M, N, dtype) cases in the order they are reported.
//
// The shapes file is the project's shared definition of "the default shapes" (the anchors were
// measured on a subset of it), so the benchmark reads it rather than hard-coding shapes. Its
// schema: top-level members that are objects are sections, one per op family, each with "ops",
// "M" and "N" lists and optionally "skip_if_bytes_over" and "dtype"; other members ("about") are
// ignored. Sections or ops the benchmark does not know are skipped with a note, not an error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusekit/status.h"
#include "fusekit/tensor.h"
#include "ops.h"

namespace fusekit::bench {

struct PlanOptions {
  std::string path;               // the shapes file
  std::vector<std::string> ops;   // --ops: op names; empty = the ops each section lists
  std::vector<int64_t> m, n;      // --M / --N: replace the sections' lists when non-empty
  std::string dtype;              // --dtype; empty = the section's "dtype", else bf16
  std::string fp8;                // --fp8: the fp8 ops' format; empty = e4m3fn
  int64_t max_bytes = 0;          // --max-bytes (or the CPU default); 0 = no cap of our own
  // --row-pad: each per-row tensor's rows lie this many elements apart beyond their width (a
  // strided view of a wider buffer; pads off the 16-byte group leave rows unaligned).
  int64_t row_pad = 0;
};

struct Case {
  const FamilySpec* family = nullptr;
  const OpSpec* op = nullptr;
  int64_t m = 0;
  int64_t n = 0;
  DType dtype = DType::kBFloat16;
  int64_t bytes = 0;  // per call
  Fp8Format fp8_format = Fp8Format::kE4M3FN;  // ops with an fp8 output (OpSpec::fp8_out)
};

struct Skipped {
  std::string op;
  int64_t m = 0, n = 0, bytes = 0;
  std::string reason;
};

struct Plan {
  int64_t row_pad = 0;  // PlanOptions::row_pad, for every case
  std::vector<Case> cases;
  std::vector<Skipped> skipped;    // cases over a byte cap
  std::vector<std::string> notes;  // sections and ops that were ignored
};

Status make_plan(const PlanOptions& options, Plan* plan);

// "bf16", "fp16", "fp32" (also accepts the long names) <-> DType.
bool parse_dtype(const std::string& name, DType* dtype);
const char* short_dtype_name(DType dtype);

// "e4m3fn", "e4m3fnuz" -> Fp8Format.
bool parse_fp8_format(const std::string& name, Fp8Format* format);

// The op names the benchmark knows, comma-separated (for messages).
std::string known_op_names();

}  // namespace fusekit::bench
