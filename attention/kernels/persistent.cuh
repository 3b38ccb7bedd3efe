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
// descriptor is loaded while the current one runs. s_rows / s_count:
// the fused merge's shared memory (merge.cuh CompleteItem).
template <typename T, int D, typename RunBatched>
__device__ __forceinline__ void RunCtaItems(const TreeParams& p, char* smem, int32_t* s_rows, int* s_count,
                                            RunBatched&& run_batched) {
  TriggerDependents();  // the merge grid may launch now; it waits for this grid's completion
  const int32_t begin = p.cta_item_indptr[blockIdx.x], end = p.cta_item_indptr[blockIdx.x + 1];
  WorkItem next = p.cta_first_item[blockIdx.x];  // loaded alongside the indptr, not after it
  KvPipeline pipe;
  for (int32_t i = begin; i < end; ++i) {
    const WorkItem it = next;
    const bool has_next = i + 1 < end;
    if (has_next) next = p.items[i + 1];
    if constexpr (sizeof(T) == 2) {
      if (it.kind == static_cast<int32_t>(ItemKind::kBatched)) {
        // Chained into the next item when it is batched too (its first KV tiles load during this one).
        const bool chain = p.chain_items != 0 && has_next && next.kind == static_cast<int32_t>(ItemKind::kBatched);
        run_batched(it, pipe, next, chain);
      } else {
        RunFlattenedItem<T, D>(p, it, smem);
      }
    } else {
      RunFlattenedItem<T, D>(p, it, smem);  // the planner never emits batched items for fp32
    }
    if (p.query_done != nullptr) CompleteItem<D, kThreads>(p, it, s_rows, s_count);
    __syncthreads();  // shared memory is reused by the next item
  }
  if (p.grid_barrier != nullptr) BarrierThenMergeAllRows<D, kThreads>(p);  // one launch (cooperative)
}

// The kNarrow kernel (tree.cuh: 16 rows per warp, 4 KV stages, Q fragments
// in registers, one CTA per SM).
template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1) PersistentAttentionKernel(const TreeParams p) {
  extern __shared__ __align__(16) char smem[];
  __shared__ int32_t s_rows[kMaxMergeRows];
  __shared__ int s_count;
  RunCtaItems<T, D>(p, smem, s_rows, &s_count,
                    [&](const WorkItem& it, KvPipeline& pipe, const WorkItem& next, bool chain) {
                      RunBatchedItemChained<T, D>(p, it, smem, pipe, next, chain);
                    });
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_PERSISTENT_CUH_
