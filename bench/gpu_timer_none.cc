// GpuTimer for builds without a GPU backend: creation fails with kUnsupported, so the driver,
// which is the same source in every build, falls back to CPU timing. Keeping this stub (rather
// than #if-ing the driver) means bench_main.cc never tests which backend was built.
#include "gpu_timer.h"

namespace fusekit::bench {

namespace {
Status not_built() {
  return Status::unsupported("fusekit_bench was built without a GPU backend");
}
}  // namespace

struct GpuTimer::Impl {
  GpuFacts facts;
};

GpuTimer::GpuTimer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuTimer::~GpuTimer() = default;

Status GpuTimer::create(int, FlushMode, std::unique_ptr<GpuTimer>*) { return not_built(); }
const char* flush_mode_name(FlushMode mode) { return mode == FlushMode::kRead ? "read" : "write"; }
const GpuFacts& GpuTimer::facts() const { return impl_->facts; }
Stream GpuTimer::stream() const { return nullptr; }
Status GpuTimer::copy_bandwidth(std::size_t, int, double*) { return not_built(); }
Status GpuTimer::time_copy_cold(std::size_t, int, ColdTiming*) { return not_built(); }
Status GpuTimer::graph_floor(int, double*) { return not_built(); }
Status GpuTimer::time_cold(const StreamCall&, int, ColdTiming*) { return not_built(); }
Status GpuTimer::time_graph(const StreamCall&, double, int, GraphTiming*) { return not_built(); }

}  // namespace fusekit::bench
