// The merge of partial states along each query row's entries (hydragen eq. 5,
// lean-attention 4.1), with the math in state.cuh. One warp per (row, query
// head); lane i owns output dims [i * D/32, (i + 1) * D/32). A row's partial
// slots are one contiguous range, row_slot_indptr[row] .. [row + 1]
// (work_plan.h; partial_lse in log2): lane j reads the lse of slots j, j + 32,
// ...; the warp then walks the slots with every o load independent (no chain
// of dependent loads per entry). Writes out in out_dtype and, when asked, the
// row's natural-log lse. Grid-stride over (row, head): the grid is fixed per
// bucket, the row count is read from device memory (CUDA-graph friendly).
//
// Programmatic dependent launch (Hopper, sm_90+): TreeAttention launches the
// merge with cudaLaunchAttributeProgrammaticStreamSerialization, and the
// persistent kernel lets it start at once (TriggerDependents). The merge's
// prologue (row count, the first row's slot range: plan arrays, written before
// either launch) overlaps the item kernel; GridDependencyWait then blocks until
// the item kernel has finished and its partials are visible. Without the
// attribute (or before sm_90) both calls are no-ops and the launches simply
// run one after the other.
#ifndef BANYAN_ATTENTION_KERNELS_MERGE_CUH_
#define BANYAN_ATTENTION_KERNELS_MERGE_CUH_

#include "attention/kernels/mma.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/state.cuh"
#include "attention/work_plan_cluster.h"

#include <type_traits>

namespace banyan::attention::kernels {

inline constexpr int kMergeThreads = 128;

// Lets the dependent launch (the merge) start; every thread of the calling CTA.
__device__ __forceinline__ void TriggerDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// Waits until the grid this launch depends on has completed and its memory is visible.
__device__ __forceinline__ void GridDependencyWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// A lane's kPerLane partial-o values of one slot as loaded (float4 / float2,
// or for 16-bit partials uint2 / uint32_t), and their value j as float.
template <int kPerLane, typename PartialT>
struct PartialVec {
  using type = std::conditional_t<std::is_same_v<PartialT, float>, std::conditional_t<kPerLane == 4, float4, float2>,
                                  std::conditional_t<kPerLane == 4, uint2, uint32_t>>;
};
template <typename PartialT, typename V>
__device__ __forceinline__ float PartialAt(const V& v, int j) {
  if constexpr (std::is_same_v<V, float4>) {
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
  } else if constexpr (std::is_same_v<V, float2>) {
    return j == 0 ? v.x : v.y;
  } else if constexpr (std::is_same_v<V, uint2>) {
    return UnpackPair<PartialT>(j < 2 ? v.x : v.y, j % 2);
  } else {
    return UnpackPair<PartialT>(v, j);
  }
}

// The first loads of a merge of partial slots [begin, end) of one (row,
// head): the lse of slots lane, lane + kLanes, ... up to kLanes of them, and
// the o of the first kFirst slots, all in flight at once (one L2 round trip;
// the merge kernel of a small merge preloads 24: a 64-leaf tree with a
// 2048-token prefix has 17 slots). Partials are read through L2 (__ldcg):
// they were written by another grid (or other CTAs of this one). Issue, then
// FinishMerge; several of them issued before the first finish keep several
// (row, head) pairs' loads in flight (MergeClusterRows).
template <int D, int kFirst, int kLanes, typename PartialT>
struct SlotLoads {
  static constexpr int kPerLane = D / kLanes;
  static_assert(kPerLane == 2 || kPerLane == 4, "a lane's dims are one float2 or float4 (16-bit: 4 or 8 bytes)");
  static_assert(kFirst % 4 == 0 && kFirst <= kLanes, "whole groups of 4 within the first kLanes slots");
  using Vec = typename PartialVec<kPerLane, PartialT>::type;
  const PartialT* src;  // this lane's dims of slot begin
  int64_t stride;       // from one slot's o to the next
  int32_t begin, n;
  float lse0;           // the lse of slot begin + lane (-inf past n)
  Vec first[kFirst];

