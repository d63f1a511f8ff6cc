// The gated-activation family's GPU hooks (see act_sweep.h), for builds with a GPU backend.
//
// Like the norm sweep, this bypasses the public API on purpose: it builds the detail::ActProblem
// that act_and_mul builds for the benchmark's tensors (gate and up the two halves of x's rows)
// and launches it through gpu::run_act_gpu_with with an explicit configuration, so each variant
// differs from the library's own choice in one launch decision: for the forward op the group width
// and block size, for the fp8 forms the cluster split of a row or one block per row.
#include <string>
#include <utility>
#include <vector>

#include "act/act_problem.h"
#include "act_sweep.h"
#include "gpu/act/act_config.h"
#include "gpu/act/act_gpu.h"

namespace fusekit::bench {
namespace {

Activation activation_of(const OpSpec& op) {
  const std::string name = op.shapes_name;
  if (name == "gelu_tanh_and_mul") return Activation::kGeluTanh;
  if (name == "gelu_and_mul") return Activation::kGelu;
  return Activation::kSilu;
}

// The fp8 forms' problem has out as an fp8 [M, N] view (a.fp8_format) of the out slot and the
// scales in the spare slot (ops.cc's call_act).
detail::ActProblem problem_of(const OpSpec& op, const OpArgs& a, bool quantize = false) {
  detail::ActProblem p;
  p.act = activation_of(op);
  p.quantize = quantize;
  p.format = a.fp8_format;
  p.scale = static_cast<float*>(a.t[kActSpare].data);
  p.rows = a.m;
  p.cols = a.n;
  p.dtype = a.dtype;
  const TensorView& x = a.t[kActX];
  const auto* gate = static_cast<const char*>(x.data);
  // The row strides of the views the op was called on (2N and N, plus the pad of --row-pad), so
  // that the config described and the variants timed are those of the same call; the fp8 codes
  // are a contiguous view (call_act).
  p.gate = gate;
  p.gate_stride = x.stride(0);
  p.up = gate + a.n * static_cast<int64_t>(dtype_size(a.dtype));
  p.up_stride = x.stride(0);
  p.out = a.t[kActOut].data;
  p.out_stride = quantize ? a.n : a.t[kActOut].stride(0);
  p.device = x.device;
  return p;
}

// Appends c to configs unless a configuration that prints the same is there already.
template <class Config>
void add_unique(std::vector<Config>* configs, const Config& c) {
  for (const Config& have : *configs) {
    if (have.to_string() == c.to_string()) return;
  }
  configs->push_back(c);
}

// One variant per configuration, the first marked as the heuristic's: the call launches p with
// that configuration, which `place` puts into the launch overrides.
template <class Config, class Place>
void variants_of(const detail::ActProblem& p, const std::vector<Config>& configs, Place place,
                 std::vector<SweepVariant>* variants) {
  for (std::size_t i = 0; i < configs.size(); ++i) {
    SweepVariant v;
    v.label = configs[i].to_string() + (i == 0 ? " *" : "");
    v.call = [p, config = configs[i], place](Stream stream) {
      gpu::ActLaunchOverrides o;
      place(&o, &config);
      return gpu::run_act_gpu_with(p, stream, o);
    };
    variants->push_back(std::move(v));
  }
}

}  // namespace

Status act_describe(const OpSpec& op, const OpArgs& args, const GpuFacts&, std::string* text) {
  gpu::ActShape shape;
  const Status s = gpu::act_shape_of(problem_of(op, args), &shape);
  if (!s.ok()) return s;
  *text = gpu::choose_act_elementwise_config(shape, false).to_string();
  return Status();
}

Status act_sweep(const OpSpec& op, const OpArgs& args, const GpuFacts&,
                 std::vector<SweepVariant>* variants) {
  variants->clear();
  const detail::ActProblem p = problem_of(op, args);
  gpu::ActShape shape;
  const Status s = gpu::act_shape_of(p, &shape);
  if (!s.ok()) return s;
  std::vector<gpu::ActElementwiseConfig> configs = {
      gpu::choose_act_elementwise_config(shape, false)};
  // Block sizes up to the kernels' launch bound: besides 128 and 256, the sizes between, whose
  // block counts spread a small batch's threads more evenly over the SMs; each with the next
  // launch triggered at the start and after the writes.
  for (int group : {shape.group_elems, shape.group_elems / 2}) {
    for (int block : {64, 128, 160, 192, 224, gpu::kActElementwiseThreads}) {
      gpu::ActElementwiseConfig c;
      if (!gpu::make_act_elementwise_config(shape, false, group, block, &c)) continue;
      for (bool late : {false, true}) {
        c.trigger_after_writes = late;
        add_unique(&configs, c);
      }
    }
  }
  variants_of(
      p, configs,
      [](gpu::ActLaunchOverrides* o, const gpu::ActElementwiseConfig* c) { o->elementwise = c; },
      variants);
  return Status();
}

Status act_quant_describe(const OpSpec& op, const OpArgs& args, const GpuFacts&,
                          std::string* text) {
  gpu::ActShape shape;
  const Status s = gpu::act_shape_of(problem_of(op, args, true), &shape);
  if (!s.ok()) return s;
  *text = gpu::choose_act_quant_config(shape).to_string();
  return Status();
}

Status act_quant_sweep(const OpSpec& op, const OpArgs& args, const GpuFacts&,
                       std::vector<SweepVariant>* variants) {
  variants->clear();
  const detail::ActProblem p = problem_of(op, args, true);
  gpu::ActShape shape;
  const Status s = gpu::act_shape_of(p, &shape);
  if (!s.ok()) return s;
  std::vector<gpu::ActQuantConfig> configs = {gpu::choose_act_quant_config(shape)};
  for (int items : {1, 2, 4}) {
    // Blocks of the fewest warps that cover the row, and blocks of the widest width.
    for (int threads : {0, gpu::kActQuantClusterMaxThreads}) {
      gpu::ActQuantConfig c;
      if (gpu::make_act_quant_cluster_config(shape, items, &c, threads)) add_unique(&configs, c);
    }
  }
  // The one-block config, and with the inputs of later rows asked of L2 none, a quarter, half and
  // one wave ahead (ActQuantConfig::prefetch_rows).
  const gpu::ActQuantConfig block = gpu::make_act_quant_block_config(shape);
  add_unique(&configs, block);
  if (block.items > 0) {
    const int64_t wave = gpu::act_quant_resident_rows(shape, block.block_threads);
    for (const int64_t ahead : {int64_t{0}, wave / 4, wave / 2, wave}) {
      gpu::ActQuantConfig c = block;
      c.prefetch_rows = ahead < shape.rows ? ahead : 0;
      add_unique(&configs, c);
    }
  }
  variants_of(
      p, configs, [](gpu::ActLaunchOverrides* o, const gpu::ActQuantConfig* c) { o->quant = c; },
      variants);
  return Status();
}

}  // namespace fusekit::bench
