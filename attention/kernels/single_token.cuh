// Plans whose every query row sees exactly one KV token (FindSingleTokens, tree_attention.cu):
// attention is then that token's V (the softmax of one score is 1) and the
// lse its scaled score, so no work plan, partials or merge are needed. The
// engine's no-attention ceiling (each row sees only its own token) is such a
// plan, as is a first decode step over one-token prompts.
// One block per row: the host found each row's token (row_token: its page id
// and slot, two ints per row), so the row's K, V and q chunks all load after
// one round trip and are stored after a second. A thread takes 16-byte chunks
// of V (and K, for the lse) of one query head; the D / kVec threads of a head
// are consecutive lanes of a warp and sum q . k with shuffles.
#ifndef BANYAN_ATTENTION_KERNELS_SINGLE_TOKEN_CUH_
#define BANYAN_ATTENTION_KERNELS_SINGLE_TOKEN_CUH_

#include "attention/kernels/mma.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/state.cuh"

namespace banyan::attention::kernels {

inline constexpr int kSingleTokenThreads = 256;

template <typename T, int D>
__global__ void __launch_bounds__(kSingleTokenThreads) SingleTokenKernel(TreeParams p, const int32_t* row_token) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte chunk
  constexpr int kChunksPerHead = D / kVec;                // 8, 16 or 32: a divisor of the warp
  static_assert(kChunksPerHead <= 32 && 32 % kChunksPerHead == 0);
  const int lane = threadIdx.x % 32;
  const int32_t row = blockIdx.x;
  const int32_t page = row_token[2 * row], slot = row_token[2 * row + 1];
  const int32_t chunks = p.num_q_heads * kChunksPerHead;
  // Warp-uniform trip count: every lane reaches the shuffles.
  for (int32_t c0 = static_cast<int32_t>(threadIdx.x) - lane; c0 < chunks; c0 += kSingleTokenThreads) {
    const int32_t c = c0 + lane;
    const bool in = c < chunks;
    const int32_t head = in ? c / kChunksPerHead : 0, part = c % kChunksPerHead;
    const int64_t at = ((int64_t{page} * p.num_kv_heads + head / p.group) * p.page_size + slot) * D + part * kVec;
    const int64_t idx = (int64_t{row} * p.num_q_heads + head) * D + part * kVec;
    uint4 v = {}, k = {};
    float q[kVec] = {};
    if (in) {
      v = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.kv_pool) + p.v_plane + at);
      if (p.lse != nullptr) {
        k = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.kv_pool) + p.k_plane + at);
#pragma unroll
        for (int i = 0; i < kVec; ++i) q[i] = LoadAny(p.q, p.q_dtype, idx + i);
      }
    }
    const T* vx = reinterpret_cast<const T*>(&v);
    const T* kx = reinterpret_cast<const T*>(&k);
    if (in && p.out_dtype == DTypeCode<T>()) {  // the KV type: the chunk as it is
      *reinterpret_cast<uint4*>(static_cast<T*>(p.out) + idx) = v;
    } else if (in) {
#pragma unroll
      for (int i = 0; i < kVec; ++i) StoreAny(p.out, p.out_dtype, idx + i, ToFloat(vx[i]));
    }
    if (p.lse != nullptr) {
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kVec; ++i) dot += q[i] * ToFloat(kx[i]);
#pragma unroll
      for (int off = kChunksPerHead / 2; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
      // log(exp(scale q . k)), by the head's first thread.
      if (in && part == 0) p.lse[int64_t{row} * p.num_q_heads + head] = dot * p.scale_log2 * kLn2;
    }
  }
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_SINGLE_TOKEN_CUH_
