// GPU and CPU runs of the benchmark's cases (see runner.h).
//
// GPU: each case gets fresh tensors, a checked first call, then cold-L2 timing and, for M <= 256,
// graph timing, each preceded by a refill of the inputs so in-place ops start from the same
// values; --sweep repeats that for every variant the op's family offers. CPU: warm calls timed
// with std::chrono (the first call is the warm-up), a few runs each.
#include "runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "data.h"
#include "fusekit/runtime.h"
#include "gpu_timer.h"
#include "ops.h"

namespace fusekit::bench {
namespace {

constexpr std::size_t kGpuCopyBytes = std::size_t{1} << 30;
constexpr std::size_t kCpuCopyBytes = std::size_t{256} << 20;
constexpr int kGpuCopyRuns = 30;
constexpr int kGraphFloorLaunches = 1000;
constexpr int64_t kGraphMaxM = 256;      // graph_us for M up to this
constexpr double kGraphTargetMs = 10;    // one replay of R calls runs about this long ...
constexpr int kGraphMaxCalls = 1000;     // ... with R at most this
constexpr double kCpuBudgetS = 0.25;     // CPU: timed calls per case take about this long
constexpr int kCpuMinRuns = 3, kCpuMaxRuns = 15;

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      return line.substr(line.find(':') + 2);
    }
  }
  return "cpu";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int fail(const std::string& where, const Status& s) {
  std::fprintf(stderr, "fusekit_bench: FAILED: %s: %s\n", where.c_str(), s.to_string().c_str());
  return 1;
}

// The dtype column: x's dtype, and for ops with an fp8 output the codes' format where it is not
// the default e4m3fn ("bf16>e4m3fnuz").
std::string dtype_label(const Case& c) {
  std::string label = short_dtype_name(c.dtype);
  if (c.op->fp8_out && c.fp8_format != Fp8Format::kE4M3FN) {
    label += std::string(">") + fp8_format_name(c.fp8_format);
  }
  return label;
}

std::string case_name(const Case& c) {
  return std::string(c.op->name) + " M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) +
         " " + dtype_label(c);
}

Row start_row(const Case& c) {
  Row r;
  r.op = c.op->name;
  r.m = c.m;
  r.n = c.n;
  r.dtype = dtype_label(c);
  r.bytes = c.bytes;
  return r;
}

void finish_row(const Env& env, Row* r, std::size_t index, std::size_t total) {
  r->gbps = static_cast<double>(r->bytes) / (r->us * 1e3);
  r->pct_copy = 100.0 * r->gbps / env.copy_gbps;
  r->pct_size_copy = 100.0 * r->copy_us / r->us;  // NaN where no copy was timed
  std::fprintf(stderr, "[%zu/%zu] %s M=%lld N=%lld %s: %.2f us", index + 1, total, r->op.c_str(),
               static_cast<long long>(r->m), static_cast<long long>(r->n), r->dtype.c_str(),
               r->us);
  if (std::isfinite(r->graph_us)) std::fprintf(stderr, ", graph %.2f us", r->graph_us);
  std::fprintf(stderr, ", %.1f GB/s (%.1f%% of copy", r->gbps, r->pct_copy);
  if (std::isfinite(r->copy_us)) {
    std::fprintf(stderr, "; a copy of the same bytes %.2f us: %.1f%% of it", r->copy_us,
                 r->pct_size_copy);
  }
  std::fprintf(stderr, ") %s\n", r->config.c_str());
}

// One pool of random inputs per dtype, made when first needed.
Status pool_for(std::map<DType, std::unique_ptr<RandomPool>>* pools, DType dtype, bool gpu,
                RandomPool** pool) {
  auto& slot = (*pools)[dtype];
  if (!slot) {
    slot = std::make_unique<RandomPool>();
    const Status s = slot->create(dtype, gpu);
    if (!s.ok()) return s;
  }
  *pool = slot.get();
  return Status();
}

Status release_pools(std::map<DType, std::unique_ptr<RandomPool>>* pools) {
  for (auto& kv : *pools) {
    const Status s = kv.second->release();
    if (!s.ok()) return s;
  }
  pools->clear();
  return Status();
}

