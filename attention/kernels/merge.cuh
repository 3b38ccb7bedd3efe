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

// Merges every partial of query row `row`, head `head` into out (and lse):
// called by one whole warp. Partials are read through L2 (__ldcg): in the
// fused merge they were written by other CTAs of the same launch.
template <int D>
__device__ __forceinline__ void MergeRowHead(const TreeParams& p, int32_t row, int32_t head, int lane) {
  constexpr int kPerLane = D / 32;
  const int64_t idx = int64_t{row} * p.num_q_heads + head;
  const int32_t begin = p.query_entry_indptr[row], end = p.query_entry_indptr[row + 1];
  float max_lse = -CUDART_INF_F;
  for (int32_t i = begin; i < end; ++i) {
    const int32_t e = p.query_entries[i];
    const int64_t base = p.entry_partial_base[e];
    for (int32_t c = lane; c < p.entry_num_chunks[e]; c += 32) {
      max_lse = fmaxf(max_lse, __ldcg(p.partial_lse + (base + c) * p.num_q_heads + head));
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
#pragma unroll 4
    for (int32_t c = 0; c < p.entry_num_chunks[e]; ++c) {
      const int64_t slot = (base + c) * p.num_q_heads + head;
      const float w = MergeWeight(__ldcg(p.partial_lse + slot), max_lse);
      sum += w;
      const float* src = p.partial_o + slot * D + lane * kPerLane;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) acc[j] += w * __ldcg(src + j);
    }
  }
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) StoreAny(p.out, p.out_dtype, idx * D + lane * kPerLane + j, acc[j] * inv);
  if (p.lse != nullptr && lane == 0) p.lse[idx] = MergedLse2(max_lse, sum) * kLn2;
}

template <int D>
__global__ void __launch_bounds__(kMergeThreads) MergeKernel(const TreeParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t total = int64_t{*p.num_queries} * p.num_q_heads;
  const int64_t warps = int64_t{gridDim.x} * (kMergeThreads / 32);
  for (int64_t idx = int64_t{blockIdx.x} * (kMergeThreads / 32) + threadIdx.x / 32; idx < total; idx += warps) {
    MergeRowHead<D>(p, static_cast<int32_t>(idx / p.num_q_heads), static_cast<int32_t>(idx % p.num_q_heads), lane);
  }
}

// The merge fused into the persistent kernel (one launch): after an item has
// written its partials, the CTA counts one completion for every query row the
// item touched (query_done[q], atomic); the CTA whose completion makes the
// count reach query_items[q] merges row q (all heads) and sets the counter
// back to 0 for the next launch (CUDA-graph replays). The writer side is
// store; __threadfence; __syncthreads; atomicAdd, the reader side atomicAdd;
// __threadfence; L2 loads. Every thread of the CTA calls it after the item.
// s_rows: kMaxMergeRows ints of shared memory, s_count one.
inline constexpr int kMaxMergeRows = 2 * kTileRows;
template <int D, int kThreadsN>
__device__ __forceinline__ void CompleteItem(const TreeParams& p, const WorkItem& it, int32_t* s_rows, int* s_count) {
  __threadfence();
  if (threadIdx.x == 0) *s_count = 0;
  __syncthreads();
  const int32_t seg_entry0 = p.segment_entry_indptr[it.segment];
  const int32_t e_first = seg_entry0 + it.row_begin / p.group;
  const int32_t n = seg_entry0 + (it.row_begin + it.row_count - 1) / p.group - e_first + 1;
  for (int32_t i = threadIdx.x; i < n; i += kThreadsN) {
    const int32_t q = p.entry_query[e_first + i];
    if (atomicAdd(p.query_done + q, 1) + 1 == p.query_items[q]) s_rows[atomicAdd(s_count, 1)] = q;
  }
  __syncthreads();
  const int count = *s_count;
  if (count == 0) return;
  __threadfence();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = warp; i < count * p.num_q_heads; i += kThreadsN / 32) {
    MergeRowHead<D>(p, s_rows[i / p.num_q_heads], i % p.num_q_heads, lane);
  }
  for (int i = threadIdx.x; i < count; i += kThreadsN) p.query_done[s_rows[i]] = 0;
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_MERGE_CUH_
