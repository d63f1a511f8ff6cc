// The two ways of running the cases: on GPU 0 through GpuTimer, or on the CPU with std::chrono.
//
// Both fill one Row per case and stop at the first failed call (a benchmark that skips errors
// reports numbers for work that never ran); bench_main.cc picks the mode and prints the rows.
#pragma once

#include <string>
#include <vector>

#include "gpu_timer.h"
#include "report.h"
#include "shapes.h"

namespace fusekit::bench {

struct RunOptions {
  bool sweep = false;  // also time the ops' sweep variants
  // When not empty, --sweep times only the variants whose label contains it, beside the
  // heuristic's own (labels ending in " *"), for a quick look at one kind of launch.
  std::string sweep_only;
  int gpu_runs = 50;   // at least this many cold-L2 runs per case
  FlushMode flush = FlushMode::kRead;  // how cold-L2 runs empty the L2 (gpu_timer.h)
  // Also time, per case, a device copy moving the case's bytes (GpuTimer::time_copy_cold): the
  // roofline at that size, which a call of tens of MB cannot reach at copy_bandwidth's rate.
  bool size_copy = false;
};

// Return 0, or 1 after printing what failed. `env` gets the device, copy bandwidth and floor.
int run_gpu(const RunOptions& options, const Plan& plan, Env* env, std::vector<Row>* rows);
int run_cpu(const Plan& plan, Env* env, std::vector<Row>* rows);

}  // namespace fusekit::bench
