// A measurement probe, not library code: what does a one-row LayerNorm pay for a row whose last
// slot is partial, and would a tree that keeps the partial slot apart until the end take it
// back? On an H100, layer_norm [1, 6144] (256 threads x 3 groups, every slot whole) replays in
// 1.24 us with its moments in one reduction (the counted tree of branch `ct5`), while [1, 5120]
// (the same kernel, the third slot held by threads 0-127 only) stays at 1.56-1.62 with either
// tree (bench/NOTES.md, "The counted factors as constants, measured").
//
// One block of 256 threads a row, bf16, a thread's groups at t, t + 256, t + 512 (16-byte
// loads), weight and bias beside the row, the sums in the library's order (warps first through
// shared memory, then lanes; highest index bit first). Forms:
//   two_pass  the mean from one reduction, the squares about it from a second (the library's
//             tree for rows that are not 2^k groups)
//   one_pass  every slot whole (N = 6144 or 4096): each group's (sum, centred squares) merged
//             over the thread's slots, then over the threads, in one reduction of pairs
//   pairs     the whole slots' pair (A) and the last slot's pair (B) reduced side by side in one
//             reduction of four floats, merged once at the end with constant counts; B's merges
//             are equal or empty because the threads that hold the last slot are a power of two
//             (r = 128 at N = 5120): the best case of such a tree
//   counted   pairs for any r: each merge of the last slot's nodes takes their counts of groups
//             from the thread's residue and divides on the path (N = 5120, and N = 4864: r = 96)
//   shifted   one reduction of plain sums, sum(x - K) and sum((x - K)^2), K the mean of the
//             row's first group (every thread loads it): no merges, so any r; the variance
//             cancels by at most (K - mean)^2 / var <= N / 8 (Cauchy-Schwarz over that group)
// Every form's output is checked against a float64 reference first. Graph replay of 200 PDL
// calls at M = 1 and 32, three rounds.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o partial_slot_probe \
//     bench/partial_slot_probe.cu
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "probe_common.h"

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kGroup = 8;  // bf16 values in 16 bytes

struct Pair {  // a node of the row's tree: its values' sum and squares about their mean
  float sum, m2;
};

// Two nodes of `count` values each (count a power of two, so 1 / (2 count) is exact).
__device__ __forceinline__ Pair merge_equal(Pair lo, Pair hi, float inv_two_count) {
  const float d = hi.sum - lo.sum;
  return {lo.sum + hi.sum, fmaf(d, d * inv_two_count, lo.m2 + hi.m2)};
}

// One group's pair: its sum and its squares about its own mean.
__device__ __forceinline__ Pair group_pair(const float (&v)[8]) {
  float s = 0.f;
#pragma unroll
  for (int e = 0; e < 8; ++e) s += v[e];
  const float centre = s * (1.0f / kGroup);
  float m2 = 0.f;
#pragma unroll
  for (int e = 0; e < 8; ++e) m2 = fmaf(v[e] - centre, v[e] - centre, m2);
  return {s, m2};
}

// Where a merge of the threads' tree stands: `level` counts from 0 at the highest thread bit,
// `bit` is that thread bit; the merged nodes are the threads congruent to lo_residue and to
// lo_residue + 2^bit modulo 2^(bit + 1), and mine_is_lo says which of the two the calling
// thread's own operand is.
struct Level {
  int level, bit;
  bool mine_is_lo;
  int lo_residue;
};

