#include "model/sampling/greedy_cuda.h"

#include <cfloat>
#include <cmath>

#include "sdk/gpu/cuda_status.h"

namespace banyan::model::sampling {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

// (value, index) with "larger value, then lower index" as the winner; NaN
// never wins (callers flag it separately).
struct Best {
  float v;
  int32_t i;
};

__device__ __forceinline__ Best Better(Best a, Best b) {
  if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
  return a;
}

// One block per row: pass 1 finds the first maximum (and bad values), pass 2
// sums exp(x - max) over the row.
__global__ void __launch_bounds__(kThreads) GreedyRowsKernel(const float* __restrict__ logits, int32_t vocab,
                                                              int32_t* tokens, float* logprobs, int32_t* bad) {
  __shared__ Best warp_best[kWarps];
  __shared__ double warp_sum[kWarps];
  __shared__ int32_t row_bad;
  const int row = blockIdx.x;
  const float* x = logits + static_cast<int64_t>(row) * vocab;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) row_bad = 0;
  Best best{-INFINITY, INT32_MAX};
  int32_t my_bad = 0;
  for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = x[i];
    my_bad |= (v != v) | (v == INFINITY);
    if (v > best.v) best = {v, i};  // ascending i: the first max of this thread's values
  }
  for (int off = 16; off > 0; off /= 2) {
    Best other{__shfl_xor_sync(0xffffffffu, best.v, off), __shfl_xor_sync(0xffffffffu, best.i, off)};
    best = Better(best, other);
  }
  if (lane == 0) warp_best[warp] = best;
  __syncthreads();  // also orders row_bad's reset before the atomics
  if (my_bad) atomicOr(&row_bad, 1);
  best = warp_best[0];
  for (int w = 1; w < kWarps; ++w) best = Better(best, warp_best[w]);
  // -inf everywhere: no index won.
  const float max = best.v;
  float sum = 0.0f;
  for (int32_t i = threadIdx.x; i < vocab; i += kThreads) sum += expf(x[i] - max);
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (lane == 0) warp_sum[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < kWarps; ++w) total += warp_sum[w];
    const bool row_is_bad = row_bad != 0 || best.i == INT32_MAX;
    tokens[row] = row_is_bad ? 0 : best.i;
    logprobs[row] = row_is_bad ? NAN : static_cast<float>(-log(total));
    bad[row] = row_is_bad ? 1 : 0;
  }
}

}  // namespace

absl::Status LaunchGreedyRows(const GreedyRowsArgs& a, cudaStream_t stream) {
  if (a.logits == nullptr || a.tokens == nullptr || a.logprobs == nullptr || a.bad == nullptr) {
    return absl::InvalidArgumentError("greedy rows: null pointer");
  }
  if (a.rows < 1 || a.vocab < 1) return absl::InvalidArgumentError("greedy rows: rows and vocab must be >= 1");
  GreedyRowsKernel<<<a.rows, kThreads, 0, stream>>>(a.logits, a.vocab, a.tokens, a.logprobs, a.bad);
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace banyan::model::sampling
