// The benchmark's GPU timer, compiled as CUDA or HIP (see gpu_timer.h for the interface).
//
// Methodology follows what the project's anchor numbers were measured with (triton's do_bench and
// do_bench_cudagraph), so the two can be compared: cold-L2 times with one event pair per call and
// a memset flush before each, and graph replay of R back-to-back calls for small shapes, where
// host launch overhead would otherwise dominate. All work runs on one stream created here (a
// blocking stream, so it also orders after the synchronous copies that fill the inputs); graphs
// are captured on it because capture is not allowed on the legacy default stream. Every runtime
// call is checked; events are read only after synchronizing on the last one recorded.
//
// Runtime calls (events, streams and graphs included) go through src/gpu/platform.h; this file
// never tests CUDA vs HIP itself.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "gpu/common/check.h"
#include "gpu/platform.h"
#include "gpu_timer.h"

namespace fusekit::bench {

using gpu::ErrorCode;
using gpu::EventHandle;
using gpu::GraphExecHandle;
using gpu::GraphHandle;
using gpu::StreamHandle;
using gpu::kSuccess;
using gpu::status_from;

// Return early with a Status: from a runtime call's error code, or from a fusekit call.
#define BENCH_GPU_TRY(what, expr)                                   \
  do {                                                              \
    const ErrorCode bench_e_ = (expr);                              \
    if (bench_e_ != kSuccess) return status_from(what, bench_e_);   \
  } while (0)
#define BENCH_TRY(expr)                    \
  do {                                     \
    Status bench_s_ = (expr);              \
    if (!bench_s_.ok()) return bench_s_;   \
  } while (0)

namespace {

constexpr int kMaxRuns = kMaxColdRuns;  // event pairs kept (gpu_timer.h)
constexpr int kWarmupCalls = 3;
constexpr int kGraphReplays = 10;
constexpr double kColdTargetMs = 50;  // short calls get up to kMaxRuns runs within about this
constexpr double kLongCallMs = 10;    // above this, fewer runs than asked for ...
constexpr double kLongBudgetMs = 1000;  // ... about this much timed work, and never under:
constexpr int kLongMinRuns = 10;
constexpr std::size_t kMinFlushBytes = 256u << 20;  // also covers caches not reported as L2

__global__ void empty_kernel() {}

// Reads `words` 16-byte words; writes only if their XOR is a value memset-filled data cannot
// have, so the reads are not optimized away and nothing is written in practice.
__global__ void read_flush_kernel(const uint4* data, std::size_t words, unsigned* sink) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += stride) {
    const uint4 v = data[i];
    acc.x ^= v.x, acc.y ^= v.y, acc.z ^= v.z, acc.w ^= v.w;
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x5eed1e55u) *sink = 1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Device memory freed on scope exit (error paths); release() frees it with the error checked.
struct DeviceBuffer {
  void* ptr = nullptr;
  ~DeviceBuffer() {
    if (ptr != nullptr) (void)gpu::free_device(ptr);  // error path: the first error is reported
  }
  Status release() {
    void* p = ptr;
    ptr = nullptr;
    return p == nullptr ? Status() : status_from("free", gpu::free_device(p));
  }
};

// The source and target of a timed device-to-device copy of `bytes`, the source filled so the
// copy moves written memory (copy_bandwidth and time_copy_cold time the same kind of copy).
struct CopyBuffers {
  DeviceBuffer src, dst;
  std::size_t bytes = 0;
  Status allocate(std::size_t n, StreamHandle s) {
    bytes = n;
    BENCH_GPU_TRY("malloc (copy source)", gpu::malloc_device(&src.ptr, n));
    BENCH_GPU_TRY("malloc (copy target)", gpu::malloc_device(&dst.ptr, n));
    BENCH_GPU_TRY("memset", gpu::memset_async(src.ptr, 1, n, s));
    BENCH_GPU_TRY("memset", gpu::memset_async(dst.ptr, 0, n, s));
    return Status();
  }
  Status copy(StreamHandle s) const {
    return status_from("memcpy D2D",
                       gpu::memcpy_async(dst.ptr, src.ptr, bytes, gpu::CopyDirection::kD2D, s));
  }
  Status release() {
    BENCH_TRY(src.release());
    return dst.release();
  }
};

struct GraphExec {
  GraphExecHandle exec = nullptr;
  ~GraphExec() {
    if (exec != nullptr) (void)gpu::graph_exec_destroy(exec);  // error path, likewise
  }
  Status release() {
    GraphExecHandle e = exec;
    exec = nullptr;
    return e == nullptr ? Status() : status_from("graph_exec_destroy", gpu::graph_exec_destroy(e));
  }
};

Status run_calls(const StreamCall& call, StreamHandle s, int n) {
  for (int i = 0; i < n; ++i) BENCH_TRY(call(static_cast<Stream>(s)));
  return Status();
}

// Captures `n` calls on `s` into a graph and instantiates it. A call failing mid-capture ends the
// capture first, so the stream is usable afterwards.
Status capture(const StreamCall& call, StreamHandle s, int n, GraphExec* out) {
  BENCH_GPU_TRY("stream_begin_capture", gpu::stream_begin_capture(s));
  Status calls = run_calls(call, s, n);
  GraphHandle graph = nullptr;
  const ErrorCode ended = gpu::stream_end_capture(s, &graph);
  if (!calls.ok() || ended != kSuccess) {
    if (graph != nullptr) (void)gpu::graph_destroy(graph);  // the capture error matters more
    return calls.ok() ? status_from("stream_end_capture", ended) : calls;
  }
  const ErrorCode made = gpu::graph_instantiate(&out->exec, graph);
  const ErrorCode destroyed = gpu::graph_destroy(graph);  // the executable graph is a copy
  BENCH_GPU_TRY("graph_instantiate", made);
  BENCH_GPU_TRY("graph_destroy", destroyed);
  return Status();
}

}  // namespace