  __device__ __forceinline__ void Issue(const TreeParams& p, int32_t head, int32_t slot_begin, int32_t slot_end,
                                        int lane) {
    begin = slot_begin;
    n = slot_end - slot_begin;
    src = reinterpret_cast<const PartialT*>(p.partial_o) + (int64_t{begin} * p.num_q_heads + head) * D +
          lane * kPerLane;
    stride = int64_t{p.num_q_heads} * D;
#pragma unroll
    for (int j = 0; j < kFirst; ++j) {
      if (j < n) first[j] = __ldcg(reinterpret_cast<const Vec*>(src + j * stride));
    }
    lse0 = lane < n ? __ldcg(p.partial_lse + int64_t{begin + lane} * p.num_q_heads + head) : -CUDART_INF_F;
  }
};

// The rest of the merge SlotLoads::Issue started: every slot's lse (lane j:
// slots j, j + kLanes, ...) and their max, then the weights, every slot's o
// (the group's dims) weighted, out (and lse) for query row `row`, head
// `head`. Called by the group of kLanes lanes that issued (a whole warp, or
// a half-warp at D = 64), `lane` its index in the group, `mask` its lanes.
template <int D, int kFirst, int kLanes, typename PartialT>
__device__ __forceinline__ void FinishMerge(const TreeParams& p, const SlotLoads<D, kFirst, kLanes, PartialT>& s,
                                            int32_t row, int32_t head, int lane, unsigned mask) {
  constexpr int kPerLane = D / kLanes;
  using Vec = typename SlotLoads<D, kFirst, kLanes, PartialT>::Vec;
  const int64_t idx = int64_t{row} * p.num_q_heads + head;
  const int32_t n = s.n, begin = s.begin;
  float max_lse = s.lse0;
  for (int32_t c = lane + kLanes; c < n; c += kLanes) {
    max_lse = fmaxf(max_lse, __ldcg(p.partial_lse + int64_t{begin + c} * p.num_q_heads + head));
  }
#pragma unroll
  for (int off = kLanes / 2; off > 0; off /= 2) max_lse = fmaxf(max_lse, __shfl_xor_sync(mask, max_lse, off, kLanes));
  float acc[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) acc[j] = 0.0f;
  auto add = [&](float wk, const Vec& v) {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) acc[j] += wk * PartialAt<PartialT>(v, j);
  };
  float sum = 0.0f;
  for (int32_t c0 = 0; c0 < n; c0 += kLanes) {
    const int32_t c = c0 + lane;
    float lse = s.lse0;
    if (c0 > 0) lse = c < n ? __ldcg(p.partial_lse + int64_t{begin + c} * p.num_q_heads + head) : -CUDART_INF_F;
    const float w = c < n ? MergeWeight(lse, max_lse) : 0.0f;
    sum += w;
    const int32_t count = min(kLanes, n - c0);
    if (c0 == 0) {  // the preloaded slots, then the rest of the first kLanes
#pragma unroll
      for (int32_t k = 0; k < kFirst; ++k) {
        const float wk = __shfl_sync(mask, w, k, kLanes);
        if (k < count) add(wk, s.first[k]);
      }
    }
    for (int32_t k0 = c0 == 0 ? kFirst : 0; k0 < count; k0 += 8) {  // 8 independent loads in flight
#pragma unroll
      for (int32_t j = 0; j < 8; ++j) {
        const int32_t k = k0 + j;
        const float wk = __shfl_sync(mask, w, k % kLanes, kLanes);
        if (k < count) add(wk, __ldcg(reinterpret_cast<const Vec*>(s.src + (c0 + k) * s.stride)));
      }
    }
  }
#pragma unroll
  for (int off = kLanes / 2; off > 0; off /= 2) sum += __shfl_xor_sync(mask, sum, off, kLanes);
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) StoreAny(p.out, p.out_dtype, idx * D + lane * kPerLane + j, acc[j] * inv);
  if (p.lse != nullptr && lane == 0) p.lse[idx] = MergedLse2(max_lse, sum) * kLn2;
}

// Merges the partial slots [begin, end) of query row `row`, head `head` into
// out (and lse): called by one group of kLanes lanes (a whole warp, or a
// half-warp at D = 64: then twice the pairs in flight per wave), `lane` its
// index in the group, `mask` the group's lanes in the warp. kFirst: slots
// whose o is loaded with the lse (registers: kFirst * D / kLanes).
template <int D, int kFirst = 8, int kLanes = 32, typename PartialT = float>
__device__ __forceinline__ void MergeSlots(const TreeParams& p, int32_t row, int32_t head, int32_t begin, int32_t end,
                                           int lane, unsigned mask = 0xffffffffu) {
  SlotLoads<D, kFirst, kLanes, PartialT> loads;
  loads.Issue(p, head, begin, end, lane);
  FinishMerge<D, kFirst, kLanes, PartialT>(p, loads, row, head, lane, mask);
}

