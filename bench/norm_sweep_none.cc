// The norm family's GPU hooks for builds without a GPU backend: there is no launch configuration
// to report and nothing to sweep (the GPU entry points they would call are not built).
#include "norm_sweep.h"

namespace fusekit::bench {

Status norm_describe(const OpSpec&, const OpArgs&, const GpuFacts&, std::string* text) {
  *text = "-";
  return Status();
}

Status norm_sweep(const OpSpec&, const OpArgs&, const GpuFacts&,
                  std::vector<SweepVariant>* variants) {
  variants->clear();
  return Status();
}

}  // namespace fusekit::bench
