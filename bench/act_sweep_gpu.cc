// The gated-activation family's GPU hooks (see act_sweep.h), for builds with a GPU backend.
//
// Like the norm sweep, this bypasses the public API on purpose: it builds the detail::ActProblem
// that act_and_mul builds for the benchmark's tensors (gate and up the two halves of x's rows)
// and launches it through gpu::run_act_gpu_with with an explicit configuration, so each variant
// differs from the library's own choice in one launch decision. The forward op only: the fp8 forms
// report no configuration and are not swept.
#include <string>

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

// The fp8 forms' problem has out as an e4m3fn [M, N] view of the out slot and the scales in the
// spare slot (ops.cc's call_act).
detail::ActProblem problem_of(const OpSpec& op, const OpArgs& a, bool quantize = false) {
  detail::ActProblem p;
  p.act = activation_of(op);
  p.quantize = quantize;
  p.format = Fp8Format::kE4M3FN;
  p.scale = static_cast<float*>(a.t[kActSpare].data);
  p.rows = a.m;
  p.cols = a.n;
  p.dtype = a.dtype;
  const TensorView& x = a.t[kActX];
  const auto* gate = static_cast<const char*>(x.data);
  p.gate = gate;
  p.gate_stride = 2 * a.n;
  p.up = gate + a.n * static_cast<int64_t>(dtype_size(a.dtype));
  p.up_stride = 2 * a.n;
  p.out = a.t[kActOut].data;
  p.out_stride = a.n;
  p.device = x.device;
  return p;
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
  const gpu::ActElementwiseConfig heuristic = gpu::choose_act_elementwise_config(shape, false);
  std::vector<gpu::ActElementwiseConfig> configs = {heuristic};
  for (int group : {shape.group_elems, shape.group_elems / 2}) {
    for (int block : {128, 256}) {
      gpu::ActElementwiseConfig c;
      if (!gpu::make_act_elementwise_config(shape, false, group, block, &c)) continue;
      bool seen = false;
      for (const auto& have : configs) seen = seen || have.to_string() == c.to_string();
      if (!seen) configs.push_back(c);
    }
  }
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const gpu::ActElementwiseConfig config = configs[i];
    SweepVariant v;
    v.label = config.to_string() + (i == 0 ? " *" : "");
    v.call = [p, config](Stream stream) {
      gpu::ActLaunchOverrides o;
      o.elementwise = &config;
      return gpu::run_act_gpu_with(p, stream, o);
    };
    variants->push_back(std::move(v));
  }
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
  const gpu::ActQuantConfig heuristic = gpu::choose_act_quant_config(shape);
  std::vector<gpu::ActQuantConfig> configs = {heuristic};
  auto add = [&configs](const gpu::ActQuantConfig& c) {
    for (const auto& have : configs) {
      if (have.to_string() == c.to_string()) return;
    }
    configs.push_back(c);
  };
  for (int items : {1, 2, 4}) {
    gpu::ActQuantConfig c;
    if (gpu::make_act_quant_cluster_config(shape, items, &c)) add(c);
  }
  add(gpu::make_act_quant_block_config(shape));
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const gpu::ActQuantConfig config = configs[i];
    SweepVariant v;
    v.label = config.to_string() + (i == 0 ? " *" : "");
    v.call = [p, config](Stream stream) {
      gpu::ActLaunchOverrides o;
      o.quant = &config;
      return gpu::run_act_gpu_with(p, stream, o);
    };
    variants->push_back(std::move(v));
  }
  return Status();
}

}  // namespace fusekit::bench