template <int D>
__device__ __forceinline__ void MergeRowHead(const TreeParams& p, int32_t row, int32_t head, int lane) {
  MergeSlots<D>(p, row, head, p.row_slot_indptr[row], p.row_slot_indptr[row + 1], lane);
}

// The lane groups of the whole grid (kLanes lanes each: MergeSlots) stride
// over (row, head) pairs, kThreadsN threads per CTA. The first pair's slot
// range (plan data only) is read before `wait()`, which orders the partials'
// reads after their writes (the PDL dependency wait, or a grid-wide barrier).
template <int D, int kThreadsN, int kFirst = 8, int kLanes = 32, typename PartialT = float, typename Wait>
__device__ __forceinline__ void MergeRowsGridStride(const TreeParams& p, Wait wait) {
  constexpr int kGroups = kThreadsN / kLanes;  // per CTA
  const int lane = threadIdx.x % kLanes;
  const unsigned mask = kLanes == 32 ? 0xffffffffu : ((1u << kLanes) - 1u) << (threadIdx.x % 32 / kLanes * kLanes);
  const int64_t groups = int64_t{gridDim.x} * kGroups;
  int64_t idx = int64_t{blockIdx.x} * kGroups + threadIdx.x / kLanes;
  const int64_t total = int64_t{*p.num_queries} * p.num_q_heads;
  int32_t row = static_cast<int32_t>(idx / p.num_q_heads);
  int32_t begin = 0, end = 0;
  if (idx < total) {
    begin = p.row_slot_indptr[row];
    end = p.row_slot_indptr[row + 1];
  }
  wait();
  while (idx < total) {
    MergeSlots<D, kFirst, kLanes, PartialT>(p, row, static_cast<int32_t>(idx % p.num_q_heads), begin, end, lane, mask);
    idx += groups;
    if (idx >= total) break;
    row = static_cast<int32_t>(idx / p.num_q_heads);
    begin = p.row_slot_indptr[row];
    end = p.row_slot_indptr[row + 1];
  }
}

// kFirst: slots preloaded per (row, head) (MergeSlots). 24 needs ~170
// registers (3 CTAs per SM), 4 (the host's narrow merge: rows of large plans
// have 2-3 slots) at most 64: the host picks 24 only for merges that fit in
// one such wave (kMergeWideWarpsPerSm warps per SM).
// kLanes: lanes per (row, head); 16 at D = 64 (kMergeHalfWarpDim) outside the
// wide case, so that a merge of up to 64 pairs per SM runs in one wave.
inline constexpr int kMergeWideWarpsPerSm = 8;
inline constexpr int kMergeHalfWarpDim = 64;
// The merge launch's lanes per (row, head): the one place that decides them
// (the launch's template argument and the grid size, tree_attention.cu).
constexpr int MergeLanes(int head_dim, bool wide) { return !wide && head_dim == kMergeHalfWarpDim ? 16 : 32; }
// PartialT: the partial o buffer's element type (float; the KV type after
// the TMA kernel, state.cuh StoreRowPartialsAt).
template <int D, int kFirst = 8, int kLanes = 32, typename PartialT = float>
__global__ void __launch_bounds__(kMergeThreads) MergeKernel(const TreeParams p) {
  static_assert(D == 64 || D == 128, "the merge's vector loads cover D / kLanes = 2 or 4 floats per lane");
  // The prologue overlaps the item kernel under PDL.
  unsigned long long* trace = p.trace_merge != nullptr ? p.trace_merge + int64_t{blockIdx.x} * kTraceMergeWords : nullptr;
  long long clk = 0;
  if (trace != nullptr && threadIdx.x == 0) trace[0] = GlobalTimerNs();
  MergeRowsGridStride<D, kMergeThreads, kFirst, kLanes, PartialT>(p, [&] {
    GridDependencyWait();
    if (trace != nullptr && threadIdx.x == 0) {
      trace[1] = GlobalTimerNs();
      clk = clock64();
    }
  });
  if (trace != nullptr) {
    __syncthreads();
    if (threadIdx.x == 0) {
      trace[2] = GlobalTimerNs();
      trace[3] = clock64() - clk;
    }
  }
}

// The merge inside a launch of thread-block clusters (a cluster placement,
// work_plan_cluster.h: every partial of the rows a cluster owns was written by
// its own CTAs). The cluster size is the launch's (one-dimensional clusters;
// TreeAttention picks it); the host sizes the grid from how many such
// clusters the device holds at once.
static_assert(kClusterRowsStride == 4, "a cluster's rows are one int4 (work_plan_cluster.h)");

