// The persistent attention kernel: one launch runs every work item of a
// WorkPlan (all levels of the tree, batched and flattened items alike). CTA b
// runs items cta_item_indptr[b] .. cta_item_indptr[b + 1], the list the
// host's stream-K style planner (work_plan.h) balanced; the grid is fixed per
// device and dtype, so the launch is CUDA-graph capturable. The merge is a
// second launch (merge.cuh) that the kernel lets start at once
// (TriggerDependents, programmatic dependent launch on sm_90+) so that its
// launch latency and prologue hide behind the items; or, with the fused merge
// (query_done != nullptr), the CTA that finishes a row's last item merges it;
// or, in a cooperative launch (grid_barrier != nullptr), every CTA merges
// after a grid-wide barrier (one launch, the merge spread over all CTAs).
#ifndef BANYAN_ATTENTION_KERNELS_PERSISTENT_CUH_
#define BANYAN_ATTENTION_KERNELS_PERSISTENT_CUH_

#include "attention/kernels/decode.cuh"
#include "attention/kernels/merge.cuh"
#include "attention/kernels/params.cuh"
#include "attention/kernels/tree.cuh"

namespace banyan::attention::kernels {

template <int a, int b>
inline constexpr int kMaxOf = a > b ? a : b;

// fp32 KV runs flattened items only.
template <typename T, int D>
inline constexpr int kPersistentSmemBytes =
    sizeof(T) == 4 ? kFlattenedSmemBytes<T, D> : kMaxOf<kBatchedSmemBytes<T, D>, kFlattenedSmemBytes<T, D>>;

// The loop of one CTA over its items, for any batched-item implementation:
// run_batched(item, pipe, next, chain) runs a kBatched item (16-bit KV only;
// chain: the CTA's next item is batched too, see tree.cuh KvPipeline), flattened items run RunFlattenedItem. The next item's
// descriptor is loaded while the current one runs; the first comes with the
// CTA's range in its head (work_plan.h), loaded before anything else.
// kNarrow (the mma.sync kernel): batched items run RunBatchedItemChained
// directly, the first one with its page ids and q rows from the head
// (p.use_head), and item groups (WorkItem::group, p.run_groups) run at once
// (RunGroupedItems); run_batched is then unused. s_rows / s_count: the fused
// merge's shared memory (merge.cuh CompleteItem).
template <typename T, int D, bool kNarrow = false, typename RunBatched>
__device__ __forceinline__ void RunCtaItems(const TreeParams& p, char* smem, int32_t* s_rows, int* s_count,
                                            RunBatched&& run_batched) {
  TriggerDependents();  // the merge grid may launch now; it waits for this grid's completion
  const int32_t* head = p.cta_head + int64_t{blockIdx.x} * kHeadStride;
  TraceRecord(p, 0, 4);
  static_assert(sizeof(WorkItem) == 3 * sizeof(int4) && kHeadPagesAt == 16, "head layout (work_plan.h)");
  WorkItem next;
  {
    const int4* h4 = reinterpret_cast<const int4*>(head);
    int4 w[3] = {h4[0], h4[1], h4[2]};
    memcpy(&next, w, sizeof(next));
  }
  const int2 range = reinterpret_cast<const int2*>(head)[6];  // begin, end
  const int32_t begin = range.x, end = range.y;
  int4 next_ie = int4{0, 0, 0, 0};  // kNarrow: the next item's item_entry
  if constexpr (kNarrow) {
    if (begin < end) next_ie = p.item_entry[begin];
  }
  KvPipeline pipe;
  for (int32_t i = begin; i < end;) {
    const WorkItem it = next;
    const int4 ie = next_ie;
    int32_t span = 1;  // items this step runs
    if constexpr (kNarrow && sizeof(T) == 2) {
      if (p.run_groups != 0 && it.group >= 2) span = it.group;
    }
    const bool has_next = i + span < end;
    if (has_next) {
      next = p.items[i + span];
      if constexpr (kNarrow) next_ie = p.item_entry[i + span];
    }
    if constexpr (sizeof(T) == 2) {
      if (span > 1) {
        if constexpr (kNarrow) {
          WorkItem group[kStages];
          int4 group_ie[kStages];
          group[0] = it;
          group_ie[0] = ie;
#pragma unroll
          for (int s = 1; s < kStages; ++s) {
            group[s] = s < span ? p.items[i + s] : it;
            group_ie[s] = s < span ? p.item_entry[i + s] : ie;
          }
          RunGroupedItems<T, D>(p, group, group_ie, span, smem);
          if (p.query_done != nullptr) {
            for (int s = 0; s < span; ++s) {
              __syncthreads();
              CompleteItem<D, kThreads>(p, s == 0 ? it : p.items[i + s], s_rows, s_count);
            }
          }
        }
      } else if (it.kind == static_cast<int32_t>(ItemKind::kBatched)) {
        // Chained into the next item when it is batched too (its first KV
        // tiles load during this one) and not a group (groups start empty).
        bool next_group = false;
        if constexpr (kNarrow) next_group = p.run_groups != 0 && next.group >= 2;
        const bool chain = p.chain_items != 0 && has_next && next.kind == static_cast<int32_t>(ItemKind::kBatched) &&
                           !next_group;
        if constexpr (kNarrow) {
          const bool first = i == begin;
          ItemHead ihead;
          if (first && p.use_head != 0) {
            const int2 pt = reinterpret_cast<const int2*>(head)[7];  // page_base, tiles (an L1 hit by now)
            ihead.pages = head + kHeadPagesAt;
            ihead.page_base = pt.x;
            ihead.tiles = pt.y;
            ihead.qrows = head + kHeadQrowsAt;
          }
          RunBatchedItemChained<T, D>(p, it, smem, pipe, next, chain, ihead, first, ie, next_ie);
        } else {
          run_batched(it, pipe, next, chain);
        }
      } else {
        RunFlattenedItem<T, D>(p, it, smem);
      }
    } else {
      RunFlattenedItem<T, D>(p, it, smem);  // the planner never emits batched items for fp32
    }
    if (p.query_done != nullptr && span == 1) CompleteItem<D, kThreads>(p, it, s_rows, s_count);
    __syncthreads();  // shared memory is reused by the next item
    if (i == begin) TraceRecord(p, 2, -1);
    i += span;
  }
  TraceRecord(p, 3, 6);
  if (p.trace != nullptr && threadIdx.x == 0) p.trace[int64_t{blockIdx.x} * kTraceItemWords + 7] = SmId();
  if (p.grid_barrier != nullptr) BarrierThenMergeAllRows<D, kThreads>(p);  // one launch (cooperative)
}

// The kNarrow kernel (tree.cuh: 16 rows per warp, 4 KV stages, Q fragments
// in registers, one CTA per SM).
template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1) PersistentAttentionKernel(const TreeParams p) {
  extern __shared__ __align__(16) char smem[];
  __shared__ int32_t s_rows[kMaxMergeRows];
  __shared__ int s_count;
  RunCtaItems<T, D, true>(p, smem, s_rows, &s_count, [](const WorkItem&, KvPipeline&, const WorkItem&, bool) {});
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_PERSISTENT_CUH_
