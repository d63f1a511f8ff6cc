// Row sums for the CPU backend in a fixed order that vectorizes.
//
// kSumLanes lanes: lane l adds term(j) for every j = l (mod kSumLanes), in order from j = 0, and
// the lanes are combined by halving at the end (lane l + half into lane l, half = 16, 8, ..., 1).
// Written as whole blocks of lanes (each lane one vector lane) and a tail, the loop vectorizes
// without reassociating anything, and the sum depends only on n: the same in either build of the
// loops (cpu_isa.h) and whatever the thread count.
//
// Why 32 lanes: each vector of lanes is one chain of dependent adds, so a sum over one vector
// waits on the add's latency (3-4 cycles) every eight elements; four AVX2 vectors (eight SSE
// ones) keep four chains in flight, and the sum runs at the loads' rate instead.
#pragma once

#include <cstdint>

namespace fusekit::detail {

constexpr int kSumLanes = 32;

template <typename Term>
float lane_sum(int64_t n, const Term& term) {
  float lanes[kSumLanes] = {};  // local: stores elsewhere cannot alias them
  int64_t j = 0;
  for (; j + kSumLanes <= n; j += kSumLanes) {
    for (int l = 0; l < kSumLanes; ++l) lanes[l] += term(j + l);
  }
  for (; j < n; ++j) lanes[j % kSumLanes] += term(j);
  for (int half = kSumLanes / 2; half > 0; half /= 2) {
    for (int l = 0; l < half; ++l) lanes[l] += lanes[l + half];
  }
  return lanes[0];
}

}  // namespace fusekit::detail