// Cold and (small M) graph timing of `call`, refilling inputs first so in-place ops start fresh.
Status time_gpu_call(GpuTimer& timer, const StreamCall& call, const Case& c, Workspace& ws,
                     const RandomPool& pool, int runs, Row* r, SweepResult* sr) {
  Status s = ws.refill_inputs(*c.op, pool);
  if (!s.ok()) return s;
  ColdTiming cold;
  s = timer.time_cold(call, runs, &cold);
  if (!s.ok()) return s;
  (r ? r->us : sr->us) = cold.median_us;
  if (r) r->runs = cold.runs;
  if (c.m > kGraphMaxM) return Status();
  s = ws.refill_inputs(*c.op, pool);
  if (!s.ok()) return s;
  GraphTiming graph;
  s = timer.time_graph(call, kGraphTargetMs, kGraphMaxCalls, &graph);
  if (!s.ok()) return s;
  (r ? r->graph_us : sr->graph_us) = graph.median_us;
  if (r) r->graph_calls = graph.calls_per_graph;
  return Status();
}

// std::memcpy of kCpuCopyBytes into a second buffer; bytes read + written, median of 5 runs.
Status cpu_copy_bandwidth(double* gbps) {
  Buffer src, dst;
  Status s = src.allocate(false, kCpuCopyBytes);
  if (s.ok()) s = dst.allocate(false, kCpuCopyBytes);
  if (!s.ok()) return s;
  std::memset(src.data(), 1, kCpuCopyBytes);  // touch every page before timing
  std::memset(dst.data(), 0, kCpuCopyBytes);
  std::vector<double> seconds;
  for (int i = 0; i < 6; ++i) {  // the first is warm-up
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), kCpuCopyBytes);
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    if (i > 0) seconds.push_back(dt.count());
  }
  *gbps = 2.0 * kCpuCopyBytes / median(seconds) / 1e9;
  return Status();
}

}  // namespace

int run_gpu(const RunOptions& o, const Plan& plan, Env* env, std::vector<Row>* rows) {
  std::unique_ptr<GpuTimer> timer;
  Status s = GpuTimer::create(0, o.flush, &timer);
  env->flush = flush_mode_name(o.flush);
  if (!s.ok()) return fail("setting up GPU timing", s);
  const GpuFacts& g = timer->facts();
  env->device = g.name;
  env->l2_bytes = g.l2_bytes;
  env->sm_count = g.sm_count;
  std::fprintf(stderr, "GPU 0: %s, %d SMs, L2 %.1f MiB\n", g.name.c_str(), g.sm_count,
               g.l2_bytes / 1048576.0);
  s = timer->copy_bandwidth(kGpuCopyBytes, kGpuCopyRuns, &env->copy_gbps);
  if (!s.ok()) return fail("copy bandwidth", s);
  env->copy_bytes = static_cast<int64_t>(kGpuCopyBytes);
  s = timer->graph_floor(kGraphFloorLaunches, &env->graph_floor_us);
  if (!s.ok()) return fail("graph floor", s);
  std::fprintf(stderr, "copy bandwidth %.1f GB/s, graph floor %.2f us per launch\n",
               env->copy_gbps, env->graph_floor_us);

  std::map<DType, std::unique_ptr<RandomPool>> pools;
  for (std::size_t i = 0; i < plan.cases.size(); ++i) {
    const Case& c = plan.cases[i];
    const std::string name = case_name(c);
    RandomPool* pool = nullptr;
    s = pool_for(&pools, c.dtype, true, &pool);
    if (!s.ok()) return fail("random inputs", s);
    Workspace ws;
    s = ws.allocate(*c.family, c.op->slots, c.m, c.n, c.dtype, true, plan.row_pad);
    ws.args.fp8_format = c.fp8_format;
    if (s.ok()) s = ws.refill_inputs(*c.op, *pool);
    if (!s.ok()) return fail(name + ": allocating inputs", s);

    const OpSpec& op = *c.op;
    const StreamCall call = [&](Stream stream) { return op.call(op, ws.args, stream); };
    s = call(timer->stream());  // the first call, checked on its own
    if (s.ok()) s = gpu_synchronize(0);
    if (!s.ok()) return fail(name + ": first call", s);

    Row r = start_row(c);
    r.config = "-";
    if (op.describe != nullptr) {
      s = op.describe(op, ws.args, g, &r.config);
      if (!s.ok()) return fail(name + ": describing the launch configuration", s);
    }
    s = time_gpu_call(*timer, call, c, ws, *pool, o.gpu_runs, &r, nullptr);
    if (!s.ok()) return fail(name, s);

    if (o.sweep && op.sweep != nullptr) {
      std::vector<SweepVariant> variants;
      s = op.sweep(op, ws.args, g, &variants);
      if (!s.ok()) return fail(name + ": sweep variants", s);
      for (const SweepVariant& v : variants) {
        const bool starred =
            v.label.size() >= 2 && v.label.compare(v.label.size() - 2, 2, " *") == 0;
        if (!o.sweep_only.empty() && !starred && v.label.find(o.sweep_only) == std::string::npos) {
          continue;
        }
        SweepResult sr;
        sr.label = v.label;
        s = time_gpu_call(*timer, v.call, c, ws, *pool, o.gpu_runs, nullptr, &sr);
        if (!s.ok()) return fail(name + ": sweep " + v.label, s);
        r.sweep.push_back(sr);
      }
    }
    s = ws.release();
    if (!s.ok()) return fail(name + ": freeing", s);
    if (o.size_copy) {
      ColdTiming copy;
      s = timer->time_copy_cold(static_cast<std::size_t>(c.bytes), o.gpu_runs, &copy);
      if (!s.ok()) return fail(name + ": a copy of the same bytes", s);
      r.copy_us = copy.median_us;
    }
    finish_row(*env, &r, i, plan.cases.size());
    rows->push_back(std::move(r));
  }
  s = release_pools(&pools);
  if (!s.ok()) return fail("freeing inputs", s);
  return 0;
}