// Every thread of every CTA of the cluster: arrive with release semantics,
// wait with acquire semantics (cluster scope): the partials any of the
// cluster's threads stored before are visible to all of them after. Warp-
// uniform (.aligned): every thread of a warp calls it at the same point.
__device__ __forceinline__ void ClusterSync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

// After ClusterSync: the warps of the cluster's CTAs (warp `warp` of `warps`
// per CTA that call it) stride over the (row, head) pairs the cluster owns
// (p.cluster_rows: queries [x, y) x the query heads of KV heads [z, w)) and
// merge each. A cluster with at most one pair per warp merges it with kFirst
// slots preloaded (MergeSlots); with more (a cluster owning whole row tiles
// of a large plan, whose rows have few slots) each warp issues the loads of
// kClusterMergePairs pairs before it finishes the first, so that their L2
// round trips overlap instead of following one another. PartialT: the item
// kernel's partial type. (Reading the first pair's slot range before the
// barrier and preloading 16 slots instead of 8 measured 5 us slower on the
// H100, session 38.)
inline constexpr int kClusterMergePairs = 4;
template <int D, typename PartialT, int kFirst = 8>
__device__ __forceinline__ void MergeClusterRows(const TreeParams& p, int warp, int warps) {
  unsigned cluster = 0, rank = 0, size = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(cluster));
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
#endif
  const int4 own = reinterpret_cast<const int4*>(p.cluster_rows)[cluster];
  const int32_t heads = (own.w - own.z) * p.group;
  const int32_t pairs = (own.y - own.x) * heads;  // a cluster's rows: a small plan's (32-bit division below)
  const int lane = threadIdx.x % 32;
  const int32_t step = static_cast<int32_t>(size) * warps;  // the cluster's warps
  auto row_of = [&](int32_t i) { return own.x + i / heads; };
  auto head_of = [&](int32_t i) { return own.z * p.group + i % heads; };
  if (pairs <= step) {
    const int32_t i = static_cast<int32_t>(rank) * warps + warp;
    if (i < pairs) {
      const int32_t q = row_of(i);
      MergeSlots<D, kFirst, 32, PartialT>(p, q, head_of(i), p.row_slot_indptr[q], p.row_slot_indptr[q + 1], lane);
    }
    return;
  }
  constexpr int kBatch = kClusterMergePairs, kBatchFirst = 4;
  for (int32_t i0 = static_cast<int32_t>(rank) * warps + warp; i0 < pairs; i0 += kBatch * step) {
    SlotLoads<D, kBatchFirst, 32, PartialT> loads[kBatch];
    int32_t row[kBatch], head[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int32_t i = i0 + k * step;
      row[k] = row_of(i);
      head[k] = head_of(i);
      if (i < pairs) loads[k].Issue(p, head[k], p.row_slot_indptr[row[k]], p.row_slot_indptr[row[k] + 1], lane);
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      if (i0 + k * step < pairs) FinishMerge<D, kBatchFirst, 32, PartialT>(p, loads[k], row[k], head[k], lane, 0xffffffffu);
    }
  }
}

// A grid-wide barrier for a cooperative launch (every CTA resident): the
// writer side is __syncthreads; __threadfence; atomicAdd, the last CTA to
// arrive resets the count and bumps the generation the others spin on; then
// __threadfence and __syncthreads. Partials written before it are read after
// it through L2 (__ldcg). bar[0], bar[1]: zero before the first launch.
__device__ __forceinline__ void GridBarrier(int32_t* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile int32_t* generation = bar + 1;
    const int32_t seen = *generation;  // read before arriving: the bump comes after every arrival
    __threadfence();
    if (atomicAdd(bar, 1) == static_cast<int32_t>(gridDim.x) - 1) {
      atomicExch(bar, 0);  // for the next launch
      __threadfence();
      atomicAdd(bar + 1, 1);
    } else {
      while (*generation == seen) __nanosleep(64);
    }
    __threadfence();
  }
  __syncthreads();
}

// The merge inside the persistent kernel after GridBarrier (one launch): the
// warps of every CTA grid-stride over (row, head) pairs like MergeKernel. The
// first pair's slot range is read before the barrier. kThreadsN: threads per CTA.
template <int D, int kThreadsN>
__device__ __forceinline__ void BarrierThenMergeAllRows(const TreeParams& p) {
  MergeRowsGridStride<D, kThreadsN>(p, [&p] { GridBarrier(p.grid_barrier); });
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
