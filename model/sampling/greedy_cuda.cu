#include "model/sampling/greedy_cuda.h"

#include <cfloat>
#include <cmath>

#include "model/sampling/row_stats.cuh"
#include "sdk/gpu/cuda_status.h"

namespace banyan::model::sampling {
namespace {

constexpr int kThreads = 512;

// One block per row: the first maximum and the row's sum of exp(x - max)
// (row_stats.cuh), so the log-softmax of the maximum is -log(sum).
__global__ void __launch_bounds__(kThreads) GreedyRowsKernel(const float* __restrict__ logits, int32_t vocab,
                                                              int32_t* tokens, float* logprobs, int32_t* bad) {
  __shared__ RowStatsShared<kThreads / 32> sh;
  const int row = blockIdx.x;
  const RowStats r = ScanRowBlock<kThreads>(logits + static_cast<int64_t>(row) * vocab, vocab, sh);
  if (threadIdx.x == 0) {
    const bool row_is_bad = r.unusable();
    tokens[row] = row_is_bad ? 0 : r.argmax;
    logprobs[row] = row_is_bad ? NAN : static_cast<float>(-log(r.sum));
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
