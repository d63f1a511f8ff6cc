// The gated-activation family's GPU hooks for builds without a GPU backend: nothing to report or
// sweep (the GPU entry points they would call are not built).
#include "act_sweep.h"

namespace fusekit::bench {

Status act_describe(const OpSpec&, const OpArgs&, const GpuFacts&, std::string* text) {
  *text = "-";
  return Status();
}

Status act_sweep(const OpSpec&, const OpArgs&, const GpuFacts&,
                 std::vector<SweepVariant>* variants) {
  variants->clear();
  return Status();
}

Status act_quant_describe(const OpSpec& op, const OpArgs& args, const GpuFacts& gpu,
                          std::string* text) {
  return act_describe(op, args, gpu, text);
}

Status act_quant_sweep(const OpSpec& op, const OpArgs& args, const GpuFacts& gpu,
                       std::vector<SweepVariant>* variants) {
  return act_sweep(op, args, gpu, variants);
}

}  // namespace fusekit::bench