struct GpuTimer::Impl {
  int device = 0;
  GpuFacts facts;
  StreamHandle stream = nullptr;
  std::vector<EventHandle> starts, ends;
  DeviceBuffer flush;
  std::size_t flush_bytes = 0;
  FlushMode flush_mode = FlushMode::kRead;
  int flush_blocks = 0;

  ~Impl() {
    // Destructors cannot return a Status; report instead of ignoring.
    auto report = [](const char* what, ErrorCode e) {
      if (e != kSuccess) {
        std::fprintf(stderr, "fusekit_bench: %s: %s\n", what, gpu::error_string(e));
      }
    };
    for (EventHandle e : starts) report("event_destroy", gpu::event_destroy(e));
    for (EventHandle e : ends) report("event_destroy", gpu::event_destroy(e));
    const Status freed = flush.release();
    if (!freed.ok()) std::fprintf(stderr, "fusekit_bench: %s\n", freed.to_string().c_str());
    if (stream != nullptr) report("stream_destroy", gpu::stream_destroy(stream));
  }

  // Records event pairs [0, n) with `body` between each start and end; waits for the last end
  // and returns every interval in milliseconds.
  template <class Body>
  Status time_pairs(int n, Body&& body, std::vector<double>* ms) {
    n = std::clamp(n, 1, kMaxRuns);
    for (int i = 0; i < n; ++i) {
      BENCH_TRY(body(/*before_start=*/true));
      BENCH_GPU_TRY("event_record", gpu::event_record(starts[i], stream));
      BENCH_TRY(body(/*before_start=*/false));
      BENCH_GPU_TRY("event_record", gpu::event_record(ends[i], stream));
    }
    BENCH_GPU_TRY("event_synchronize", gpu::event_synchronize(ends[n - 1]));
    ms->clear();
    for (int i = 0; i < n; ++i) {
      float t = 0;
      BENCH_GPU_TRY("event_elapsed_ms", gpu::event_elapsed_ms(&t, starts[i], ends[i]));
      ms->push_back(t);
    }
    return Status();
  }