// The library's order for a tuple of kLanes floats merged by `merge(mine, other, Level)`: every
// thread folds its lane's values of all warps (highest thread bit first), then xor shuffles.
template <int kLanes, class Merge>
__device__ __forceinline__ void warps_first(float (&v)[kLanes], Merge merge) {
  __shared__ float slots[kWarps][kLanes][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int k = 0; k < kLanes; ++k) slots[warp][k][lane] = v[k];
  __syncthreads();
  float w[kWarps][kLanes];
#pragma unroll
  for (int i = 0; i < kWarps; ++i) {
#pragma unroll
    for (int k = 0; k < kLanes; ++k) w[i][k] = slots[i][k][lane];
  }
  constexpr int kTopBit = 7;  // log2(kThreads) - 1
  static_assert(kThreads == 2 << kTopBit, "the thread bits");
  int level = 0;
#pragma unroll
  for (int half = kWarps / 2; half > 0; half /= 2, ++level) {
#pragma unroll
    for (int i = 0; i < half; ++i) {
      merge(w[i], w[i + half], Level{level, kTopBit - level, true, lane + 32 * i});
    }
  }
#pragma unroll
  for (int k = 0; k < kLanes; ++k) v[k] = w[0][k];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1, ++level) {
    float other[kLanes];
#pragma unroll
    for (int k = 0; k < kLanes; ++k) other[k] = __shfl_xor_sync(0xffffffffu, v[k], o);
    // Both lanes of a pair form the same node: each merge is symmetric in its operands.
    merge(v, other, Level{level, kTopBit - level, (lane & o) == 0, lane & (o - 1)});
  }
}

enum class Form { kTwoPass, kOnePass, kPairs, kPairsCounted, kShifted };

struct Args {
  const uint4* x;
  const uint4* w;
  const uint4* b;
  uint4* out;
  float eps;
};

