// Row sums for the CPU backend in a fixed order that vectorizes, accurate on long rows.
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
//
// Why blocks: a lane's rounding error grows with the length of its chain of adds, n / 32 of them
// in one pass: at N = 262144 that is 8192 adds, and a LayerNorm mean off by ~1e-4 of itself (on a
// constant row, whose output is then the bias plus that error / sqrt(eps)). So each block of
// kSumBlock elements is summed into fresh lanes and each lane's block sums into a running total:
// chains of at most kSumBlock / 32 + n / kSumBlock adds (288 at N = 262144). Rows of at most one
// block give the same bits as one pass: the totals start at -0, which adds to any value exactly.
#pragma once

#include <algorithm>
#include <cstdint>

namespace fusekit::detail {

constexpr int kSumLanes = 32;
constexpr int64_t kSumBlock = 8192;  // elements: 256 adds a lane

template <typename Term>
float lane_sum(int64_t n, const Term& term) {
  float totals[kSumLanes];
  for (int l = 0; l < kSumLanes; ++l) totals[l] = -0.0f;
  for (int64_t start = 0; start < n; start += kSumBlock) {
    float lanes[kSumLanes] = {};  // local: stores elsewhere cannot alias them
    const int64_t end = std::min(n, start + kSumBlock);
    int64_t j = start;
    for (; j + kSumLanes <= end; j += kSumLanes) {
      for (int l = 0; l < kSumLanes; ++l) lanes[l] += term(j + l);
    }
    for (; j < end; ++j) lanes[j % kSumLanes] += term(j);
    for (int l = 0; l < kSumLanes; ++l) totals[l] += lanes[l];
  }
  for (int half = kSumLanes / 2; half > 0; half /= 2) {
    for (int l = 0; l < half; ++l) totals[l] += totals[l + half];
  }
  return totals[0];
}

}  // namespace fusekit::detail
