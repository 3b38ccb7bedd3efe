// The online-softmax state and the merge of partial states: the only place in
// Banyan's CUDA code where that math lives (the CPU reference has its own
// double version in reference/). Every kernel keeps scores in the log2 domain:
// s2 = scale * log2(e) * q . k, so exp(x) becomes exp2f(x2) (one MUFU op).
//
// State of one query row over the tokens seen so far:
//   m  the largest s2 seen (-inf while no token has been seen; the wgmma
//      tiles let it lag the largest by up to kRescaleSlack, LazyMax),
//   l  sum of exp2(s2 - m) over the tokens,
//   o  sum of exp2(s2 - m) * v (normalized by l only at the end).
// Edge cases: a row with no visible token keeps m = -inf and l = 0; its
// partial is written as o = 0, lse2 = -inf and has weight 0 in the merge.
// SafeMax turns -inf into 0 so that exp2(-inf - m) never becomes NaN.
#ifndef BANYAN_ATTENTION_KERNELS_STATE_CUH_
#define BANYAN_ATTENTION_KERNELS_STATE_CUH_

#include <math_constants.h>

#include <type_traits>

namespace banyan::attention::kernels {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ float SafeMax(float m) { return m == -CUDART_INF_F ? 0.0f : m; }

// Moves the running max from m_old to m_new (>= m_old); returns the factor
// that l and o must be multiplied by (0 when the state was empty).
__device__ __forceinline__ float RescaleFactor(float m_old, float m_new) { return exp2f(m_old - SafeMax(m_new)); }

// Lazy rescaling (the wgmma tiles, wgmma_tile.cuh): the running max moves only
// when a tile's max exceeds it by more than kRescaleSlack, so that o is
// rescaled about once per item instead of on most tiles (a warp pays the
// multiply when any of its 16 rows moved). Until then m stays below the true
// max: every exp2(s2 - m) is at most 2^kRescaleSlack, l and o hold up to that
// factor more, which fp32 state and 16-bit P (bf16 and fp16 both reach 2^15)
// carry without loss; lse2 = m + log2(l) is the same.
inline constexpr float kRescaleSlack = 8.0f;
__device__ __forceinline__ float LazyMax(float m_old, float tile_max) {
  return tile_max > m_old + kRescaleSlack ? tile_max : m_old;  // -inf + slack stays -inf: the first max moves
}

// exp2 of a score against the running max (0 for masked scores, s2 = -inf).
__device__ __forceinline__ float Prob(float s2, float m) { return exp2f(s2 - SafeMax(m)); }

// Final log2-sum-exp2 of a state; -inf for an empty state.
__device__ __forceinline__ float FinalLse2(float m, float l) { return l > 0.0f ? m + log2f(l) : -CUDART_INF_F; }
// 1 / l, or 0 for an empty state (its o is then 0).
__device__ __forceinline__ float FinalScale(float l) { return l > 0.0f ? 1.0f / l : 0.0f; }

// Merge (hydragen eq. 5) in two passes: the max of the parts' lse2, then each
// part's weight exp2(lse2_i - max); o = sum w_i o_i / sum w_i and
// lse2 = max + log2(sum w_i). Parts with lse2 = -inf get weight 0.
__device__ __forceinline__ float MergeWeight(float lse2, float max_lse2) { return exp2f(lse2 - SafeMax(max_lse2)); }
__device__ __forceinline__ float MergedLse2(float max_lse2, float weight_sum) {
  return weight_sum > 0.0f ? SafeMax(max_lse2) + log2f(weight_sum) : -CUDART_INF_F;
}

// The TMA kernel's partial o type (StoreRowPartialsAt's PartialT below): the
// 16-bit KV type at D = 64 and, at D = 128, in the kernel of the lean
// register split (kLean: shared rings, the large plans' kernel), else fp32.
// H200, session 11: 16-bit partials 2-4% faster on the D 64 engine rows, at
// D 128 up to 3% faster on the large shapes but 4-8% slower on the small ones
// (whose short-plan feed runs the fed split's kernel: fp32 there).
template <typename T, int D, bool kLean = false>
using TmaPartial = std::conditional_t<D == 64 || kLean, T, float>;

// The end of a batched item (tree.cuh, tree_wgmma.cuh), for the two packed
// rows a thread holds in the m16n8 accumulator layout: row sums over the 4
// threads of a row, then each valid row's partial (o / l, lse2) into its
// (entry, chunk) slot. o(i, k): the accumulator element of n-tile i (8
// columns), k = 2 * r + column parity. REQUIRES: every lane of the warp calls.
// StoreRowPartialsAt: the same with the rows' slots (entry_partial_base[e] +
// chunk) already loaded (a kernel that loads them when the item starts).
// PartialT: float, or the 16-bit KV type (the TMA kernel: the partial o
// buffer then holds 16-bit values at the same element offsets, and the merge
// reads it as MergeKernel<..., PartialT>; o is normalized, so its values lie
// within V's range).
template <int D, typename PartialT = float, typename Params, typename Acc>
__device__ __forceinline__ void StoreRowPartialsAt(const Params& p, const int32_t (&slots)[2], const int32_t (&head)[2],
                                                   const bool (&valid)[2], const float (&m)[2], float (&l)[2], int tq,
                                                   Acc o) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    if (!valid[r]) continue;
    const int64_t slot = slots[r];
    const float inv = FinalScale(l[r]);
    const int64_t base = (slot * p.num_q_heads + head[r]) * D;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const float x = o(i, r * 2) * inv, y = o(i, r * 2 + 1) * inv;
      if constexpr (std::is_same_v<PartialT, float>) {
        *reinterpret_cast<float2*>(p.partial_o + base + i * 8 + tq * 2) = make_float2(x, y);
      } else {
        *reinterpret_cast<uint32_t*>(reinterpret_cast<PartialT*>(p.partial_o) + base + i * 8 + tq * 2) =
            PackPair<PartialT>(x, y);
      }
    }
    if (tq == 0) p.partial_lse[slot * p.num_q_heads + head[r]] = FinalLse2(m[r], l[r]);
  }
}
template <int D, typename Params, typename Item, typename Acc>
__device__ __forceinline__ void StoreRowPartials(const Params& p, const Item& it, const int32_t (&entry)[2],
                                                 const int32_t (&head)[2], const bool (&valid)[2],
                                                 const float (&m)[2], float (&l)[2], int tq, Acc o) {
  const int32_t slots[2] = {valid[0] ? p.entry_partial_base[entry[0]] + it.chunk : 0,
                            valid[1] ? p.entry_partial_base[entry[1]] + it.chunk : 0};
  StoreRowPartialsAt<D>(p, slots, head, valid, m, l, tq, o);
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_STATE_CUH_
