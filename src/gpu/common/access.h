// Host-side choices every GPU launcher makes the same way: the widest vector access that the
// tensors' alignment allows, and whether programmatic dependent launch is on.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>

namespace fusekit::gpu {

// One tensor as a kernel walks it: rows `row_stride` elements of `elem_bytes` apart from `data`
// (null: absent, no constraint; row_stride 0: a single row such as a weight).
struct RowAccess {
  const void* data;
  int64_t row_stride;
  size_t elem_bytes;
};

// The widest access, in elements (`group` = one 16-byte group of the widest dtype, halved down to
// 1), that every row of every tensor allows: base addresses aligned to the access (at most 16
// bytes) and, when there is more than one row, row strides a multiple of it.
inline int widest_load(int group, int64_t rows, std::initializer_list<RowAccess> tensors) {
  int load = group;
  for (; load > 1; load /= 2) {
    bool ok = true;
    for (const RowAccess& t : tensors) {
      if (t.data == nullptr) continue;
      const size_t align = std::min<size_t>(16, static_cast<size_t>(load) * t.elem_bytes);
      ok = ok && reinterpret_cast<std::uintptr_t>(t.data) % align == 0 &&
           (rows <= 1 || t.row_stride % load == 0);
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

}  // namespace fusekit::gpu