// kItems slots a thread, the last held by threads below kLastThreads.
template <Form kForm, int kItems, int kLastThreads>
__global__ void __launch_bounds__(kThreads) layer_probe(Args a) {
  constexpr int kGroups = kThreads * (kItems - 1) + kLastThreads;
  constexpr int n = kGroups * kGroup;
  const int t = threadIdx.x;
  const bool has_last = t < kLastThreads;
  auto present = [&](int i) { return i < kItems - 1 || has_last; };
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const uint4* x = a.x + static_cast<int64_t>(blockIdx.x) * kGroups;
  uint4 xv[kItems], wv[kItems], bv[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    // An absent slot loads the row's first group (no branch); its values go unused.
    const int g = present(i) ? i * kThreads + t : 0;
    xv[i] = x[g];
    wv[i] = a.w[g];
    bv[i] = a.b[g];
  }
  uint4 first{};
  if constexpr (kForm == Form::kShifted) first = x[0];
  asm volatile("griddepcontrol.launch_dependents;");
  float f[kItems][8];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    unpack(xv[i], f[i]);
    if (!present(i)) {
#pragma unroll
      for (int e = 0; e < 8; ++e) f[i][e] = 0.f;
    }
  }
  float mean, var;
  if constexpr (kForm == Form::kTwoPass) {
    float s[1] = {0.f};
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
#pragma unroll
      for (int e = 0; e < 8; ++e) s[0] += f[i][e];
    }
    auto add = [](float(&mine)[1], const float(&other)[1], Level) { mine[0] += other[0]; };
    warps_first<1>(s, add);
    mean = s[0] / static_cast<float>(n);
    float q[1] = {0.f};
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (present(i)) {
#pragma unroll
        for (int e = 0; e < 8; ++e) q[0] = fmaf(f[i][e] - mean, f[i][e] - mean, q[0]);
      }
    }
    __syncthreads();  // the scratch is reused
    warps_first<1>(q, add);
    var = q[0] / static_cast<float>(n);
  } else if constexpr (kForm == Form::kShifted) {
    float k8[8];
    unpack(first, k8);
    float k = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) k += k8[e];
    k *= 1.0f / kGroup;
    float v[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (present(i)) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float c = f[i][e] - k;
          v[0] += c;
          v[1] = fmaf(c, c, v[1]);
        }
      }
    }
    auto add = [](float(&mine)[2], const float(&other)[2], Level) {
      mine[0] += other[0];
      mine[1] += other[1];
    };
    warps_first<2>(v, add);
    const float shifted_mean = v[0] / static_cast<float>(n);
    mean = k + shifted_mean;
    var = fmaxf(fmaf(-shifted_mean, shifted_mean, v[1] / static_cast<float>(n)), 0.f);
  } else if constexpr (kForm == Form::kOnePass) {
    static_assert(kLastThreads == kThreads, "every slot whole");
    Pair g[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) g[i] = group_pair(f[i]);
    // The thread's slots, highest index bit first: for three, slot 0 with slot 2 (equal), then
    // with slot 1 (two groups against one: constant counts).
    Pair p;
    if constexpr (kItems == 2) {
      p = merge_equal(g[0], g[1], 1.0f / (2 * kGroup));
    } else {
      static_assert(kItems == 3, "two or three slots");
      const Pair p02 = merge_equal(g[0], g[2], 1.0f / (2 * kGroup));
      // d = mean(slot 1) - mean(slots 0, 2); m2 += d^2 * (16 x 8) / 24
      const float d = g[1].sum * (1.0f / kGroup) - p02.sum * (1.0f / (2 * kGroup));
      p = {p02.sum + g[1].sum, fmaf(d, d * (16.0f * 8.0f / 24.0f), p02.m2 + g[1].m2)};
    }
    float v[2] = {p.sum, p.m2};
    auto merge = [](float(&mine)[2], const float(&other)[2], Level at) {
      // level 0: two single threads' nodes of kItems groups
      const float inv_two_count = 1.0f / static_cast<float>(2 * kItems * kGroup << at.level);
      const Pair m = merge_equal({mine[0], mine[1]}, {other[0], other[1]}, inv_two_count);
      mine[0] = m.sum;
      mine[1] = m.m2;
    };
    warps_first<2>(v, merge);
    mean = v[0] / static_cast<float>(n);
    var = v[1] / static_cast<float>(n);
  } else {
    static_assert(kItems == 3, "two whole slots and the last");
    static_assert(kForm == Form::kPairsCounted ||
                      ((kLastThreads & (kLastThreads - 1)) == 0 && kLastThreads >= 32),
                  "equal merges: r a power of two, whole warps");
    const Pair g0 = group_pair(f[0]), g1 = group_pair(f[1]);
    const Pair whole = merge_equal(g0, g1, 1.0f / (2 * kGroup));
    const Pair last = has_last ? group_pair(f[2]) : Pair{0.f, 0.f};
    float v[4] = {whole.sum, whole.m2, last.sum, last.m2};
    auto merge = [](float(&mine)[4], const float(&other)[4], Level at) {
      const Pair a = merge_equal({mine[0], mine[1]}, {other[0], other[1]},
                                 1.0f / static_cast<float>(2 * 2 * kGroup << at.level));
      mine[0] = a.sum;
      mine[1] = a.m2;
      // The last slot's nodes. Before the merge at `bit`, a node holds the threads congruent to
      // its residue modulo 2^(bit + 1); those below kLastThreads hold the slot.
      if constexpr (kForm == Form::kPairs) {
        // r = 2^k: at bit >= k the upper node is empty (the lower one is kept); below, both
        // hold 2^(k - 1 - bit) groups.
        if ((1 << at.bit) < kLastThreads) {
          const float count =
              static_cast<float>(kGroup << (__builtin_ctz(kLastThreads) - at.bit - 1));
          const Pair b = merge_equal({mine[2], mine[3]}, {other[2], other[3]}, 0.5f / count);
          mine[2] = b.sum;
          mine[3] = b.m2;
        }
      } else {
        // Any r: each node's count of groups from its residue, and the general merge with a
        // division (the factor formed on the path), written so that both operand orders give
        // the same bits (no contraction into an FMA).
        const int modulus = 2 << at.bit;
        auto groups_of = [&](int residue) {
          return residue < kLastThreads ? (kLastThreads - 1 - residue) / modulus + 1 : 0;
        };
        const int n_lo = groups_of(at.lo_residue), n_hi = groups_of(at.lo_residue + modulus / 2);
        const float lo_sum = at.mine_is_lo ? mine[2] : other[2];
        const float hi_sum = at.mine_is_lo ? other[2] : mine[2];
        if (n_hi > 0) {  // else the upper node is empty and the lower one is the merge
          const float t = __fsub_rn(__fmul_rn(hi_sum, static_cast<float>(n_lo)),
                                    __fmul_rn(lo_sum, static_cast<float>(n_hi)));
          const float denominator = static_cast<float>(kGroup * n_lo * n_hi) *
                                    static_cast<float>(n_lo + n_hi);
          mine[3] = __fadd_rn(__fadd_rn(mine[3], other[3]), __fdiv_rn(__fmul_rn(t, t),
                                                                       denominator));
          mine[2] = __fadd_rn(mine[2], other[2]);
        } else {
          mine[2] = lo_sum;
          mine[3] = at.mine_is_lo ? mine[3] : other[3];
        }
      }
    };
    warps_first<4>(v, merge);
    // The two trees' roots: 2 x 256 groups and kLastThreads groups, constant counts.
    constexpr float kCountA = 2.0f * kThreads * kGroup, kCountB = 1.0f * kLastThreads * kGroup;
    const float d = v[2] * (1.0f / kCountB) - v[0] * (1.0f / kCountA);
    mean = (v[0] + v[2]) / static_cast<float>(n);
    var = fmaf(d, d * (kCountA * kCountB / (kCountA + kCountB)), v[1] + v[3]) /
          static_cast<float>(n);
  }
  const float rstd = rsqrtf(var + a.eps);
  uint4* out = a.out + static_cast<int64_t>(blockIdx.x) * kGroups;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (present(i)) {
      float wf[8], bf[8], y[8];
      unpack(wv[i], wf);
      unpack(bv[i], bf);
#pragma unroll
      for (int e = 0; e < 8; ++e) y[e] = fmaf((f[i][e] - mean) * rstd, wf[e], bf[e]);
      out[i * kThreads + t] = pack(y);
    }
  }
}

