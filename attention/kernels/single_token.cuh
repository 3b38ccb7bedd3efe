// Plans whose every query row sees exactly one KV token (SeesOneTokenPerRow):
// attention is then that token's V (the softmax of one score is 1) and the
// lse its scaled score, so no work plan, partials or merge are needed. The
// engine's no-attention ceiling (each row sees only its own token) is such a
// plan, as is a first decode step over one-token prompts.
// One warp per row (its token found once, then every query head), grid-stride;
// reads the uploaded plan arrays (TreeParams) and the pool; writes out and lse.
#ifndef BANYAN_ATTENTION_KERNELS_SINGLE_TOKEN_CUH_
#define BANYAN_ATTENTION_KERNELS_SINGLE_TOKEN_CUH_

#include "attention/kernels/mma.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/state.cuh"

namespace banyan::attention::kernels {

inline constexpr int kSingleTokenThreads = 256;

template <typename T, int D>
__global__ void __launch_bounds__(kSingleTokenThreads) SingleTokenKernel(TreeParams p, int32_t num_segments) {
  constexpr int kWarpsPerBlock = kSingleTokenThreads / 32;
  const int lane = threadIdx.x % 32;
  const int32_t rows = *p.num_queries;
  const int32_t stride = gridDim.x * kWarpsPerBlock;
  for (int32_t row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32; row < rows; row += stride) {
    // The row's entry that sees a token (the others see none).
    int32_t entry = 0;
    for (int32_t k = p.query_entry_indptr[row]; k < p.query_entry_indptr[row + 1]; ++k) {
      const int32_t e = p.query_entries[k];
      if (p.entry_kv_limit[e] > 0) entry = e;
    }
    // Its segment (entries are numbered segment after segment) and the
    // segment's first token.
    int32_t lo = 0, hi = num_segments;
    while (hi - lo > 1) {
      const int32_t mid = (lo + hi) / 2;
      if (p.segment_entry_indptr[mid] <= entry) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    const int32_t position = p.segment_first_slot[lo];
    const int64_t page = p.page_indices[p.segment_page_indptr[lo] + position / p.page_size];
    const int32_t slot = position % p.page_size;
    // Every query head of the row: its KV head's K and V rows of that token.
    for (int32_t head = 0; head < p.num_q_heads; ++head) {
      const int64_t at = ((page * p.num_kv_heads + head / p.group) * p.page_size + slot) * D;
      const T* k = static_cast<const T*>(p.kv_pool) + p.k_plane + at;
      const T* v = static_cast<const T*>(p.kv_pool) + p.v_plane + at;
      const int64_t idx = int64_t{row} * p.num_q_heads + head;
      float dot = 0.0f;
#pragma unroll
      for (int d = lane; d < D; d += 32) {
        StoreAny(p.out, p.out_dtype, idx * D + d, ToFloat(v[d]));
        if (p.lse != nullptr) dot += LoadAny(p.q, p.q_dtype, idx * D + d) * ToFloat(k[d]);
      }
      if (p.lse != nullptr) {
#pragma unroll
        for (int off = 16; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        if (lane == 0) p.lse[idx] = dot * p.scale_log2 * kLn2;  // log(exp(scale q . k))
      }
    }
  }
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_SINGLE_TOKEN_CUH_
