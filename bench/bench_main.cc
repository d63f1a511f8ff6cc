// fusekit_bench: times fusekit's ops on the project's default shapes and reports GB/s against the
// copy bandwidth measured in the same run (the ceiling for memory-bound ops).
//
// Plain C++, and only the sequence of a run: options, the plan of cases (shapes.h), GPU or CPU
// mode (runner.h: with a GPU, device 0, cold-L2 and graph-replay times; without one, or with
// --cpu, std::chrono times of the CPU backend, said so in the output), then the table and the
// JSON (report.h). GPU timing itself is behind gpu_timer.h, the ops behind the table in ops.h.
// Exit codes: 0 ok, 1 a call or the runtime failed, 2 bad usage or shapes file.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fusekit/runtime.h"
#include "fusekit/version.h"
#include "report.h"
#include "runner.h"
#include "shapes.h"

namespace fusekit::bench {
namespace {

constexpr int64_t kCpuDefaultMaxBytes = int64_t{64} << 20;

struct Options {
  PlanOptions plan;
  RunOptions run;
  bool cpu = false;
  bool max_bytes_given = false;
  bool runs_given = false;   // GPU-only options, noted as ignored on a CPU run
  bool flush_given = false;
  std::string json_path;
  std::string commit;
};

const char kUsage[] =
    "usage: fusekit_bench [options]\n"
    "  --shapes PATH      shapes file (default bench/shapes.json)\n"
    "  --ops a,b          ops to run (default: those the shapes file lists); known: %s\n"
    "  --M 1,32 --N 4096  replace the shapes file's M / N lists\n"
    "  --dtype bf16|fp16|fp32   (default: the section's dtype, else bf16)\n"
    "  --fp8 e4m3fn|e4m3fnuz    the fp8 ops' output format (default e4m3fn)\n"
    "  --max-bytes BYTES  skip cases moving more per call (K/M/G suffixes; CPU default 64M)\n"
    "  --row-pad P        per-row tensors as strided views, rows P elements beyond their width\n"
    "                     apart (default 0: contiguous; P off the 16-byte group: unaligned rows)\n"
    "  --runs N           GPU: at least N cold-L2 runs per case (default 50, at most 500)\n"
    "  --flush read|write GPU: empty the L2 before cold runs by reading (default; leaves clean\n"
    "                     lines) or by a memset (triton do_bench; leaves dirty lines)\n"
    "  --sweep            GPU: also time alternative launch configurations\n"
    "  --sweep-only WORD  with --sweep: only those whose label contains WORD (and the chosen one)\n"
    "  --size-copy        GPU: also time, per case, a device copy moving the same bytes (the\n"
    "                     roofline at that size) and report each case as %% of it\n"
    "  --cpu              time the CPU backend even when a GPU is present\n"
    "  --json PATH        write all results as JSON\n"
    "  --commit SHA       recorded in the JSON (default: $FUSEKIT_COMMIT, else unknown)\n";

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

bool parse_size(const std::string& s, int64_t* v) {  // "4096", "64M", "4G"
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  double scale = 1;
  if (*end == 'K' || *end == 'k') scale = 1024.0, ++end;
  else if (*end == 'M' || *end == 'm') scale = 1048576.0, ++end;
  else if (*end == 'G' || *end == 'g') scale = 1073741824.0, ++end;
  if (end == s.c_str() || *end != '\0' || !(x >= 0) || x * scale > 9e18 ||
      x * scale != std::floor(x * scale)) {
    return false;
  }
  *v = static_cast<int64_t>(x * scale);
  return true;
}

// A whole number in [lo, hi], all of `s` (atoi would take "5x" as 5 and overflow silently).
bool parse_int(const std::string& s, int lo, int hi, int* v) {
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || x < lo || x > hi) return false;
  *v = static_cast<int>(x);
  return true;
}

// Returns -1 to go on, else the exit code.
int parse_args(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&](std::string* v) {
      if (i + 1 >= argc) return false;
      *v = argv[++i];
      return true;
    };
    std::string v;
    bool ok = true;
    if (a == "--help" || a == "-h") {
      std::printf(kUsage, known_op_names().c_str());
      return 0;
    } else if (a == "--cpu") {
      o->cpu = true;
    } else if (a == "--sweep") {
      o->run.sweep = true;
    } else if (a == "--size-copy") {
      o->run.size_copy = true;
    } else if (a == "--sweep-only") {
      ok = next(&o->run.sweep_only) && !o->run.sweep_only.empty();
    } else if (a == "--shapes") {
      ok = next(&o->plan.path) && !o->plan.path.empty();
    } else if (a == "--ops") {
      ok = next(&v) && !(o->plan.ops = split(v)).empty();
    } else if (a == "--M" || a == "--N") {
      ok = next(&v);
      std::vector<int64_t>& list = a == "--M" ? o->plan.m : o->plan.n;
      for (const std::string& item : split(v)) {
        int64_t x = 0;
        ok = ok && parse_size(item, &x) && x > 0;
        list.push_back(x);
      }
      ok = ok && !list.empty();
    } else if (a == "--dtype") {
      DType d;
      ok = next(&o->plan.dtype) && parse_dtype(o->plan.dtype, &d);
    } else if (a == "--fp8") {
      Fp8Format f;
      ok = next(&o->plan.fp8) && parse_fp8_format(o->plan.fp8, &f);
    } else if (a == "--max-bytes") {
      ok = next(&v) && parse_size(v, &o->plan.max_bytes);
      o->max_bytes_given = true;
    } else if (a == "--flush") {
      ok = next(&v) && (v == "read" || v == "write");
      o->run.flush = v == "write" ? FlushMode::kWrite : FlushMode::kRead;
      o->flush_given = true;
    } else if (a == "--row-pad") {
      ok = next(&v) && parse_size(v, &o->plan.row_pad);
    } else if (a == "--runs") {
      // More than the timer keeps would be clamped, so "at least N" would not hold.
      ok = next(&v) && parse_int(v, 1, kMaxColdRuns, &o->run.gpu_runs);
      o->runs_given = true;
    } else if (a == "--json") {
      ok = next(&o->json_path) && !o->json_path.empty();
    } else if (a == "--commit") {
      ok = next(&o->commit);
    } else {
      std::fprintf(stderr, "fusekit_bench: unknown option %s\n", a.c_str());
      std::fprintf(stderr, kUsage, known_op_names().c_str());
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "fusekit_bench: bad or missing value for %s\n", a.c_str());
      std::fprintf(stderr, kUsage, known_op_names().c_str());
      return 2;
    }
  }
  return -1;
}

