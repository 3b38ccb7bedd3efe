// One thread block's pass over a logits row (fp32, device memory), shared by
// the greedy kernel (greedy_cuda.cu) and the draw kernel (sample_cuda.cu):
// the first maximum, whether a NaN or +inf is present, the smallest finite
// value, and sum(exp(x - max)) as a running sum per thread (rescaled when
// its max grows), combined across warps in double.
//
//   __shared__ RowStatsShared<kWarps> sh;
//   const RowStats r = ScanRowBlock<kThreads>(row, vocab, sh);   // every thread gets r
//
// Every thread of the block must call it (it synchronizes the block).
// Deterministic: a fixed reduction order for a given vocab and block size.
#ifndef BANYAN_MODEL_SAMPLING_ROW_STATS_CUH_
#define BANYAN_MODEL_SAMPLING_ROW_STATS_CUH_

#include <cmath>
#include <cstdint>

namespace banyan::model::sampling {

struct RowStats {
  float max;       // -inf when every value is -inf
  int32_t argmax;  // its first index; INT32_MAX when every value is -inf
  bool bad;        // a NaN or +inf is present (then max and sum are meaningless)
  float least;     // the smallest finite value (+inf if none)
  double sum;      // sum of exp(x - max)
  // No usable maximum: a NaN, +inf, or nothing finite.
  __device__ bool unusable() const { return bad || argmax == INT32_MAX; }
};

template <int kWarps>
struct RowStatsShared {
  float max[kWarps];
  int32_t argmax[kWarps];
  float least[kWarps];
  double sum[kWarps];
  int32_t bad;
};

// (v, i) beats (best, best_i): larger value, then lower index.
__device__ __forceinline__ bool Beats(float v, int32_t i, float best, int32_t best_i) {
  return v > best || (v == best && i < best_i);
}

template <int kThreads>
__device__ RowStats ScanRowBlock(const float* __restrict__ x, int32_t vocab, RowStatsShared<kThreads / 32>& sh) {
  constexpr int kWarps = kThreads / 32;
  constexpr unsigned kFull = 0xffffffffu;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) sh.bad = 0;
  float best = -INFINITY, sum = 0.0f, least = INFINITY;
  int32_t best_i = INT32_MAX;
  bool bad = false;
  for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {  // ascending i: a thread's first max
    const float l = x[i];
    bad |= (l != l) | (l == INFINITY);
    if (l != -INFINITY) least = fminf(least, l);
    if (l > best) {
      sum = sum * expf(best - l) + 1.0f;
      best = l;
      best_i = i;
    } else if (l != -INFINITY) {
      sum += expf(l - best);
    }
  }
  for (int off = 16; off > 0; off /= 2) {
    const float ov = __shfl_xor_sync(kFull, best, off);
    const int32_t oi = __shfl_xor_sync(kFull, best_i, off);
    const float os = __shfl_xor_sync(kFull, sum, off);
    least = fminf(least, __shfl_xor_sync(kFull, least, off));
    const float m = fmaxf(best, ov);
    if (m != -INFINITY) {
      sum = (best == -INFINITY ? 0.0f : sum * expf(best - m)) + (ov == -INFINITY ? 0.0f : os * expf(ov - m));
    }
    if (Beats(ov, oi, best, best_i)) best_i = oi;
    best = m;
  }
  if (lane == 0) {
    sh.max[warp] = best;
    sh.argmax[warp] = best_i;
    sh.sum[warp] = sum;
    sh.least[warp] = least;
  }
  __syncthreads();  // also orders sh.bad's reset before the atomics
  if (bad) atomicOr(&sh.bad, 1);
  RowStats r{sh.max[0], sh.argmax[0], false, sh.least[0], 0.0};
  for (int w = 1; w < kWarps; ++w) {
    if (Beats(sh.max[w], sh.argmax[w], r.max, r.argmax)) {
      r.max = sh.max[w];
      r.argmax = sh.argmax[w];
    }
    r.least = fminf(r.least, sh.least[w]);
  }
  for (int w = 0; w < kWarps; ++w) {
    if (sh.max[w] != -INFINITY) r.sum += sh.sum[w] * exp(static_cast<double>(sh.max[w]) - r.max);
  }
  __syncthreads();  // the atomics have landed; sh may be reused after the next line
  r.bad = sh.bad != 0;
  __syncthreads();
  return r;
}

}  // namespace banyan::model::sampling

#endif  // BANYAN_MODEL_SAMPLING_ROW_STATS_CUH_
