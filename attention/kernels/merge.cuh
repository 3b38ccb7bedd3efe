// The merge of partial states along each query row's entries (hydragen eq. 5,
// lean-attention 4.1), with the math in state.cuh. One warp per (row, query
// head); lane i owns output dims [i * D/32, (i + 1) * D/32). Reads the slots
// entry_partial_base[e] .. + entry_num_chunks[e] of every entry e of the row
// (partial_lse in log2), writes out in out_dtype and, when requested, the
// row's natural-log lse. Grid-stride over rows: the grid is fixed per bucket,
// the row count is read from device memory (CUDA-graph friendly).
#ifndef BANYAN_ATTENTION_KERNELS_MERGE_CUH_
#define BANYAN_ATTENTION_KERNELS_MERGE_CUH_

#include "attention/kernels/mma.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/state.cuh"

namespace banyan::attention::kernels {

inline constexpr int kMergeThreads = 128;

template <int D>
__global__ void __launch_bounds__(kMergeThreads) MergeKernel(const TreeParams p) {
  constexpr int kPerLane = D / 32;
  const int lane = threadIdx.x % 32;
  const int64_t total = int64_t{*p.num_queries} * p.num_q_heads;
  const int64_t warps = int64_t{gridDim.x} * (kMergeThreads / 32);
  for (int64_t idx = int64_t{blockIdx.x} * (kMergeThreads / 32) + threadIdx.x / 32; idx < total; idx += warps) {
    const int32_t row = static_cast<int32_t>(idx / p.num_q_heads);
    const int32_t head = static_cast<int32_t>(idx % p.num_q_heads);
    const int32_t begin = p.query_entry_indptr[row], end = p.query_entry_indptr[row + 1];
    float max_lse = -CUDART_INF_F;
    for (int32_t i = begin; i < end; ++i) {
      const int32_t e = p.query_entries[i];
      const int64_t base = p.entry_partial_base[e];
      for (int32_t c = lane; c < p.entry_num_chunks[e]; c += 32) {
        max_lse = fmaxf(max_lse, p.partial_lse[(base + c) * p.num_q_heads + head]);
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, off));
    float acc[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) acc[j] = 0.0f;
    float sum = 0.0f;
    for (int32_t i = begin; i < end; ++i) {
      const int32_t e = p.query_entries[i];
      const int64_t base = p.entry_partial_base[e];
      for (int32_t c = 0; c < p.entry_num_chunks[e]; ++c) {
        const int64_t slot = (base + c) * p.num_q_heads + head;
        const float w = MergeWeight(p.partial_lse[slot], max_lse);
        sum += w;
        const float* src = p.partial_o + slot * D + lane * kPerLane;
#pragma unroll
        for (int j = 0; j < kPerLane; ++j) acc[j] += w * src[j];
      }
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) StoreAny(p.out, p.out_dtype, idx * D + lane * kPerLane + j, acc[j] * inv);
    if (p.lse != nullptr && lane == 0) p.lse[idx] = MergedLse2(max_lse, sum) * kLn2;
  }
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_MERGE_CUH_