std::string default_shapes_path() {
  if (std::ifstream("bench/shapes.json").good()) return "bench/shapes.json";
  return FUSEKIT_BENCH_SOURCE_DIR "/shapes.json";  // the checkout this binary was built from
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

int bench_main(int argc, char** argv) {
  Options o;
  const int parsed = parse_args(argc, argv, &o);
  if (parsed >= 0) return parsed;
  if (o.plan.path.empty()) o.plan.path = default_shapes_path();

  Env env;
  env.backend = gpu_backend_name();
  env.version = FUSEKIT_VERSION;
  env.date = utc_now();
  env.shapes_path = o.plan.path;
  env.row_pad = o.plan.row_pad;
  const char* commit_env = std::getenv("FUSEKIT_COMMIT");
  env.commit = !o.commit.empty() ? o.commit : (commit_env && *commit_env ? commit_env : "unknown");
  std::string reason;
  const int gpus = gpu_count(&reason);
  const bool gpu = gpus > 0 && !o.cpu;
  env.mode = gpu ? "gpu" : "cpu";
  if (!gpu) env.no_gpu_reason = o.cpu && gpus > 0 ? "--cpu given" : reason;
  if (!gpu && !o.max_bytes_given) o.plan.max_bytes = kCpuDefaultMaxBytes;
  if (!gpu && o.run.sweep) {
    std::fprintf(stderr, "note: --sweep applies to GPU runs only; ignored\n");
  }
  if (!gpu && o.run.size_copy) {
    std::fprintf(stderr, "note: --size-copy applies to GPU runs only; ignored\n");
  }
  if (!o.run.sweep && !o.run.sweep_only.empty()) {
    std::fprintf(stderr, "note: --sweep-only applies with --sweep only; ignored\n");
  }
  if (!gpu && o.runs_given) {
    std::fprintf(stderr, "note: --runs applies to GPU runs only; ignored\n");
  }
  if (!gpu && o.flush_given) {
    std::fprintf(stderr, "note: --flush applies to GPU runs only; ignored\n");
  }

  Plan plan;
  const Status s = make_plan(o.plan, &plan);
  if (!s.ok()) {
    std::fprintf(stderr, "fusekit_bench: %s\n", s.to_string().c_str());
    return 2;
  }
  for (const std::string& note : plan.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  std::map<std::string, int> skips;
  for (const Skipped& k : plan.skipped) ++skips[k.reason];
  for (const auto& kv : skips)
    std::fprintf(stderr, "note: %d case(s) skipped: %s\n", kv.second, kv.first.c_str());
  if (plan.cases.empty()) {
    std::fprintf(stderr, "fusekit_bench: no cases to run\n");
    return 2;
  }

  std::vector<Row> rows;
  const int rc = gpu ? run_gpu(o.run, plan, &env, &rows) : run_cpu(plan, &env, &rows);
  if (rc != 0) return rc;

  print_table(stdout, env, rows);
  print_sweeps(stdout, env, rows);
  if (!o.json_path.empty()) {
    const Status w = write_json(o.json_path, env, rows, plan);
    if (!w.ok()) {
      std::fprintf(stderr, "fusekit_bench: FAILED: %s\n", w.to_string().c_str());
      return 1;
    }
    std::fprintf(stderr, "wrote %s\n", o.json_path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace fusekit::bench

int main(int argc, char** argv) { return fusekit::bench::bench_main(argc, argv); }
