// Checks of report.cc's outputs that need no GPU (run by ctest; tests/scripts/bench_json_check.sh
// runs the benchmark itself): the JSON of a GPU run with --sweep, built here from rows as
// runner.cc fills them, must parse, write NaN as null, and hold every number the tables print.
//
//   fusekit_bench_report_check OUT_DIR    (exit 0: all checks passed)
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "json.h"
#include "report.h"

namespace fusekit::bench {
namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  }
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-6 * std::fabs(b); }

int run(const std::string& dir) {
  Env env;
  env.mode = "gpu";
  env.device = "GPU \"quoted\"\tname";
  env.backend = "cuda";
  env.flush = "read";
  env.copy_gbps = 2000;
  env.graph_floor_us = 1.5;
  Row r;
  r.op = "rms_norm";
  r.m = 32;
  r.n = 4096;
  r.dtype = "bf16";
  r.bytes = 2 * (2 * 32 * 4096 + 4096);
  r.us = 4.0;
  r.runs = 50;
  r.graph_us = 2.0;
  r.graph_calls = 100;
  r.gbps = static_cast<double>(r.bytes) / (r.us * 1e3);
  r.pct_copy = 100.0 * r.gbps / env.copy_gbps;
  r.config = "registers *";
  SweepResult a;
  a.label = "cfg a *";
  a.us = 5.0;
  a.graph_us = 2.5;
  SweepResult b;  // a variant whose graph time was not taken (M > 256): NaN -> null
  b.label = "cfg b";
  b.us = 8.0;
  r.sweep = {a, b};
  const std::vector<Row> rows = {r};
  const std::string path = dir + "/report_check.json";
  const Status s = write_json(path, env, rows, Plan());
  expect(s.ok(), "write_json: " + s.to_string());

  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  expect(text.str().find("nan") == std::string::npos, "NaN written as a bare token");
  JsonValue root;
  std::string error;
  if (!JsonReader::parse(text.str(), &root, &error)) {
    expect(false, "the JSON does not parse: " + error);
    return 1;
  }
  const JsonValue* env_json = root.find("env");
  expect(env_json && env_json->find("device") &&
             env_json->find("device")->string == env.device,
         "env.device does not round-trip");
  const JsonValue* rows_json = root.find("rows");
  if (!rows_json || rows_json->array.size() != 1) {
    expect(false, "expected one row");
    return 1;
  }
  const JsonValue& row = rows_json->array[0];
  const JsonValue* sweep = row.find("sweep");
  if (!sweep || sweep->array.size() != 2) {
    expect(false, "expected two sweep variants");
    return 1;
  }
  for (std::size_t i = 0; i < 2; ++i) {
    const JsonValue& v = sweep->array[i];
    const SweepResult& want = r.sweep[i];
    const double gbps = static_cast<double>(r.bytes) / (want.us * 1e3);
    const JsonValue* g = v.find("GBps");
    const JsonValue* pct = v.find("pct_copy");
    // print_sweeps prints "% copy" per variant: the JSON must hold it too.
    expect(g && g->type == JsonValue::Type::kNumber && near(g->number, gbps),
           "sweep " + want.label + ": GBps missing or wrong");
    expect(pct && pct->type == JsonValue::Type::kNumber &&
               near(pct->number, 100.0 * gbps / env.copy_gbps),
           "sweep " + want.label + ": pct_copy missing or wrong");
  }
  const JsonValue* graph = sweep->array[1].find("graph_us");
  expect(graph && graph->type == JsonValue::Type::kNull, "a NaN graph_us is not null");
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace fusekit::bench

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fusekit_bench_report_check OUT_DIR\n");
    return 2;
  }
  const int rc = fusekit::bench::run(argv[1]);
  if (rc == 0) std::printf("report_check: OK\n");
  return rc;
}