  Status flush_l2() {
    if (flush_mode == FlushMode::kWrite) {
      return status_from("L2 flush memset", gpu::memset_async(flush.ptr, 0, flush_bytes, stream));
    }
    // The last word of the buffer serves as the sink (never written: see read_flush_kernel).
    const std::size_t words = flush_bytes / sizeof(uint4) - 1;
    auto* data = static_cast<const uint4*>(flush.ptr);
    auto* sink = reinterpret_cast<unsigned*>(static_cast<uint4*>(flush.ptr) + words);
    return status_from("L2 flush read", gpu::launch(read_flush_kernel, dim3(flush_blocks),
                                                    dim3(512), 0, stream, /*pdl=*/false, data,
                                                    words, sink));
  }
};

GpuTimer::GpuTimer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuTimer::~GpuTimer() = default;

const GpuFacts& GpuTimer::facts() const { return impl_->facts; }
Stream GpuTimer::stream() const { return static_cast<Stream>(impl_->stream); }

const char* flush_mode_name(FlushMode mode) {
  return mode == FlushMode::kRead ? "read" : "write";
}

Status GpuTimer::create(int device, FlushMode flush, std::unique_ptr<GpuTimer>* timer) {
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  impl->flush_mode = flush;
  BENCH_GPU_TRY("set_device", gpu::set_device(device));
  gpu::DeviceInfo info;
  BENCH_GPU_TRY("query_device_info", gpu::query_device_info(device, &info));
  GpuFacts& f = impl->facts;
  f.name = gpu::device_name(device);
  f.l2_bytes = info.l2_bytes;
  f.sm_count = info.sm_count;
  f.warp_size = info.warp_size;
  f.max_smem_per_block = info.max_smem_per_block;
  f.supports_pdl = info.supports_pdl;

  BENCH_GPU_TRY("stream_create", gpu::stream_create(&impl->stream));
  for (int i = 0; i < kMaxRuns; ++i) {
    EventHandle a = nullptr, b = nullptr;
    BENCH_GPU_TRY("event_create", gpu::event_create(&a));
    impl->starts.push_back(a);
    BENCH_GPU_TRY("event_create", gpu::event_create(&b));
    impl->ends.push_back(b);
  }
  impl->flush_bytes = std::max<std::size_t>(2 * static_cast<std::size_t>(info.l2_bytes),
                                            kMinFlushBytes);
  impl->flush_blocks = 4 * info.sm_count;
  BENCH_GPU_TRY("malloc (L2 flush buffer)",
                gpu::malloc_device(&impl->flush.ptr, impl->flush_bytes));
  // Filled once (memset: the read flush's sink test relies on it), then flushed.
  BENCH_GPU_TRY("memset", gpu::memset_async(impl->flush.ptr, 0, impl->flush_bytes, impl->stream));
  BENCH_TRY(impl->flush_l2());
  BENCH_GPU_TRY("stream_synchronize", gpu::stream_synchronize(impl->stream));
  timer->reset(new GpuTimer(std::move(impl)));
  return Status();
}

Status GpuTimer::copy_bandwidth(std::size_t bytes, int runs, double* gbps) {
  Impl& m = *impl_;
  CopyBuffers buffers;
  BENCH_TRY(buffers.allocate(bytes, m.stream));
  for (int i = 0; i < kWarmupCalls; ++i) BENCH_TRY(buffers.copy(m.stream));
  std::vector<double> ms;
  BENCH_TRY(m.time_pairs(std::max(runs, 1), [&](bool before_start) {
    return before_start ? Status() : buffers.copy(m.stream);
  }, &ms));
  *gbps = 2.0 * static_cast<double>(bytes) / (median(ms) * 1e-3) / 1e9;
  BENCH_GPU_TRY("stream_synchronize", gpu::stream_synchronize(m.stream));
  return buffers.release();
}

Status GpuTimer::time_copy_cold(std::size_t bytes, int min_runs, ColdTiming* timing) {
  const StreamHandle stream = impl_->stream;
  CopyBuffers buffers;
  BENCH_TRY(buffers.allocate(std::max<std::size_t>(bytes / 2, 1), stream));
  const StreamCall copy = [&](Stream s) { return buffers.copy(static_cast<StreamHandle>(s)); };
  BENCH_TRY(time_cold(copy, min_runs, timing));
  BENCH_GPU_TRY("stream_synchronize", gpu::stream_synchronize(stream));
  return buffers.release();
}