int run_cpu(const Plan& plan, Env* env, std::vector<Row>* rows) {
  env->device = cpu_model();
  env->cpu_threads = static_cast<int>(std::thread::hardware_concurrency());
  const Status copied = cpu_copy_bandwidth(&env->copy_gbps);
  if (!copied.ok()) return fail("copy bandwidth", copied);
  env->copy_bytes = static_cast<int64_t>(kCpuCopyBytes);
  std::fprintf(stderr, "CPU timings (%s): %s, memcpy copy bandwidth %.1f GB/s\n",
               env->no_gpu_reason.c_str(), env->device.c_str(), env->copy_gbps);
  double load = 0;
  if (std::ifstream("/proc/loadavg") >> load && load > env->cpu_threads - 0.5) {
    std::fprintf(stderr, "warning: the machine is busy (load %.1f on %d cores): CPU timings, "
                 "especially of multi-threaded small calls, will be unreliable\n", load,
                 env->cpu_threads);
  }

  std::map<DType, std::unique_ptr<RandomPool>> pools;
  for (std::size_t i = 0; i < plan.cases.size(); ++i) {
    const Case& c = plan.cases[i];
    const std::string name = case_name(c);
    RandomPool* pool = nullptr;
    Status s = pool_for(&pools, c.dtype, false, &pool);
    if (!s.ok()) return fail("random inputs", s);
    Workspace ws;
    s = ws.allocate(*c.family, c.op->slots, c.m, c.n, c.dtype, false, plan.row_pad);
    ws.args.fp8_format = c.fp8_format;
    if (s.ok()) s = ws.refill_inputs(*c.op, *pool);
    if (!s.ok()) return fail(name + ": allocating inputs", s);

    auto timed_call = [&](double* seconds) {
      const auto t0 = std::chrono::steady_clock::now();
      const Status st = c.op->call(*c.op, ws.args, nullptr);
      *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return st;
    };
    double estimate = 0;
    s = timed_call(&estimate);  // the first call: warm-up, checked
    if (!s.ok()) return fail(name + ": first call", s);
    const int runs = std::clamp(static_cast<int>(kCpuBudgetS / std::max(estimate, 1e-9)),
                                kCpuMinRuns, kCpuMaxRuns);
    std::vector<double> times;
    for (int k = 0; k < runs; ++k) {
      double t = 0;
      s = timed_call(&t);
      if (!s.ok()) return fail(name, s);
      times.push_back(t);
    }
    Row r = start_row(c);
    r.us = median(times) * 1e6;
    r.runs = runs;
    r.config = "cpu";
    s = ws.release();
    if (!s.ok()) return fail(name + ": freeing", s);
    finish_row(*env, &r, i, plan.cases.size());
    rows->push_back(std::move(r));
  }
  return 0;
}


}  // namespace fusekit::bench