struct Buffers {
  uint4 *x, *w, *b, *out;
};

// The largest |out - reference| over `rows` rows of n, the reference in float64.
double max_error(const Buffers& buf, int rows, int n, cudaStream_t s) {
  std::vector<__nv_bfloat16> x(static_cast<size_t>(rows) * n), w(n), b(n), out(x.size());
  CK(cudaMemcpyAsync(x.data(), buf.x, x.size() * 2, cudaMemcpyDeviceToHost, s));
  CK(cudaMemcpyAsync(w.data(), buf.w, n * 2, cudaMemcpyDeviceToHost, s));
  CK(cudaMemcpyAsync(b.data(), buf.b, n * 2, cudaMemcpyDeviceToHost, s));
  CK(cudaMemcpyAsync(out.data(), buf.out, out.size() * 2, cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  double worst = 0.0;
  for (int r = 0; r < rows; ++r) {
    const __nv_bfloat16* xr = x.data() + static_cast<size_t>(r) * n;
    double sum = 0.0, sq = 0.0;
    for (int j = 0; j < n; ++j) sum += __bfloat162float(xr[j]);
    const double mean = sum / n;
    for (int j = 0; j < n; ++j) {
      const double d = __bfloat162float(xr[j]) - mean;
      sq += d * d;
    }
    const double rstd = 1.0 / std::sqrt(sq / n + 1e-5);
    for (int j = 0; j < n; ++j) {
      const double ref = (__bfloat162float(xr[j]) - mean) * rstd * __bfloat162float(w[j]) +
                         __bfloat162float(b[j]);
      const double got = __bfloat162float(out[static_cast<size_t>(r) * n + j]);
      const double e = std::isnan(got) ? INFINITY : std::fabs(got - ref);
      worst = std::max(worst, e);
    }
  }
  return worst;
}

// One probe kernel: its form and shape, as a type.
template <Form kForm, int kItems, int kLastThreads>
struct Probe {
  static constexpr int n = (kThreads * (kItems - 1) + kLastThreads) * kGroup;
  static constexpr auto kernel = layer_probe<kForm, kItems, kLastThreads>;
};

// Calls visit(Probe<...>{}, name) for every probe kernel, in the order of the output (each one:
// `&`, not `&&`); true if every call returned true.
template <class Visit>
bool for_each_probe(Visit visit) {
  return (visit(Probe<Form::kTwoPass, 3, 128>{}, "two_pass") &
          visit(Probe<Form::kPairs, 3, 128>{}, "pairs") &
          visit(Probe<Form::kPairsCounted, 3, 128>{}, "counted") &
          visit(Probe<Form::kShifted, 3, 128>{}, "shifted") &
          visit(Probe<Form::kTwoPass, 3, 96>{}, "two_pass") &
          visit(Probe<Form::kPairsCounted, 3, 96>{}, "counted") &
          visit(Probe<Form::kShifted, 3, 96>{}, "shifted") &
          visit(Probe<Form::kTwoPass, 3, 256>{}, "two_pass") &
          visit(Probe<Form::kOnePass, 3, 256>{}, "one_pass") &
          visit(Probe<Form::kPairs, 3, 256>{}, "pairs") &
          visit(Probe<Form::kShifted, 3, 256>{}, "shifted") &
          visit(Probe<Form::kTwoPass, 2, 256>{}, "two_pass") &
          visit(Probe<Form::kOnePass, 2, 256>{}, "one_pass") &
          visit(Probe<Form::kShifted, 2, 256>{}, "shifted")) != 0;
}

Args args_of(const Buffers& buf) { return {buf.x, buf.w, buf.b, buf.out, 1e-5f}; }

// 32 rows against the float64 reference, the output NaN-poisoned first.
template <class P>
bool check_probe(P, const char* name, const Buffers& buf, cudaStream_t s) {
  constexpr int kRows = 32;
  CK(cudaMemsetAsync(buf.out, 0xff, size_t{kRows} * P::n * 2, s));
  launch_pdl(P::kernel, kRows, kThreads, 0, s, args_of(buf));
  const double err = max_error(buf, kRows, P::n, s);
  // |y| < 2 here (x in [1.5, 2.5), w and b in [-0.5, 0.5)): two bf16 ulps are 2^-6.
  const bool ok = err <= 0.0157;
  std::printf("  %-9s N = %5d  max |error| %.4g %s\n", name, P::n, err, ok ? "" : "FAILED");
  return ok;
}

// Graph replay at M = 1 and 32.
template <class P>
bool time_probe(P, const char* name, const Buffers& buf, cudaStream_t s) {
  std::printf("  %-9s N = %5d", name, P::n);
  for (int rows : {1, 32}) {
    const float us = captured_us(
        [&](cudaStream_t st) { launch_pdl(P::kernel, rows, kThreads, 0, st, args_of(buf)); }, s,
        200);
    std::printf("  M = %2d %.3f", rows, us);
  }
  std::printf(" us\n");
  return true;
}

}  // namespace

int main() {
  constexpr int kRows = 32, kMaxN = 6144;
  const size_t count = size_t{kRows} * kMaxN;
  Buffers buf;
  CK(cudaMalloc(&buf.x, count * 2));
  CK(cudaMalloc(&buf.w, kMaxN * 2));
  CK(cudaMalloc(&buf.b, kMaxN * 2));
  CK(cudaMalloc(&buf.out, count * 2));
  // Rows of values in [1.5, 2.5) (a mean of 2, so that the centring matters); w and b in
  // [-0.5, 0.5).
  std::vector<__nv_bfloat16> h = random_bf16(count + 2 * kMaxN);
  for (size_t i = 0; i < count; ++i) h[i] = __float2bfloat16(__bfloat162float(h[i]) + 2.0f);
  CK(cudaMemcpy(buf.x, h.data(), count * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(buf.w, h.data() + count, kMaxN * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(buf.b, h.data() + count + kMaxN, kMaxN * 2, cudaMemcpyHostToDevice));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  print_replay_header();
  std::printf("check against float64 (32 rows)\n");
  if (!for_each_probe([&](auto p, const char* name) { return check_probe(p, name, buf, s); })) {
    return 1;
  }
  for (int round = 0; round < 3; ++round) {
    std::printf("round %d\n", round + 1);
    for_each_probe([&](auto p, const char* name) { return time_probe(p, name, buf, s); });
  }
  return 0;
}
