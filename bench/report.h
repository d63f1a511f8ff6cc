// Results of a run and their two outputs: the aligned table on stdout and the --json file.
//
// Kept apart from the timing code so that both modes (GPU and CPU) report through one path and
// the JSON schema lives in one place; compare.py reads that schema, and names its keys after the
// anchor script's where they mean the same thing (copy_GBps, GBps, us, graph_us).
#pragma once

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "fusekit/status.h"
#include "shapes.h"

namespace fusekit::bench {

constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

struct SweepResult {
  std::string label;
  double us = kNoValue;
  double graph_us = kNoValue;
};

struct Row {
  std::string op;
  int64_t m = 0, n = 0;
  std::string dtype;
  int64_t bytes = 0;
  double us = kNoValue;        // GPU: cold L2; CPU: warm, std::chrono
  int runs = 0;
  double graph_us = kNoValue;  // GPU, M <= 256 only
  int graph_calls = 0;
  double gbps = kNoValue;      // bytes / us
  double pct_copy = kNoValue;  // gbps / the run's copy bandwidth
  double copy_us = kNoValue;   // --size-copy: a device copy of the same bytes, timed as `us`
  double pct_size_copy = kNoValue;  // copy_us / us: % of what a copy of these bytes reaches
  std::string config;
  std::vector<SweepResult> sweep;
};

struct Env {
  std::string mode;  // "gpu" or "cpu"
  std::string device;
  std::string backend;  // the library's GPU backend ("cuda", "hip", "none")
  std::string no_gpu_reason;
  std::string version;
  std::string date;  // UTC, ISO 8601
  std::string commit;
  std::string shapes_path;
  std::string flush;  // GPU runs: the L2 flush before cold-L2 runs ("read" or "write")
  int64_t row_pad = 0;  // --row-pad: per-row tensors' rows this many elements beyond their width
  double copy_gbps = kNoValue;
  int64_t copy_bytes = 0;
  double graph_floor_us = kNoValue;
  int64_t l2_bytes = 0;
  int sm_count = 0;
  int cpu_threads = 0;
};

void print_table(std::FILE* out, const Env& env, const std::vector<Row>& rows);
// Per op and shape with --sweep: variant -> us / graph_us / % copy (from us).
void print_sweeps(std::FILE* out, const Env& env, const std::vector<Row>& rows);
Status write_json(const std::string& path, const Env& env, const std::vector<Row>& rows,
                  const Plan& plan);

}  // namespace fusekit::bench
