// The table and the JSON file (see report.h).
#include "report.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "json.h"

namespace fusekit::bench {
namespace {

std::string fmt(double v, const char* format) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

void print_aligned(std::FILE* out, const std::vector<std::vector<std::string>>& cells,
                   const std::vector<bool>& left) {
  std::vector<std::size_t> width(left.size(), 0);
  for (const auto& line : cells)
    for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  for (const auto& line : cells) {
    std::string s;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const std::string pad(width[i] - line[i].size(), ' ');
      const bool last = i + 1 == line.size();
      s += left[i] ? line[i] + (last ? "" : pad) : pad + line[i];
      if (!last) s += "  ";
    }
    std::fprintf(out, "%s\n", s.c_str());
  }
}

// A sweep variant's GB/s and % of copy bandwidth, from its cold time, as a row's are.
double sweep_gbps(const Row& r, const SweepResult& s) {
  return static_cast<double>(r.bytes) / (s.us * 1e3);
}
double sweep_pct_copy(const Env& env, const Row& r, const SweepResult& s) {
  return 100.0 * sweep_gbps(r, s) / env.copy_gbps;
}

void number_or_null(JsonWriter& w, const char* key, double v) {
  w.key(key);
  if (std::isfinite(v)) w.value(v);
  else w.null();
}

}  // namespace

void print_table(std::FILE* out, const Env& env, const std::vector<Row>& rows) {
  if (env.mode == "gpu") {
    std::fprintf(out,
                 "# fusekit %s | GPU timings on %s (%s) | copy %.1f GB/s | graph floor %.2f us "
                 "| L2 %.1f MiB\n"
                 "# us: cold L2 (%s flush), median of event-timed calls; graph_us: graph replay "
                 "(M <= 256), L2 warm; GB/s and %% copy from us\n",
                 env.version.c_str(), env.device.c_str(), env.backend.c_str(), env.copy_gbps,
                 env.graph_floor_us, env.l2_bytes / 1048576.0, env.flush.c_str());
  } else {
    std::fprintf(out,
                 "# fusekit %s | CPU timings on %s, %d thread(s) (%s) | memcpy copy %.1f GB/s\n"
                 "# us: median wall time of warm calls (std::chrono); no graph_us on the CPU\n",
                 env.version.c_str(), env.device.c_str(), env.cpu_threads,
                 env.no_gpu_reason.c_str(), env.copy_gbps);
  }
  if (env.row_pad != 0) {
    std::fprintf(out, "# rows padded: each per-row tensor's row stride is its width + %lld\n",
                 static_cast<long long>(env.row_pad));
  }
  // --size-copy: a column of each case against a device copy of its own bytes.
  const bool size_copy = std::any_of(rows.begin(), rows.end(),
                                     [](const Row& r) { return std::isfinite(r.copy_us); });
  if (size_copy) {
    std::fprintf(out, "# %% size copy: a device copy moving the same bytes, timed the same way, "
                      "as %% of this call's GB/s\n");
  }
  std::vector<std::vector<std::string>> cells = {
      {"op", "M", "N", "dtype", "us", "graph_us", "GB/s", "% copy"}};
  if (size_copy) cells[0].push_back("% size copy");
  cells[0].push_back("config");
  for (const Row& r : rows) {
    cells.push_back({r.op, std::to_string(r.m), std::to_string(r.n), r.dtype, fmt(r.us, "%.2f"),
                     fmt(r.graph_us, "%.2f"), fmt(r.gbps, "%.1f"), fmt(r.pct_copy, "%.1f%%")});
    if (size_copy) cells.back().push_back(fmt(r.pct_size_copy, "%.1f%%"));
    cells.back().push_back(r.config);
  }
  std::vector<bool> left = {true, false, false, true, false, false, false, false};
  if (size_copy) left.push_back(false);
  left.push_back(true);
  print_aligned(out, cells, left);
}

