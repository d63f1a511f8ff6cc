// Host-side choices every GPU launcher makes the same way: the widest vector access that the
// tensors' alignment allows, whether programmatic dependent launch is on, and the largest
// thread-block cluster to launch.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>

namespace fusekit::gpu {

// One tensor as a kernel walks it: rows `row_stride` elements of `elem_bytes` apart from `data`
// (null: absent, no constraint; row_stride 0: a single row such as a weight), in runs whose
// starts are a further `run_skip` elements apart (core/validate.h, Rows; 0 for one run).
struct RowAccess {
  const void* data;
  int64_t row_stride;
  size_t elem_bytes;
  int64_t run_skip = 0;
};

// The widest access, in elements (`group` = one 16-byte group of the widest dtype, halved down to
// 1), that every row of every tensor allows: base addresses aligned to the access (at most 16
// bytes) and, when there is more than one row, row strides (and run skips) a multiple of it.
inline int widest_load(int group, int64_t rows, std::initializer_list<RowAccess> tensors) {
  int load = group;
  for (; load > 1; load /= 2) {
    bool ok = true;
    for (const RowAccess& t : tensors) {
      if (t.data == nullptr) continue;
      const size_t align = std::min<size_t>(16, static_cast<size_t>(load) * t.elem_bytes);
      ok = ok && reinterpret_cast<std::uintptr_t>(t.data) % align == 0 &&
           (rows <= 1 || (t.row_stride % load == 0 && t.run_skip % load == 0));
    }
    if (ok) break;
  }
  return load;
}

// Programmatic dependent launch (where the GPU has it) unless FUSEKIT_PDL=0; read once.
inline bool pdl_enabled_by_default() {
  static const bool enabled = [] {
    const char* v = std::getenv("FUSEKIT_PDL");
    return v == nullptr || v[0] != '0';
  }();
  return enabled;
}

// The largest thread-block cluster the launchers may use on a device that runs `device_max`
// blocks to a cluster, given the value of FUSEKIT_MAX_CLUSTER_BLOCKS (null: unset): a decimal
// count from 1 (no clusters) up, taken down to a power of two and to device_max. Unset, empty or
// anything else (a sign, trailing characters, 0): device_max. Why a cap: to keep every launch at
// the portable cluster size (8), or off clusters, where 16-block clusters are unwanted, such as
// under compute-sanitizer synccheck, which stops grids of several of them
// (tests/cpp/gpu_cluster_mailbox_check.cu). The launch heuristics already choose under any
// device_max (sm_80 and HIP have 1), so a cap changes which path a long row takes, never whether
// the results are right.
inline int cluster_blocks_limit(const char* value, int device_max) {
  if (value == nullptr || *value == '\0') return device_max;
  int64_t count = 0;
  for (const char* c = value; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9') return device_max;
    count = std::min<int64_t>(count * 10 + (*c - '0'), int64_t{1} << 30);
  }
  if (count < 1) return device_max;
  int limit = 1;
  while (limit * 2 <= count && limit * 2 <= device_max) limit *= 2;
  return std::min(limit, device_max);
}

}  // namespace fusekit::gpu
