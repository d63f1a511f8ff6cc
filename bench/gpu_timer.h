// GPU timing for the benchmark, behind an interface with no CUDA or HIP header.
//
// The driver (bench_main.cc) stays plain C++ and sees work only as a callable that issues GPU work
// on a stream it is handed. Everything that touches the runtime (events, the L2 flush, graph
// capture and replay) is in gpu_timer.cu, compiled as CUDA or HIP; gpu_timer_none.cc stands in for
// builds without a GPU backend, so the driver links either way and decides at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "fusekit/status.h"
#include "fusekit/tensor.h"

namespace fusekit::bench {

// Issues one call's worth of GPU work on `stream`. Returns the op's Status; timers stop at the
// first failed call and return its Status.
using StreamCall = std::function<Status(Stream stream)>;

// What the benchmark reports about the device, and what the sweep needs to rebuild the launch
// heuristic's inputs.
struct GpuFacts {
  std::string name;
  int64_t l2_bytes = 0;
  int sm_count = 0;
  int warp_size = 32;
  int max_smem_per_block = 0;
  bool supports_pdl = false;
};

// How time_cold empties the L2 before each timed call.
//  kRead: a kernel reads a buffer twice the L2's size. The L2 is left holding clean lines, so the
//         timed call pays for its own traffic only. The default.
//  kWrite: a memset of that buffer (what triton's do_bench does). The L2 is left full of dirty
//         lines, and the timed call also pays for writing them back as its reads evict them:
//         up to an L2's worth of extra traffic, which dominates calls that move tens of MB.
enum class FlushMode { kRead, kWrite };
const char* flush_mode_name(FlushMode mode);

// The most timed runs of one cold or graph measurement (event pairs kept); --runs is capped here.
constexpr int kMaxColdRuns = 500;

struct ColdTiming {
  double median_us = 0;
  int runs = 0;
};

struct GraphTiming {
  double median_us = 0;     // per call: median over replays of (replay time / calls_per_graph)
  int calls_per_graph = 0;  // R
  int replays = 0;
};

class GpuTimer {
 public:
  // Makes `device` current and sets up a non-default stream, timing events and an L2 flush
  // buffer. In builds without a GPU backend this returns kUnsupported.
  static Status create(int device, FlushMode flush, std::unique_ptr<GpuTimer>* timer);
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  const GpuFacts& facts() const;
  // The stream every timed call runs on (never the default stream: graphs are captured on it).
  Stream stream() const;

  // Device-to-device copy of `bytes` into a second buffer; GB/s counts bytes read + written.
  // Median of `runs` timed copies after warm-up.
  Status copy_bandwidth(std::size_t bytes, int runs, double* gbps);

  // A device-to-device copy moving `bytes` in all (bytes / 2 read from one buffer, written to
  // another), timed as time_cold times a call: the roofline of a call that moves those bytes,
  // which falls short of copy_bandwidth's for transfers of tens of MB (a fixed start and tail).
  Status time_copy_cold(std::size_t bytes, int min_runs, ColdTiming* timing);

  // A graph of `launches` empty kernels, replayed; median time per launch in microseconds.
  Status graph_floor(int launches, double* us_per_launch);

  // Cold-L2 timing: before every timed call the L2 is flushed (FlushMode) through a buffer at
  // least twice its size; one event pair around each call. At least 3 warm-up calls first. Runs:
  // `min_runs` (fewer when one call takes over 10 ms, more for very short calls).
  Status time_cold(const StreamCall& call, int min_runs, ColdTiming* timing);

  // Graph replay (L2 warm): R calls captured into one graph, R = clamp(target_ms / estimate, 1,
  // max_calls); median over 10 replays of (replay time / R).
  Status time_graph(const StreamCall& call, double target_ms, int max_calls, GraphTiming* timing);

  struct Impl;

 private:
  explicit GpuTimer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusekit::bench
