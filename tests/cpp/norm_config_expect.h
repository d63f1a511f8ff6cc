// The norm launch heuristic's expected shapes, shared by its tests (plain C++, no GPU needed).
#pragma once

#include <cstdint>
#include <string>

#include "gpu/norm/norm_config.h"
#include "gtest/gtest.h"

namespace fusekit::gpu {

// A registers-path shape the heuristic should pick: N, M -> threads per row x groups per thread.
struct RegistersCase {
  int64_t cols, rows;
  int threads_per_row, items;
};

// The heuristic's config for `shape` at N = cols, M = rows (bf16 rows, 132 SMs unless `shape`
// says otherwise), expected on the registers path with these threads per row and groups per
// thread.
inline NormConfig expect_registers_shape(NormShape shape, int64_t cols, int64_t rows,
                                         int threads_per_row, int items) {
  shape.cols = cols;
  shape.rows = rows;
  const NormConfig c = choose_norm_config(shape);
  SCOPED_TRACE("n=" + std::to_string(cols) + " m=" + std::to_string(rows) + " " + c.to_string());
  EXPECT_EQ(c.path, NormConfig::Path::kRegisters);
  EXPECT_EQ(c.threads_per_row, threads_per_row);
  EXPECT_EQ(c.items, items);
  return c;
}

}  // namespace fusekit::gpu