void print_sweeps(std::FILE* out, const Env& env, const std::vector<Row>& rows) {
  for (const Row& r : rows) {
    if (r.sweep.empty()) continue;
    std::fprintf(out, "\n# sweep %s M=%lld N=%lld %s (* = the heuristic's config)\n",
                 r.op.c_str(), static_cast<long long>(r.m), static_cast<long long>(r.n),
                 r.dtype.c_str());
    std::vector<std::vector<std::string>> cells = {{"variant", "us", "graph_us", "% copy"}};
    for (const SweepResult& s : r.sweep) {
      const double pct = sweep_pct_copy(env, r, s);
      cells.push_back({s.label, fmt(s.us, "%.2f"), fmt(s.graph_us, "%.2f"), fmt(pct, "%.1f%%")});
    }
    print_aligned(out, cells, {true, false, false, false});
  }
}

Status write_json(const std::string& path, const Env& env, const std::vector<Row>& rows,
                  const Plan& plan) {
  JsonWriter w;
  w.begin_object();
  w.key("env").begin_object();
  w.key("mode").value(env.mode);
  w.key("device").value(env.device);
  w.key("backend").value(env.backend);
  if (!env.no_gpu_reason.empty()) w.key("no_gpu_reason").value(env.no_gpu_reason);
  w.key("fusekit_version").value(env.version);
  w.key("date").value(env.date);
  w.key("commit").value(env.commit);
  w.key("shapes").value(env.shapes_path);
  w.key("row_pad").value(env.row_pad);
  if (env.mode == "gpu") w.key("flush").value(env.flush);
  number_or_null(w, "copy_GBps", env.copy_gbps);
  w.key("copy_bytes").value(env.copy_bytes);
  number_or_null(w, "graph_floor_us", env.graph_floor_us);
  w.key("l2_bytes").value(env.l2_bytes);
  w.key("sms").value(env.sm_count);
  if (env.mode == "cpu") w.key("cpu_threads").value(env.cpu_threads);
  w.end_object();

  w.key("rows").begin_array();
  for (const Row& r : rows) {
    w.begin_object();
    w.key("op").value(r.op);
    w.key("shape").begin_array(true).value(r.m).value(r.n).end_array();
    w.key("dtype").value(r.dtype);
    w.key("bytes").value(r.bytes);
    number_or_null(w, "us", r.us);
    w.key("runs").value(r.runs);
    number_or_null(w, "graph_us", r.graph_us);
    w.key("graph_calls").value(r.graph_calls);
    number_or_null(w, "GBps", r.gbps);
    number_or_null(w, "pct_copy", r.pct_copy);
    if (std::isfinite(r.copy_us)) {  // --size-copy
      number_or_null(w, "copy_us", r.copy_us);
      number_or_null(w, "pct_size_copy", r.pct_size_copy);
    }
    w.key("config").value(r.config);
    if (!r.sweep.empty()) {
      w.key("sweep").begin_array();
      for (const SweepResult& s : r.sweep) {
        w.begin_object();
        w.key("variant").value(s.label);
        number_or_null(w, "us", s.us);
        number_or_null(w, "graph_us", s.graph_us);
        // The sweep table's "% copy" column (and the GB/s it comes from).
        number_or_null(w, "GBps", sweep_gbps(r, s));
        number_or_null(w, "pct_copy", sweep_pct_copy(env, r, s));
        w.end_object();
      }
      w.end_array();
    }
    w.end_object();
  }
  w.end_array();

  w.key("skipped").begin_array();
  for (const Skipped& s : plan.skipped) {
    w.begin_object();
    w.key("op").value(s.op);
    w.key("shape").begin_array(true).value(s.m).value(s.n).end_array();
    w.key("bytes").value(s.bytes);
    w.key("reason").value(s.reason);
    w.end_object();
  }
  w.end_array();
  w.key("notes").begin_array();
  for (const std::string& note : plan.notes) w.value(note);
  w.end_array();
  w.end_object();

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << w.str() << "\n";
  f.close();
  if (!f) return Status::runtime_error("cannot write " + path);
  return Status();
}

}  // namespace fusekit::bench
