// When the CPU backend splits rows across OpenMP threads. Waking the team costs microseconds,
// more than a few thousand elements take alone, so small calls (a decode step) stay on the
// calling thread.
#pragma once

#include <cstdint>

namespace fusekit::detail {

constexpr int64_t kCpuParallelMinElements = int64_t{1} << 16;

inline bool cpu_parallel_worthwhile(int64_t rows, int64_t elements) {
  return rows > 1 && elements >= kCpuParallelMinElements;
}

}  // namespace fusekit::detail