Status GpuTimer::graph_floor(int launches, double* us_per_launch) {
  const StreamCall empty = [](Stream s) {
    return status_from("empty kernel launch",
                       gpu::launch(empty_kernel, dim3(1), dim3(1), 0,
                                   static_cast<StreamHandle>(s), /*pdl=*/false));
  };
  GraphTiming t;
  BENCH_TRY(time_graph(empty, /*target_ms=*/1e9, std::max(launches, 1), &t));
  *us_per_launch = t.median_us;
  return Status();
}

Status GpuTimer::time_cold(const StreamCall& call, int min_runs, ColdTiming* timing) {
  Impl& m = *impl_;
  min_runs = std::clamp(min_runs, 1, kMaxRuns);
  BENCH_TRY(run_calls(call, m.stream, kWarmupCalls));
  // One cold call to size the run count.
  std::vector<double> ms;
  BENCH_TRY(m.time_pairs(1, [&](bool before_start) {
    return before_start ? m.flush_l2() : call(static_cast<Stream>(m.stream));
  }, &ms));
  const double estimate_ms = std::max(ms[0], 1e-4);
  int runs;
  if (estimate_ms > kLongCallMs) {
    runs = std::clamp(static_cast<int>(kLongBudgetMs / estimate_ms), kLongMinRuns,
                      std::max(min_runs, kLongMinRuns));
  } else {
    runs = std::clamp(static_cast<int>(kColdTargetMs / estimate_ms), min_runs, kMaxRuns);
  }
  BENCH_TRY(m.time_pairs(runs, [&](bool before_start) {
    return before_start ? m.flush_l2() : call(static_cast<Stream>(m.stream));
  }, &ms));
  timing->median_us = median(ms) * 1e3;
  timing->runs = static_cast<int>(ms.size());
  return Status();
}

Status GpuTimer::time_graph(const StreamCall& call, double target_ms, int max_calls,
                            GraphTiming* timing) {
  Impl& m = *impl_;
  max_calls = std::max(max_calls, 1);
  // Warm-up outside any capture: first calls may do one-time setup (attributes, caches) that
  // must not be recorded into a graph.
  BENCH_TRY(run_calls(call, m.stream, kWarmupCalls));
  BENCH_GPU_TRY("stream_synchronize", gpu::stream_synchronize(m.stream));

  auto replay = [&](GraphExec& g) {
    return status_from("graph_launch", gpu::graph_launch(g.exec, m.stream));
  };
  auto timed_replays = [&](GraphExec& g, int n, std::vector<double>* ms) {
    BENCH_TRY(replay(g));  // first launch uploads the graph: untimed
    return m.time_pairs(n, [&](bool before_start) {
      return before_start ? Status() : replay(g);
    }, ms);
  };

  // Estimate one call from a small graph, then size R so one replay runs about target_ms.
  constexpr int kEstimateCalls = 5;
  std::vector<double> ms;
  int calls = std::max(1, std::min(kEstimateCalls, max_calls));
  if (calls < max_calls) {
    GraphExec small;
    BENCH_TRY(capture(call, m.stream, calls, &small));
    BENCH_TRY(timed_replays(small, 1, &ms));
    BENCH_TRY(small.release());
    const double estimate_ms = std::max(ms[0] / calls, 1e-6);
    calls = static_cast<int>(std::clamp(target_ms / estimate_ms, 1.0,
                                        static_cast<double>(max_calls)));
  }

  GraphExec graph;
  BENCH_TRY(capture(call, m.stream, calls, &graph));
  BENCH_TRY(timed_replays(graph, kGraphReplays, &ms));
  BENCH_TRY(graph.release());
  for (double& t : ms) t /= calls;
  timing->median_us = median(ms) * 1e3;
  timing->calls_per_graph = calls;
  timing->replays = static_cast<int>(ms.size());
  return Status();
}

}  // namespace fusekit::bench
