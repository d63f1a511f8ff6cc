// Row sums for the CPU backend in a fixed order that vectorizes.
//
// Eight lanes: lane l adds term(j) for every j = l (mod 8), in order from j = 0, and the lanes
// are combined pairwise at the end. Written as whole blocks of eight (each lane one vector lane)
// and a tail, the loop vectorizes without reassociating anything, and the sum depends only on n:
// the same in either build of the loops (cpu_isa.h) and whatever the thread count.
#pragma once

#include <cstdint>

namespace fusekit::detail {

constexpr int kSumLanes = 8;

template <typename Term>
float lane_sum(int64_t n, const Term& term) {
  float lanes[kSumLanes] = {};  // local: stores elsewhere cannot alias them
  int64_t j = 0;
  for (; j + kSumLanes <= n; j += kSumLanes) {
    for (int l = 0; l < kSumLanes; ++l) lanes[l] += term(j + l);
  }
  for (; j < n; ++j) lanes[j % kSumLanes] += term(j);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

}  // namespace fusekit::detail
